//! The configuration's one error type, worded so the operator knows what to change.

use std::path::PathBuf;

/// A configuration problem, worded so the operator knows what to change.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read config file {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file is larger than any configuration file (a device, a log, a wrong path).
    #[error(
        "config file {path} is larger than {limit} bytes; name the memsift TOML file (the documented one is about 20 KiB)"
    )]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// The cap.
        limit: u64,
    },
    /// The file is not valid TOML or has a wrong or unknown key.
    #[error("config file {origin} is invalid: {message}")]
    Parse {
        /// Where the text came from.
        origin: String,
        /// The parser's message, which names the key and line.
        message: String,
    },
    /// A value is out of range.
    #[error("config: {key} = {value} is invalid: {fix}")]
    Invalid {
        /// The dotted key.
        key: String,
        /// The offending value.
        value: String,
        /// What would be valid.
        fix: String,
    },
    /// A tier can reach a purpose whose `{purpose}_{tier}` section does not exist.
    #[error(
        "config: no [llm.{key}] section, but tier `{tier}` reaches purpose `{purpose}`; add [llm.{key}] or remove `{tier}` from billing.tiers"
    )]
    MissingLlmKey {
        /// The missing key.
        key: String,
        /// The tier that reaches it.
        tier: String,
        /// The purpose that needs it.
        purpose: String,
    },
    /// An `[llm.*]` section no route can use: not `{purpose}_{tier}` for a tier of
    /// `billing.tiers`, nor a fallback of such a section (a typo, or a tier left out).
    #[error(
        "config: no route reaches [llm.{key}]: it is not {{purpose}}_{{tier}} for a tier of billing.tiers {tiers:?} nor any section's fallback; the sections routes reach are {known}; rename it to one of them, add its tier to billing.tiers, or remove it"
    )]
    UnreachedLlmSection {
        /// The section's key.
        key: String,
        /// The configured tiers.
        tiers: Vec<String>,
        /// The sections that are reached, comma-separated.
        known: String,
    },
}

/// A value out of range: the dotted key, the value as written and what would be valid.
pub(super) fn invalid(key: &str, value: impl ToString, fix: &str) -> ConfigError {
    ConfigError::Invalid {
        key: key.to_owned(),
        value: value.to_string(),
        fix: fix.to_owned(),
    }
}
