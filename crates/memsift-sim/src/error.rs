//! Why a simulator configuration (its responder, its fault plan) could not be built.

use std::path::PathBuf;

/// Why a simulator config could not be built.
#[derive(Debug, thiserror::Error)]
pub enum SimConfigError {
    /// The responder spec is not one of the known forms.
    #[error("unknown responder `{0}`; use `heuristic` or `locomo:PATH`")]
    UnknownResponder(String),
    /// A file could not be read.
    #[error("cannot read {path}: {source}; check the path")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A file is not what it should be.
    #[error("{path} is invalid: {message}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// The parser's message.
        message: String,
    },
}
