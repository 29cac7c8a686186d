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
    /// The token is one shorter sequence written over and over (`abcd…` twice): only the
    /// sequence has to be guessed.
    #[error(
        "the API token from {source_name} is one sequence of {period} characters written {times} times; use a random token of at least {MIN_TOKEN_CHARS} characters, e.g. `openssl rand -hex 32`"
    )]
    Repeated {
        /// Where it came from: the variable or the file.
        source_name: String,
        /// The length of the repeated sequence, in characters.
        period: usize,
        /// How many times it is written (a partial last copy counts as one).
        times: usize,
    },
    /// The token is long enough but made of too few, too repetitive characters.
    #[error(
        "the API token from {source_name} is too predictable: {distinct} distinct characters, about {bits} bits by their mix; use at least {MIN_DISTINCT_CHARS} distinct characters and {MIN_TOKEN_BITS} bits, e.g. `openssl rand -hex 32`"
    )]
    TooPredictable {
        /// Where it came from: the variable or the file.
        source_name: String,
        /// How many different characters it has.
        distinct: usize,
        /// Its estimated entropy in bits, rounded down.
        bits: u32,
    },
}

/// The shortest API token accepted: 32 random characters are beyond guessing over HTTP.
pub const MIN_TOKEN_CHARS: usize = 32;

/// The least estimated entropy accepted. 32 random hex digits carry 128 bits and estimate at about
/// 117 by the count below (a short sample under-counts its alphabet; none of 200,000 random ones
/// fell under 90); 32 copies of one character estimate 0.
pub const MIN_TOKEN_BITS: u32 = 80;

/// The fewest different characters accepted: a word repeated to length (`password` × 4: 7) is
/// refused, while 32 random hex digits show fewer than 8 about once in a million.
pub const MIN_DISTINCT_CHARS: usize = 8;

/// A token's entropy estimated from its characters: length × the Shannon entropy of how often each
/// character occurs. It cannot see a pattern (`abcd` repeated scores high), but it refuses what
/// length alone let through: one character repeated, or a few repeated over and over.
pub fn estimated_entropy_bits(token: &str) -> f64 {
    let mut counts = std::collections::HashMap::<char, usize>::new();
    for character in token.chars() {
        *counts.entry(character).or_default() += 1;
    }
    let length = token.chars().count() as f64;
    let per_char: f64 = counts
        .values()
        .map(|count| {
            let share = *count as f64 / length;
            -share * share.log2()
        })
        .sum();
    per_char * length
}

/// The length of the shortest sequence `token` is written with over and over (a last copy may be
/// cut short), when it is written at least twice: `Some(16)` for a 16-character sequence written
/// twice, `None` for a token that repeats nothing of half its length or less. The smallest period
/// of a text is its length less its longest border (KMP's failure function).
pub fn repeated_period(token: &str) -> Option<usize> {
    let chars: Vec<char> = token.chars().collect();
    let n = chars.len();
    if n < 2 {
        return None;
    }
    let mut border = vec![0usize; n];
    for i in 1..n {
        let mut k = border[i - 1];
        while k > 0 && chars[i] != chars[k] {
            k = border[k - 1];
        }
        if chars[i] == chars[k] {
            k += 1;
        }
        border[i] = k;
    }
    let period = n - border[n - 1];
    (period * 2 <= n).then_some(period)
}

/// The bearer token every protected route checks, held as a secret.
#[derive(Clone)]
pub struct ApiToken(std::sync::Arc<SecretString>);

impl ApiToken {
    /// A token given directly (tests, embedding callers); at least [`MIN_TOKEN_CHARS`] long, of
    /// [`MIN_DISTINCT_CHARS`] different characters and [`MIN_TOKEN_BITS`] of estimated entropy.
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
        let bits = estimated_entropy_bits(token);
        let distinct = token.chars().collect::<std::collections::HashSet<_>>().len();
        if bits < f64::from(MIN_TOKEN_BITS) || distinct < MIN_DISTINCT_CHARS {
            return Err(TokenError::TooPredictable {
                source_name: source_name.to_owned(),
                distinct,
                bits: bits.max(0.0) as u32,
            });
        }
        // After the mix of characters, which names the worse fault of `aaaa…` or a word repeated.
        if let Some(period) = repeated_period(token) {
            return Err(TokenError::Repeated {
                source_name: source_name.to_owned(),
                period,
                times: length.div_ceil(period),
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
        let text = memsift_core::files::read_text_at_most(path, memsift_core::files::MAX_SECRET_FILE_BYTES).map_err(
            |source| TokenError::Read {
                path: path.display().to_string(),
                source,
            },
        )?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn thirty_two_identical_characters_are_refused_with_the_fix() {
        let error = ApiToken::new(&"a".repeat(32)).err().unwrap().to_string();
        assert_eq!(
            error,
            "the API token from the caller is too predictable: 1 distinct characters, about 0 bits by their mix; use at least 8 distinct characters and 80 bits, e.g. `openssl rand -hex 32`"
        );
        assert!(ApiToken::new(&"password".repeat(4)).is_err());
    }

    #[test]
    fn a_random_sequence_of_sixteen_written_twice_is_refused_with_the_fix() {
        let error = ApiToken::new(&"9f86d081884c7d65".repeat(2)).err().unwrap().to_string();
        assert_eq!(
            error,
            "the API token from the caller is one sequence of 16 characters written 2 times; use a random token of at least 32 characters, e.g. `openssl rand -hex 32`"
        );
        assert_eq!(repeated_period("abcab"), None, "under twice");
        assert_eq!(repeated_period("abcabca"), Some(3));
        assert_eq!(repeated_period("abcabcab"), Some(3), "a cut-short copy after two");
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 512, failure_persistence: None, ..ProptestConfig::default() })]

        /// Random tokens as the docs make them (hex, base64url) of the minimum length or more
        /// are accepted.
        #[test]
        fn random_tokens_are_accepted(token in "[0-9a-f]{32,80}|[A-Za-z0-9_-]{32,80}") {
            prop_assert!(ApiToken::new(&token).is_ok(), "{token}: {} bits", estimated_entropy_bits(&token));
        }

        /// Any sequence, of any length, written twice or more (and a cut-short copy after) is
        /// refused naming the sequence's length; a random token (period over half its length) is
        /// not.
        #[test]
        fn a_sequence_of_any_length_written_over_and_over_is_refused(
            unit in "[0-9a-zA-Z_-]{1,60}",
            times in 2usize..6,
            cut in 0usize..60,
        ) {
            let token = &(unit.repeat(times) + &unit[..cut % unit.len()]);
            let period = repeated_period(token).expect("a repeated token has a period");
            prop_assert!(period <= unit.len() && unit.len() % period == 0, "{token}: {period}");
            if token.len() >= MIN_TOKEN_CHARS {
                // A sequence of few characters is refused for its mix first.
                let refused = matches!(
                    ApiToken::new(token),
                    Err(TokenError::Repeated { .. } | TokenError::TooPredictable { .. })
                );
                prop_assert!(refused, "{}", token);
            }
        }

        /// A long token over a small alphabet (up to 7 characters, like a word repeated) is
        /// refused, whatever its length.
        #[test]
        fn tokens_of_a_few_repeated_characters_are_refused(token in "[a-g]{32,200}|[ab01]{32,48}") {
            prop_assert!(matches!(ApiToken::new(&token), Err(TokenError::TooPredictable { .. })), "{token}");
        }
    }
}
