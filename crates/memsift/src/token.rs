//! The API's bearer token: where it comes from, how it is checked, and the keys derived from it.

use memsift_core::config::ApiConfig;
use secrecy::{ExposeSecret, SecretString};
use subtle::ConstantTimeEq;

/// The environment variable holding the bearer token (preferred over `api.token_file`).
pub const TOKEN_ENV: &str = "MEMSIFT_API_TOKEN";

/// Why the API cannot start.
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    /// Neither the variable nor the file gives a token.
    #[error("no API token: set {TOKEN_ENV} or [api] token_file in the configuration")]
    Missing,
    /// The token file cannot be read.
    #[error("cannot read the API token file {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// The token file is empty.
    #[error("the API token file {0} is empty; write the token on its first line")]
    Empty(String),
    /// The token is too short to withstand guessing.
    #[error(
        "the API token from {source_name} is {length} characters; use at least {MIN_TOKEN_CHARS} (e.g. `openssl rand -hex 32`)"
    )]
    TooShort {
        /// Where it came from: the variable or the file.
        source_name: String,
        /// Its length in characters.
        length: usize,
    },
}

/// The shortest API token accepted: 32 random characters are beyond guessing over HTTP.
pub const MIN_TOKEN_CHARS: usize = 32;

/// The bearer token every protected route checks, held as a secret.
#[derive(Clone)]
pub struct ApiToken(std::sync::Arc<SecretString>);

impl ApiToken {
    /// A token given directly (tests, embedding callers); at least [`MIN_TOKEN_CHARS`] long.
    pub fn new(token: &str) -> Result<ApiToken, TokenError> {
        ApiToken::from_source(token, "the caller")
    }

    fn from_source(token: &str, source_name: &str) -> Result<ApiToken, TokenError> {
        let length = token.chars().count();
        if length < MIN_TOKEN_CHARS {
            return Err(TokenError::TooShort {
                source_name: source_name.to_owned(),
                length,
            });
        }
        Ok(ApiToken(std::sync::Arc::new(SecretString::from(token.to_owned()))))
    }

    /// `MEMSIFT_API_TOKEN`, else the first line of `api.token_file`.
    pub fn load(config: &ApiConfig) -> Result<ApiToken, TokenError> {
        if let Ok(token) = std::env::var(TOKEN_ENV)
            && !token.trim().is_empty()
        {
            return ApiToken::from_source(token.trim(), TOKEN_ENV);
        }
        let path = config.token_file.as_ref().ok_or(TokenError::Missing)?;
        let text = std::fs::read_to_string(path).map_err(|source| TokenError::Read {
            path: path.display().to_string(),
            source,
        })?;
        let token = text.lines().next().unwrap_or("").trim();
        if token.is_empty() {
            return Err(TokenError::Empty(path.display().to_string()));
        }
        ApiToken::from_source(token, &format!("the file {}", path.display()))
    }

    /// Whether `offered` is the token.
    pub fn matches(&self, offered: &str) -> bool {
        // Constant time over the bytes, so response timing does not reveal a matching prefix.
        bool::from(self.0.expose_secret().as_bytes().ct_eq(offered.as_bytes()))
    }

    /// A key for one purpose (`label`) derived from the token, HMAC-SHA256(token, label): it
    /// changes when the token does, and reveals nothing of the token.
    pub(crate) fn derive_key(&self, label: &[u8]) -> [u8; 32] {
        use hmac::Mac;
        let mut mac = <hmac::Hmac<sha2::Sha256> as Mac>::new_from_slice(self.0.expose_secret().as_bytes())
            .expect("HMAC takes a key of any length");
        mac.update(label);
        mac.finalize().into_bytes().into()
    }
}
