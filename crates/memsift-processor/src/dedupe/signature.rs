//! The cheap lower bounds on the edit count that let the fuzzy stage skip almost every pair: a text's normalized
//! character count and bucketed histogram, computed without building the normalized text.

use super::SCORE_TOLERANCE;

/// Histogram buckets. ASCII letters, digits and space get a bucket each (they make up nearly all text), so the
/// histogram bound is tight where it matters; other characters share the remaining buckets.
pub(crate) const BAG_BUCKETS: usize = 64;
pub(super) const SPACE_BUCKET: u8 = 36;
/// Bucket of each lowercased ASCII byte; 0xFF marks whitespace, which normalization collapses.
pub(super) const ASCII_BUCKET: [u8; 128] = ascii_buckets();
/// Bucket of each byte of already-normalized ASCII text, where the only whitespace left is a single space; other
/// bytes never occur there but get a harmless bucket so the lookup needs no branch.
pub(crate) const NORMALIZED_BUCKET: [u8; 256] = normalized_buckets();

/// Bucket of each byte of printable ASCII whose only whitespace is single spaces, case folded.
const CLEAN_ASCII_BUCKET: [u8; 256] = clean_ascii_buckets();

const fn clean_ascii_buckets() -> [u8; 256] {
    let mut table = [37u8; 256];
    let mut byte = 0x20usize;
    while byte <= 0x7E {
        table[byte] = if byte == b' ' as usize {
            SPACE_BUCKET
        } else {
            ASCII_BUCKET[byte]
        };
        byte += 1;
    }
    table
}

const fn normalized_buckets() -> [u8; 256] {
    let mut table = [0u8; 256];
    let mut byte = 0usize;
    while byte < 128 {
        table[byte] = if byte == b' ' as usize {
            SPACE_BUCKET
        } else if ASCII_BUCKET[byte] == 0xFF {
            37
        } else {
            ASCII_BUCKET[byte]
        };
        byte += 1;
    }
    while byte < 256 {
        table[byte] = 37;
        byte += 1;
    }
    table
}

const fn ascii_buckets() -> [u8; 128] {
    let mut table = [0u8; 128];
    let mut byte = 0usize;
    while byte < 128 {
        let lower = (byte as u8).to_ascii_lowercase();
        table[byte] = if (byte as u8).is_ascii_whitespace() {
            0xFF
        } else if lower.is_ascii_lowercase() {
            lower - b'a'
        } else if lower.is_ascii_digit() {
            26 + (lower - b'0')
        } else {
            37 + (lower % 27)
        };
        byte += 1;
    }
    table
}

/// Character count and bucketed histogram of a text's normalized form: all the cheap bounds need.
///
/// Counts are `u16`, saturating: SSE2 (the baseline x86-64 target) subtracts 16-bit lanes with saturation in one
/// instruction but has no such instruction for 32-bit lanes, and the histogram bound runs for every pair that
/// passes the length bound. Clipping both counts at the same ceiling never increases a surplus, so a clipped
/// histogram still gives a lower bound on the edits; items are at most 2000 characters and never clip.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Signature {
    pub(super) n_chars: usize,
    pub(super) bag: [u16; BAG_BUCKETS],
}

impl Signature {
    /// Summarizes the normalized form of `text` without building it: known texts are summarized on every call
    /// but normalized only in the rare case that a bound lets them through.
    pub(crate) fn of(text: &str) -> Self {
        let mut signature = Signature {
            n_chars: 0,
            bag: [0; BAG_BUCKETS],
        };
        let mut pending_space = false;
        if text.len() <= usize::from(u16::MAX) && is_collapsed_printable_ascii(text.as_bytes()) {
            return Self::of_clean_ascii(text.as_bytes());
        } else if text.is_ascii() {
            let mut counts = [0u32; BAG_BUCKETS];
            let mut n_chars = 0usize;
            for &byte in text.as_bytes() {
                let bucket = ASCII_BUCKET[usize::from(byte)];
                if bucket == 0xFF {
                    pending_space = n_chars > 0;
                    continue;
                }
                if pending_space {
                    counts[usize::from(SPACE_BUCKET)] += 1;
                    n_chars += 1;
                    pending_space = false;
                }
                counts[usize::from(bucket) % BAG_BUCKETS] += 1;
                n_chars += 1;
            }
            signature.n_chars = n_chars;
            signature.bag = clip_counts(&counts);
        } else {
            for c in text.chars() {
                if c.is_whitespace() {
                    pending_space = signature.n_chars > 0;
                    continue;
                }
                if pending_space {
                    signature.count(' ');
                    pending_space = false;
                }
                for lower in c.to_lowercase() {
                    signature.count(lower);
                }
            }
        }
        signature
    }

