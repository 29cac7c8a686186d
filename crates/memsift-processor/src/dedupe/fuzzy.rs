//! The fuzzy stage's text: the normalized form (lowercased, whitespace collapsed), the ratio on it, and the
//! one-pass summaries that give an item its normalized form, signature and exact key together.

use super::SCORE_TOLERANCE;
use super::exact::compact_ascii_key;
use super::signature::{ASCII_BUCKET, BAG_BUCKETS, NORMALIZED_BUCKET, SPACE_BUCKET, Signature, clip_counts};

/// Lowercases and collapses whitespace: the form the fuzzy ratio compares.
pub fn normalize_for_fuzzy(text: &str) -> String {
    let mut normalized = String::with_capacity(text.len());
    let mut pending_space = false;
    if text.is_ascii() {
        for &byte in text.as_bytes() {
            if byte.is_ascii_whitespace() {
                pending_space = !normalized.is_empty();
                continue;
            }
            if pending_space {
                normalized.push(' ');
                pending_space = false;
            }
            normalized.push(char::from(byte.to_ascii_lowercase()));
        }
        return normalized;
    }
    for word in text.split_whitespace() {
        if !normalized.is_empty() {
            normalized.push(' ');
        }
        normalized.extend(word.chars().flat_map(char::to_lowercase));
    }
    normalized
}

/// A text prepared for fuzzy comparison: its normalized form and the summaries the cheap bounds need.
#[derive(Clone, Debug)]
pub struct FuzzyText {
    normalized: String,
    signature: Signature,
}

impl FuzzyText {
    /// Normalizes (lowercase, whitespace collapsed) and summarizes a text.
    pub fn new(text: &str) -> Self {
        Self::with_exact_key(text).0
    }

    /// [`FuzzyText::new`] plus the text's exact dedupe key (`memsift_core::text::dedupe_key`), computed in the
    /// same pass over the bytes for ASCII text: every item needs both, and separate passes were a fifth of the
    /// per-item cost.
    pub(crate) fn with_exact_key(text: &str) -> (Self, String) {
        if !text.is_ascii() {
            return Self::with_exact_key_unicode(text);
        }
        let mut normalized = Vec::with_capacity(text.len());
        let mut key = Vec::with_capacity(text.len());
        let mut counts = [0u32; BAG_BUCKETS];
        let mut pending_space = false;
        let mut pending_key_space = false;
        for &byte in text.as_bytes() {
            let bucket = ASCII_BUCKET[usize::from(byte)];
            if bucket == 0xFF {
                pending_space = !normalized.is_empty();
                pending_key_space = true;
                continue;
            }
            if pending_space {
                normalized.push(b' ');
                counts[usize::from(SPACE_BUCKET)] += 1;
                pending_space = false;
            }
            let lower = byte.to_ascii_lowercase();
            normalized.push(lower);
            counts[usize::from(bucket) % BAG_BUCKETS] += 1;
            if lower.is_ascii_alphanumeric() {
                if pending_key_space && !key.is_empty() {
                    key.push(b' ');
                }
                pending_key_space = false;
                key.push(lower);
            } else {
                pending_key_space = true;
            }
        }
        let signature = Signature {
            n_chars: normalized.len(),
            bag: clip_counts(&counts),
        };
        // ASCII in, ASCII out; the fallbacks only exist so that no `expect` is needed.
        let normalized = String::from_utf8(normalized).unwrap_or_else(|_| normalize_for_fuzzy(text));
        let key = String::from_utf8(key).unwrap_or_else(|_| memsift_core::text::dedupe_key(text));
        (Self { normalized, signature }, key)
    }

