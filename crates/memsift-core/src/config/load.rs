//! Loading: the built-in defaults compiled in, overlaid table by table by the operator's file,
//! then validated, so a `Config` that exists is a valid one.

use std::path::Path;

use super::Config;
use super::error::ConfigError;

/// The documented default configuration, compiled in so the binary runs from any directory.
pub const DEFAULT_CONFIG_TOML: &str = include_str!("../../../../config/memsift.toml");

impl Config {
    /// The built-in defaults alone.
    pub fn defaults() -> Config {
        Config::from_layers(None).expect("the built-in config/memsift.toml is valid: a unit test parses it")
    }

    /// The defaults overlaid by an operator's TOML text (`origin` names it in errors).
    pub fn from_layers(overlay: Option<(&str, &str)>) -> Result<Config, ConfigError> {
        let mut merged: toml::Table = toml::from_str(DEFAULT_CONFIG_TOML).map_err(|error| ConfigError::Parse {
            origin: "built-in defaults".to_owned(),
            message: error.to_string(),
        })?;
        if let Some((origin, text)) = overlay {
            let user: toml::Table = toml::from_str(text).map_err(|error| ConfigError::Parse {
                origin: origin.to_owned(),
                message: error.to_string(),
            })?;
            merge_tables(&mut merged, user);
        }
        let origin = overlay.map(|(origin, _)| origin).unwrap_or("built-in defaults");
        let config: Config = toml::Value::Table(merged)
            .try_into()
            .map_err(|error: toml::de::Error| ConfigError::Parse {
                origin: origin.to_owned(),
                message: error.to_string(),
            })?;
        config.validate()?;
        Ok(config)
    }

    /// Reads the defaults overlaid by the file at `path`.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_owned(),
            source,
        })?;
        Config::from_layers(Some((&path.display().to_string(), &text)))
    }
}

/// Overlays `over` on `base`: tables merge key by key, anything else replaces.
fn merge_tables(base: &mut toml::Table, over: toml::Table) {
    for (key, value) in over {
        match (base.get_mut(&key), value) {
            (Some(toml::Value::Table(base_table)), toml::Value::Table(over_table)) => {
                merge_tables(base_table, over_table)
            }
            (_, value) => {
                base.insert(key, value);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::config::{Config, ProviderKind};
    use crate::status::Purpose;

    #[test]
    fn the_built_in_defaults_parse_and_validate() {
        let config = Config::defaults();
        assert_eq!(config.segments.idle_timeout_secs, 3600);
        assert_eq!(config.extraction.max_attempts, 3);
        assert_eq!(
            config.llm_for(Purpose::Extraction, "standard").unwrap().provider,
            ProviderKind::Heuristic
        );
    }

    #[test]
    fn an_overlay_changes_only_what_it_names() {
        let config = Config::from_layers(Some(("test.toml", "[segments]\nidle_timeout_secs = 120\n"))).unwrap();
        assert_eq!(config.segments.idle_timeout_secs, 120);
        assert_eq!(config.extraction.max_attempts, 3);
    }

    #[test]
    fn a_typo_is_an_error_that_names_the_key() {
        let err = Config::from_layers(Some(("test.toml", "[segments]\nidle_timeout_sec = 120\n")))
            .unwrap_err()
            .to_string();
        assert!(err.contains("test.toml"), "{err}");
        assert!(err.contains("idle_timeout_sec"), "{err}");
    }
}
