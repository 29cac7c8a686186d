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
        let mut merged: toml::Table = parse_table("built-in defaults", DEFAULT_CONFIG_TOML)?;
        if let Some((origin, text)) = overlay {
            merge_tables(&mut merged, parse_table(origin, text)?);
        }
        let origin = overlay.map(|(origin, _)| origin).unwrap_or("built-in defaults");
        // The merged table has no spans, so the path is tracked on the way down: a value of the
        // wrong type (`claim_lease_secs = -1`, `= nan`) is named by its dotted key.
        let config: Config = serde_path_to_error::deserialize(toml::Value::Table(merged)).map_err(|error| {
            let path = error.path().to_string();
            let message = one_line(&error.inner().to_string());
            ConfigError::Parse {
                origin: origin.to_owned(),
                message: if path == "." {
                    message
                } else {
                    format!("{path}: {message}")
                },
            }
        })?;
        config.validate()?;
        Ok(config)
    }

    /// Reads the defaults overlaid by the file at `path`, read through [`read_config_text`].
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = read_config_text(path)?;
        Config::from_layers(Some((&path.display().to_string(), &text)))
    }
}

/// The largest configuration file read: the documented file is about 20 KiB, so anything past
/// 1 MiB is a wrong path (`/dev/zero`, a log, a database), refused before it fills memory.
pub const MAX_CONFIG_BYTES: u64 = 1 << 20;

/// The text of a configuration file, read at most [`MAX_CONFIG_BYTES`] (+1 to tell a file of
/// exactly that size from a longer one), so a device or a huge file is one error, not a stall.
pub fn read_config_text(path: &Path) -> Result<String, ConfigError> {
    let bytes = crate::files::read_at_most(path, MAX_CONFIG_BYTES).map_err(|error| match error {
        crate::files::BoundedReadError::Io(source) => ConfigError::Read {
            path: path.to_owned(),
            source,
        },
        crate::files::BoundedReadError::TooLarge { limit } => ConfigError::TooLarge {
            path: path.to_owned(),
            limit,
        },
    })?;
    String::from_utf8(bytes).map_err(|error| ConfigError::Parse {
        origin: path.display().to_string(),
        message: format!(
            "not UTF-8 text (invalid byte at offset {}); name the TOML configuration file",
            error.utf8_error().valid_up_to()
        ),
    })
}

/// Parses one layer; the error is one line naming the line and column (the parser's own text
/// draws the line over several).
fn parse_table(origin: &str, text: &str) -> Result<toml::Table, ConfigError> {
    toml::from_str(text).map_err(|error: toml::de::Error| {
        let at = error.span().map(|span| {
            let before = &text[..span.start.min(text.len())];
            let line = before.matches('\n').count() + 1;
            let column = before.rsplit('\n').next().map_or(0, |tail| tail.chars().count()) + 1;
            format!("line {line}, column {column}: ")
        });
        ConfigError::Parse {
            origin: origin.to_owned(),
            message: format!("{}{}", at.unwrap_or_default(), one_line(error.message())),
        }
    })
}

/// A message on one line: its lines joined with "; ", blank ones left out.
fn one_line(message: &str) -> String {
    message
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty())
        .collect::<Vec<_>>()
        .join("; ")
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