    /// [`FuzzyText::with_exact_key`] for any text, in one pass over its characters: the normalized form
    /// ([`normalize_for_fuzzy`]), its signature and `memsift_core::text::dedupe_key`, which separately took three
    /// passes and as many allocations again. The key takes the first character of an alphanumeric character's
    /// lowercase, as `dedupe_key` does; the normalized form takes all of them.
    fn with_exact_key_unicode(text: &str) -> (Self, String) {
        let mut normalized = String::with_capacity(text.len());
        let mut key = String::with_capacity(text.len());
        let mut signature = Signature {
            n_chars: 0,
            bag: [0; BAG_BUCKETS],
        };
        let mut pending_space = false;
        let mut pending_key_space = false;
        for c in text.chars() {
            if c.is_whitespace() {
                pending_space = !normalized.is_empty();
                pending_key_space = true;
                continue;
            }
            if pending_space {
                normalized.push(' ');
                signature.count(' ');
                pending_space = false;
            }
            let mut first_lower = None;
            for lower in c.to_lowercase() {
                first_lower.get_or_insert(lower);
                normalized.push(lower);
                signature.count(lower);
            }
            if c.is_alphanumeric() {
                if pending_key_space && !key.is_empty() {
                    key.push(' ');
                }
                pending_key_space = false;
                key.push(first_lower.unwrap_or(c));
            } else {
                pending_key_space = true;
            }
        }
        (Self { normalized, signature }, key)
    }

    /// [`FuzzyText::with_exact_key`] for a text that `clean_text` produced: trimmed, with single spaces as its only
    /// whitespace. For ASCII, normalizing is then just lowercasing, so the per-byte work is a table lookup for the
    /// histogram and an in-place compaction for the key, instead of two growing buffers checked on every push.
    pub(crate) fn of_clean_with_exact_key(text: &str) -> (Self, String) {
        if !text.is_ascii() || !is_collapsed_ascii(text.as_bytes()) {
            return Self::with_exact_key(text);
        }
        let normalized = text.to_ascii_lowercase();
        let mut counts = [0u32; BAG_BUCKETS];
        for &byte in normalized.as_bytes() {
            counts[usize::from(NORMALIZED_BUCKET[usize::from(byte)]) % BAG_BUCKETS] += 1;
        }
        let signature = Signature {
            n_chars: normalized.len(),
            bag: clip_counts(&counts),
        };
        // The key is never longer than the normalized text, so it is compacted in a copy of it.
        let mut key = normalized.clone().into_bytes();
        compact_ascii_key(&mut key, |_| {}, |_| {});
        // ASCII in, ASCII out; the fallback only exists so that no `expect` is needed.
        let key = String::from_utf8(key).unwrap_or_else(|_| memsift_core::text::dedupe_key(text));
        (Self { normalized, signature }, key)
    }

    /// The lowercased, whitespace-collapsed text.
    pub fn normalized(&self) -> &str {
        &self.normalized
    }

    /// The fuzzy ratio with `other` when it reaches `threshold`; `None` when it cannot or does not.
    pub fn similarity_at_least(&self, other: &FuzzyText, threshold: f64) -> Option<f64> {
        if !self.signature.may_reach(&other.signature, threshold) {
            return None;
        }
        full_ratio_at_least(&self.normalized, &other.normalized, threshold)
    }

    /// The bounds' summary of this text.
    pub(crate) fn signature(&self) -> &Signature {
        &self.signature
    }
}

/// The fuzzy ratio of two texts, given their signatures, when it reaches `threshold`; `None` when it cannot or does
/// not. The texts are normalized only when the bounds cannot rule the pair out, which is rare: items keep only
/// their signature, not a normalized copy of their text.
pub(crate) fn similarity_of(
    text: &str,
    signature: &Signature,
    other: &str,
    other_signature: &Signature,
    threshold: f64,
) -> Option<f64> {
    if !signature.may_reach(other_signature, threshold) {
        return None;
    }
    full_ratio_at_least(&normalize_for_fuzzy(text), &normalize_for_fuzzy(other), threshold)
}

/// Whether ASCII text is already whitespace-collapsed: no whitespace but single inner spaces. `clean_text` output
/// always is; the check is one cheap pass that keeps [`FuzzyText::of_clean_with_exact_key`] correct for any input.
fn is_collapsed_ascii(bytes: &[u8]) -> bool {
    let mut previous_is_space = true;
    for &byte in bytes {
        let is_space = byte == b' ';
        if (is_space && previous_is_space) || (byte.is_ascii_whitespace() && !is_space) {
            return false;
        }
        previous_is_space = is_space;
    }
    !previous_is_space || bytes.is_empty()
}

