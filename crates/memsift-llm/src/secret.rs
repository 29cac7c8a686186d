//! API keys: read once from an environment variable or a file, then held only as a `SecretString`.
//!
//! Errors name the variable or the file, never the value, and `SecretString`'s `Debug` is redacted,
//! so a key cannot reach a log line through a config or client dump.

use std::path::{Path, PathBuf};

use memsift_core::config::LlmConfig;
use secrecy::SecretString;

/// Why a key could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    /// The environment variable is unset or empty.
    #[error(
        "llm.{key}: environment variable {variable} is unset or empty; export the API key in it or use api_key_file"
    )]
    MissingEnv {
        /// The `{purpose}_{tier}` key.
        key: String,
        /// The variable name.
        variable: String,
    },
    /// The file could not be read.
    #[error("llm.{key}: cannot read api_key_file {path}: {source}; fix the path or its permissions")]
    Unreadable {
        /// The `{purpose}_{tier}` key.
        key: String,
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file is empty.
    #[error("llm.{key}: api_key_file {path} is empty; put the API key in it")]
    EmptyFile {
        /// The `{purpose}_{tier}` key.
        key: String,
        /// The file.
        path: PathBuf,
    },
    /// Both sources are configured, so which one wins would be a guess.
    #[error("llm.{key}: both api_key_env and api_key_file are set; keep only one")]
    Both {
        /// The `{purpose}_{tier}` key.
        key: String,
    },
}

/// Loads the key a config names: `Ok(None)` when it names none (heuristic lane, local servers).
pub fn load_api_key(key: &str, config: &LlmConfig) -> Result<Option<SecretString>, KeyError> {
    match (&config.api_key_env, &config.api_key_file) {
        (Some(_), Some(_)) => Err(KeyError::Both { key: key.to_owned() }),
        (Some(variable), None) => key_from_env(key, variable).map(Some),
        (None, Some(path)) => key_from_file(key, path).map(Some),
        (None, None) => Ok(None),
    }
}

/// Reads a key from an environment variable.
pub fn key_from_env(key: &str, variable: &str) -> Result<SecretString, KeyError> {
    match std::env::var(variable) {
        Ok(value) if !value.trim().is_empty() => Ok(SecretString::from(value.trim().to_owned())),
        _ => Err(KeyError::MissingEnv {
            key: key.to_owned(),
            variable: variable.to_owned(),
        }),
    }
}

/// Reads a key from a file; surrounding whitespace (the usual trailing newline) is dropped.
pub fn key_from_file(key: &str, path: &Path) -> Result<SecretString, KeyError> {
    let text =
        memsift_core::files::read_text_at_most(path, memsift_core::files::MAX_SECRET_FILE_BYTES).map_err(|source| {
            KeyError::Unreadable {
                key: key.to_owned(),
                path: path.to_owned(),
                source,
            }
        })?;
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Err(KeyError::EmptyFile {
            key: key.to_owned(),
            path: path.to_owned(),
        });
    }
    Ok(SecretString::from(trimmed.to_owned()))
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use secrecy::ExposeSecret;

    use super::*;

    #[test]
    fn a_key_file_is_trimmed_and_never_shown_by_debug() {
        let mut file = tempfile::NamedTempFile::new().unwrap();
        writeln!(file, "  sk-test-123  ").unwrap();
        let secret = key_from_file("extraction_standard", file.path()).unwrap();
        assert_eq!(secret.expose_secret(), "sk-test-123");
        assert!(!format!("{secret:?}").contains("sk-test-123"));
    }

    #[test]
    fn a_config_naming_both_sources_or_none_is_handled_without_guessing() {
        let mut config: LlmConfig = toml::from_str("provider = \"anthropic\"").unwrap();
        assert!(load_api_key("k", &config).unwrap().is_none());
        config.api_key_env = Some("X".into());
        config.api_key_file = Some("/nonexistent".into());
        assert_eq!(
            load_api_key("k", &config).unwrap_err().to_string(),
            "llm.k: both api_key_env and api_key_file are set; keep only one"
        );
    }

    #[test]
    fn a_missing_variable_names_the_variable_and_the_fix() {
        let err = key_from_env("extraction_standard", "MEMSIFT_TEST_SURELY_UNSET_VARIABLE").unwrap_err();
        assert_eq!(
            err.to_string(),
            "llm.extraction_standard: environment variable MEMSIFT_TEST_SURELY_UNSET_VARIABLE is unset or empty; export the API key in it or use api_key_file"
        );
    }
}