    /// The signature of printable ASCII with single inner spaces and none at either end, at most `u16::MAX` bytes
    /// long (what [`is_collapsed_printable_ascii`] accepts): normalizing it is lowercasing, so each byte is one
    /// table lookup, and no count can pass the text's length, so none needs clipping.
    pub(crate) fn of_clean_ascii(bytes: &[u8]) -> Self {
        let mut bag = [0u16; BAG_BUCKETS];
        for &byte in bytes {
            bag[usize::from(CLEAN_ASCII_BUCKET[usize::from(byte)]) % BAG_BUCKETS] += 1;
        }
        Signature {
            n_chars: bytes.len(),
            bag,
        }
    }

    /// The signature of a clean text (see [`Signature::of_clean_ascii`]) whose lowercased bytes a caller counted
    /// into `bag` by [`NORMALIZED_BUCKET`].
    pub(crate) fn of_counted_clean_ascii(n_chars: usize, bag: [u16; BAG_BUCKETS]) -> Self {
        Signature { n_chars, bag }
    }

    pub(super) fn count(&mut self, c: char) {
        self.n_chars += 1;
        let bucket = match u8::try_from(c) {
            // The space normalization leaves between words; ASCII_BUCKET marks all whitespace as skipped, and
            // dropping it here made the bags of non-ASCII texts disagree with those of ASCII ones, so the bound
            // could rule out a near-duplicate that differed by an accent.
            Ok(b' ') => usize::from(SPACE_BUCKET),
            Ok(byte) if byte.is_ascii() => usize::from(ASCII_BUCKET[usize::from(byte)]),
            _ => 37 + (c as usize % 27),
        };
        if let Some(slot) = self.bag.get_mut(bucket) {
            *slot = slot.saturating_add(1);
        }
    }

    /// Whether the ratio of the two texts can reach `threshold`, judged from lower bounds on the edit count.
    pub(super) fn may_reach(&self, other: &Signature, threshold: f64) -> bool {
        let longer = self.n_chars.max(other.n_chars);
        // ratio ≥ t  ⇔  edits ≤ (1 − t)·longer.
        let allowed_edits = (1.0 - threshold) * longer as f64 + SCORE_TOLERANCE;
        self.n_chars.abs_diff(other.n_chars) as f64 <= allowed_edits
            && histogram_edit_bound(&self.bag, &other.bag) as f64 <= allowed_edits
    }

    /// The character counts a text may have to reach `threshold` against one of this length: [t·n, n/t].
    pub(crate) fn length_window(&self, threshold: f64) -> (usize, usize) {
        let n = self.n_chars as f64;
        let low = (threshold * n - SCORE_TOLERANCE).ceil().max(0.0) as usize;
        let high = if threshold > 0.0 {
            (n / threshold + SCORE_TOLERANCE).floor() as usize
        } else {
            usize::MAX
        };
        (low, high)
    }
}

/// Narrows counts to the histogram's `u16`, saturating (see [`Signature`] for why that keeps the bound sound).
pub(super) fn clip_counts(counts: &[u32; BAG_BUCKETS]) -> [u16; BAG_BUCKETS] {
    let mut bag = [0u16; BAG_BUCKETS];
    for (slot, &count) in bag.iter_mut().zip(counts) {
        *slot = u16::try_from(count).unwrap_or(u16::MAX);
    }
    bag
}

/// A known text's signature, given what [`normalized_char_count`] found: a clean ASCII text skips the check.
pub(crate) fn known_signature(text: &str, clean_ascii: bool) -> Signature {
    if clean_ascii {
        Signature::of_clean_ascii(text.as_bytes())
    } else {
        Signature::of(text)
    }
}

/// Whether a text takes the clean ASCII path of [`Signature::of`]: what stored memories nearly always are.
pub(crate) fn is_clean_ascii(text: &str) -> bool {
    text.len() <= usize::from(u16::MAX) && is_collapsed_printable_ascii(text.as_bytes())
}

/// The character count of a text's normalized form, without the histogram (which most known texts never need).
pub(crate) fn normalized_char_count(text: &str) -> usize {
    // Stored memories are nearly always already collapsed, and then their normalized length is their length (the
    // check rejects anything but ASCII too, so the common case is one pass).
    if is_collapsed_printable_ascii(text.as_bytes()) {
        return text.len();
    }
    if !text.is_ascii() {
        return Signature::of(text).n_chars;
    }
    let mut n_chars = 0usize;
    let mut pending_space = false;
    for &byte in text.as_bytes() {
        if byte.is_ascii_whitespace() {
            pending_space = n_chars > 0;
        } else {
            n_chars += 1 + usize::from(pending_space);
            pending_space = false;
        }
    }
    n_chars
}

