//! Text normalisation shared by import, dedupe and erasure tombstones.

use sha2::{Digest, Sha256};

/// Collapses whitespace and trims: the form every stored text is kept in.
pub fn collapse_whitespace(input: &str) -> String {
    input.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The normalised exact key of a memory text: lower case, punctuation dropped, whitespace collapsed.
///
/// Two texts with the same key are the same memory; a unique index on (user, key) makes a second
/// write of the same fact a no-op, whatever path it came from.
pub fn dedupe_key(text: &str) -> String {
    let lowered: String = text
        .chars()
        .map(|c| {
            if c.is_alphanumeric() {
                c.to_lowercase().next().unwrap_or(c)
            } else {
                ' '
            }
        })
        .collect();
    collapse_whitespace(&lowered)
}

/// A short, stable hex digest (the first `n_hex` characters of SHA-256).
pub fn short_hash(bytes: &[u8], n_hex: usize) -> String {
    let digest = Sha256::digest(bytes);
    let mut hex = String::with_capacity(64);
    for byte in digest {
        hex.push_str(&format!("{byte:02x}"));
    }
    hex.truncate(n_hex.min(64));
    hex
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dedupe_keys_ignore_case_punctuation_and_spacing() {
        assert_eq!(dedupe_key("Lives in  Lisbon."), dedupe_key("lives in lisbon"));
        assert_ne!(dedupe_key("Lives in Lisbon"), dedupe_key("Lived in Lisbon"));
        assert_eq!(dedupe_key("Café — Zoë's"), "café zoë s");
    }

    #[test]
    fn short_hash_is_stable_hex() {
        assert_eq!(short_hash(b"abc", 12), "ba7816bf8f01");
    }
}