fn full_ratio_at_least(a_normalized: &str, b_normalized: &str, threshold: f64) -> Option<f64> {
    let score = strsim::normalized_levenshtein(a_normalized, b_normalized);
    (score + SCORE_TOLERANCE >= threshold).then_some(score)
}

/// The fuzzy ratio of two raw texts after normalization (a convenience for tests and reports).
pub fn fuzzy_ratio(a: &str, b: &str) -> f64 {
    strsim::normalized_levenshtein(&normalize_for_fuzzy(a), &normalize_for_fuzzy(b))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dedupe::signature::normalized_char_count;

    #[test]
    fn bounds_never_reject_a_pair_the_full_ratio_accepts() {
        let pairs = [
            (
                "The user likes green tea in the morning",
                "the user likes green tea in the morning.",
            ),
            ("abcdefghijklmnopqrst", "abcdefghijklmnopqrsX"),
            ("Café Zoë is nice!!", "café zoë is nice!!"),
        ];
        for threshold in [0.5, 0.9, 0.95] {
            for (a, b) in pairs {
                let full = fuzzy_ratio(a, b);
                let bounded = FuzzyText::new(a).similarity_at_least(&FuzzyText::new(b), threshold);
                assert_eq!(
                    bounded.is_some(),
                    full + SCORE_TOLERANCE >= threshold,
                    "{a} / {b} at {threshold}"
                );
            }
        }
    }

    #[test]
    fn signatures_of_raw_and_normalized_text_agree() {
        for text in [
            "  Hello   World  ",
            "Café\tZOË  déjà vu",
            "",
            "x",
            "Hello World",
            "MiXed, punct! 42 ~{}|",
        ] {
            assert_eq!(
                Signature::of(text),
                Signature::of(&normalize_for_fuzzy(text)),
                "{text:?}"
            );
        }
    }

    #[test]
    fn the_one_pass_ascii_path_matches_the_general_one() {
        for text in [
            "  Hello   World \t",
            "a",
            "",
            "Mixed CASE, punctuation!  and\nnewlines",
            "Hello World",
            "MiXed, punct! 42 ~{}|",
        ] {
            let fuzzy = FuzzyText::new(text);
            assert_eq!(fuzzy.normalized(), normalize_for_fuzzy(text));
            assert_eq!(fuzzy.signature, Signature::of(text));
            assert_eq!(normalized_char_count(text), fuzzy.signature.n_chars);
        }
        for text in [" ", "  a", "a  ", " a b ", "\t\n", "ab", "a\x0bb"] {
            assert_eq!(normalized_char_count(text), normalize_for_fuzzy(text).len(), "{text:?}");
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 512, ..Default::default() })]

        /// The one-pass summary of non-ASCII text against its definition: three separate passes.
        #[test]
        fn the_one_pass_unicode_summary_matches_its_definition(
            text in "\\PC{0,60}|[ \t\u{a0}\u{3000}a-zA-Z0-9À-ÿİıßẞ\u{3040}-\u{30ff}\u{1f300}-\u{1f3ff},.'’-]{0,60}",
        ) {
            let (fuzzy, key) = FuzzyText::with_exact_key(&text);
            let normalized = normalize_for_fuzzy(&text);
            proptest::prop_assert_eq!(&fuzzy.normalized, &normalized);
            proptest::prop_assert_eq!(&key, &memsift_core::text::dedupe_key(&text));
            proptest::prop_assert_eq!(fuzzy.signature, Signature::of(&normalized));
        }
    }

    #[test]
    fn the_clean_text_path_matches_the_general_one() {
        for text in [
            "Hello World",
            "a",
            "",
            "Mixed CASE, punctuation! and--dashes 42x",
            "  not   collapsed ",
            "tab\there",
            "Café Zoë",
            "trailing ",
        ] {
            let (fast, fast_key) = FuzzyText::of_clean_with_exact_key(text);
            let (general, general_key) = FuzzyText::with_exact_key(text);
            assert_eq!(fast.normalized, general.normalized, "{text:?}");
            assert_eq!(fast.signature, general.signature, "{text:?}");
            assert_eq!(fast_key, general_key, "{text:?}");
            assert_eq!(fast_key, memsift_core::text::dedupe_key(text), "{text:?}");
        }
    }
}