/// Whether the bytes are printable ASCII (0x20–0x7E) with single inner spaces and none at either end.
///
/// Eight bytes at a time, with exact per-byte tests: this runs over every known text of every call, where a
/// byte-at-a-time loop cost about as much as validating the items themselves.
pub(crate) fn is_collapsed_printable_ascii(bytes: &[u8]) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = ONES * 0x80;
    const LOW7: u64 = ONES * 0x7F;
    // High bit of each byte that is zero; exact per byte for bytes below 0x80 (no carry crosses a byte).
    let zero_bytes = |word: u64| !(((word & LOW7) + LOW7) | word) & HIGH;
    if bytes.first() == Some(&b' ') || bytes.last() == Some(&b' ') {
        return false;
    }
    let mut previous_is_space = false;
    let mut chunks = bytes.chunks_exact(8);
    for chunk in &mut chunks {
        let word = u64::from_le_bytes(chunk.try_into().unwrap_or([0; 8]));
        // Any byte at or above 0x80, below 0x20, or equal to 0x7F.
        let below_space = word.wrapping_sub(ONES * 0x20) & !word & HIGH;
        if word & HIGH != 0 || below_space != 0 || zero_bytes(word ^ LOW7) != 0 {
            return false;
        }
        let spaces = zero_bytes(word ^ (ONES * 0x20));
        // Little-endian: shifting left by 8 moves each byte's flag onto the byte after it.
        if spaces & (spaces << 8) != 0 || (previous_is_space && spaces & 0x80 != 0) {
            return false;
        }
        previous_is_space = spaces >> 63 != 0;
    }
    for &byte in chunks.remainder() {
        let is_space = byte == b' ';
        if !(b' '..=b'~').contains(&byte) || (is_space && previous_is_space) {
            return false;
        }
        previous_is_space = is_space;
    }
    true
}

/// Each edit removes at most one surplus character from either side, so the larger surplus bounds the edits.
/// Merging characters into buckets only shrinks surpluses, so the bound holds for the bucketed histogram too.
fn histogram_edit_bound(a: &[u16; BAG_BUCKETS], b: &[u16; BAG_BUCKETS]) -> usize {
    // Branch-free so the loop vectorizes: it runs for every pair that passes the length bound. 64 buckets of at
    // most u16::MAX sum to less than u32::MAX.
    let mut surplus_a = 0u32;
    let mut surplus_b = 0u32;
    for (count_a, count_b) in a.iter().zip(b) {
        surplus_a += u32::from(count_a.saturating_sub(*count_b));
        surplus_b += u32::from(count_b.saturating_sub(*count_a));
    }
    usize::try_from(surplus_a.max(surplus_b)).unwrap_or(usize::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clipped_histograms_still_bound_the_edits() {
        let long_a = "a".repeat(70_000);
        let long_b = format!("{}{}", "a".repeat(69_000), "b".repeat(1_000));
        let (a, b) = (Signature::of(&long_a), Signature::of(&long_b));
        assert_eq!(a.bag[0], u16::MAX);
        // The true surplus is 1000; clipping may only make the bound smaller.
        assert!(histogram_edit_bound(&a.bag, &b.bag) <= 1_000);
    }

    #[test]
    fn the_word_at_a_time_cleanliness_check_matches_a_byte_loop() {
        let by_bytes = |bytes: &[u8]| {
            bytes.first() != Some(&b' ')
                && bytes.last() != Some(&b' ')
                && bytes.iter().all(|byte| (b' '..=b'~').contains(byte))
                && !bytes.windows(2).any(|pair| pair == b"  ")
        };
        let mut texts: Vec<Vec<u8>> = vec![
            b"".to_vec(),
            b"Caroline volunteers at the animal shelter.".to_vec(),
            b"exactly8".to_vec(),
            b"1234567 9".to_vec(),
            b"1234567  0123".to_vec(),
            b"12345678  abc".to_vec(),
            b"tab\there and more text".to_vec(),
            "café is not ascii at all".as_bytes().to_vec(),
            b"del\x7f byte in the middle".to_vec(),
        ];
        // Every position of a stray byte, across chunk boundaries.
        for bad in [b' ', b'\t', b'\n', 0x00, 0x1F, 0x7F, 0x80, b'~', b'a'] {
            for at in 0..20 {
                let mut text = b"abcdefgh ijklmnop qrstuv".to_vec();
                text[at] = bad;
                texts.push(text);
            }
        }
        for text in &texts {
            assert_eq!(
                is_collapsed_printable_ascii(text),
                by_bytes(text),
                "{:?}",
                String::from_utf8_lossy(text)
            );
        }
    }
}
