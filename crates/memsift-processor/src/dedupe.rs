//! Near-duplicate detection: a bounded fuzzy ratio on normalized text, and the cosine stage over embeddings.
//!
//! The fuzzy ratio is strsim's normalized Levenshtein (1 − edits / longer length, in characters) on lowercased,
//! whitespace-collapsed text. Two cheap lower bounds on the edit count run first: the length difference, and the
//! difference of character histograms. They are exact bounds, so skipping on them never misses a duplicate,
//! and with hundreds of known texts almost every pair is rejected without running the quadratic comparison.

use memsift_core::MemoryId;

use crate::{DropReason, DroppedItem, ValidItem};

/// Fuzzy ratio at or above which two texts are the same memory (invariant 8).
pub const FUZZY_DUPLICATE_THRESHOLD: f64 = 0.95;
/// Cosine similarity at or above which two embeddings are the same memory (invariant 8).
pub const VECTOR_DUPLICATE_THRESHOLD: f32 = 0.92;

/// Ratios such as 1 − 5/100 are not exact in binary; without a tolerance a pair sitting exactly on the
/// threshold would fall on either side depending on rounding.
const SCORE_TOLERANCE: f64 = 1e-9;
/// Histogram buckets. ASCII letters, digits and space get a bucket each (they make up nearly all text), so the
/// histogram bound is tight where it matters; other characters share the remaining buckets.
pub(crate) const BAG_BUCKETS: usize = 64;
const SPACE_BUCKET: u8 = 36;
/// Bucket of each lowercased ASCII byte; 0xFF marks whitespace, which normalization collapses.
const ASCII_BUCKET: [u8; 128] = ascii_buckets();
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
    n_chars: usize,
    bag: [u16; BAG_BUCKETS],
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

    fn count(&mut self, c: char) {
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
    fn may_reach(&self, other: &Signature, threshold: f64) -> bool {
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
fn clip_counts(counts: &[u32; BAG_BUCKETS]) -> [u16; BAG_BUCKETS] {
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

/// The fuzzy ratio of two raw texts after normalization (a convenience for tests and reports).
pub fn fuzzy_ratio(a: &str, b: &str) -> f64 {
    strsim::normalized_levenshtein(&normalize_for_fuzzy(a), &normalize_for_fuzzy(b))
}

/// `u8::is_ascii_alphanumeric` as a table: one load instead of three range tests, for every byte of every item.
const IS_ASCII_ALPHANUMERIC: [bool; 256] = ascii_alphanumerics();

const fn ascii_alphanumerics() -> [bool; 256] {
    let mut table = [false; 256];
    let mut byte = 0usize;
    while byte < 256 {
        table[byte] = (byte as u8).is_ascii_alphanumeric();
        byte += 1;
    }
    table
}

/// Compacts lowercase ASCII `bytes` in place into a dedupe key: the runs of letters and digits joined by single
/// spaces (`memsift_core::text::dedupe_key` for ASCII). The key is never longer than its input, so it is written
/// behind the read position; `at_word_start` sees the still-uncompacted bytes from each word's first byte on (the
/// sensitive-phrase scan reads there), and `each_byte` sees every byte first (the histogram counts there, saving
/// a pass of its own).
#[inline]
pub(crate) fn compact_ascii_key(
    bytes: &mut Vec<u8>,
    mut each_byte: impl FnMut(u8),
    mut at_word_start: impl FnMut(&[u8]),
) {
    let mut key_len = 0usize;
    let mut pending_space = false;
    for read in 0..bytes.len() {
        let byte = bytes[read];
        each_byte(byte);
        if IS_ASCII_ALPHANUMERIC[usize::from(byte)] {
            if pending_space || key_len == 0 {
                at_word_start(&bytes[read..]);
            }
            if pending_space && key_len > 0 {
                bytes[key_len] = b' ';
                key_len += 1;
            }
            pending_space = false;
            bytes[key_len] = byte;
            key_len += 1;
        } else {
            pending_space = true;
        }
    }
    bytes.truncate(key_len);
}

/// Cosine similarity; 0 for vectors of different length or zero norm, so a missing embedding never matches.
pub fn cosine(a: &[f32], b: &[f32]) -> f32 {
    if a.len() != b.len() || a.is_empty() {
        return 0.0;
    }
    let (mut dot, mut norm_a, mut norm_b) = (0.0f32, 0.0f32, 0.0f32);
    for (x, y) in a.iter().zip(b) {
        dot += x * y;
        norm_a += x * x;
        norm_b += y * y;
    }
    if norm_a == 0.0 || norm_b == 0.0 {
        return 0.0;
    }
    dot / (norm_a.sqrt() * norm_b.sqrt())
}

/// The vector stage: drops items whose embedding is within `threshold` cosine of a known memory or of an earlier
/// kept item of the same list.
///
/// `item_vectors[i]` is item i's embedding and `neighbours[i]` its exact top-k known memories with their cosine,
/// both computed elsewhere (this crate does no I/O); a missing entry means "nothing to compare". Items that
/// consolidate known memories are never duplicates. Returns the kept indices (ascending) and one
/// [`DroppedItem`] per drop whose `index` is the position in `items`; `duplicate_of` names the memory, or
/// `duplicate_of_index` the earlier item, with the score. Re-index linking hints with [`retain_with_hints`].
pub fn dedupe_by_vectors(
    items: &[ValidItem],
    item_vectors: &[Vec<f32>],
    neighbours: &[Vec<(MemoryId, f32)>],
    threshold: f32,
) -> (Vec<usize>, Vec<DroppedItem>) {
    let mut kept: Vec<usize> = Vec::with_capacity(items.len());
    let mut dropped = Vec::new();
    for (index, item) in items.iter().enumerate() {
        if !item.consolidates_memory_ids.is_empty() {
            kept.push(index);
            continue;
        }
        let nearest_memory = neighbours
            .get(index)
            .into_iter()
            .flatten()
            .filter(|(_, score)| *score >= threshold)
            .max_by(|a, b| a.1.total_cmp(&b.1));
        if let Some(&(memory, score)) = nearest_memory {
            dropped.push(DroppedItem {
                duplicate_of: Some(memory),
                score: Some(f64::from(score)),
                evidence: item.evidence.clone(),
                ..DroppedItem::new(index, DropReason::DuplicateByVector, Some(item.text.clone()))
            });
            continue;
        }
        let vector = item_vectors.get(index).map_or(&[][..], Vec::as_slice);
        let nearest_item = kept
            .iter()
            .filter_map(|&earlier| {
                let other = item_vectors.get(earlier)?;
                let score = cosine(vector, other);
                (score >= threshold).then_some((earlier, score))
            })
            .max_by(|a, b| a.1.total_cmp(&b.1));
        match nearest_item {
            Some((earlier, score)) => dropped.push(DroppedItem {
                duplicate_of_index: Some(earlier),
                score: Some(f64::from(score)),
                ..DroppedItem::new(index, DropReason::DuplicateByVector, Some(item.text.clone()))
            }),
            None => kept.push(index),
        }
    }
    (kept, dropped)
}

/// Keeps the items at `kept` (positions in `items`) and re-points their linking hints at the new positions,
/// dropping hints to removed items and hints to the item itself.
pub fn retain_with_hints(items: Vec<ValidItem>, kept: &[usize]) -> Vec<ValidItem> {
    let mut new_position = vec![None; items.len()];
    for (position, &index) in kept.iter().enumerate() {
        if let Some(slot) = new_position.get_mut(index) {
            *slot = Some(position);
        }
    }
    let mut slots: Vec<Option<ValidItem>> = items.into_iter().map(Some).collect();
    let mut retained = Vec::with_capacity(kept.len());
    for (position, &index) in kept.iter().enumerate() {
        let Some(mut item) = slots.get_mut(index).and_then(Option::take) else {
            continue;
        };
        item.linking_hints = remap_hints(&item.linking_hints, &new_position, position);
        retained.push(item);
    }
    retained
}

/// Maps hints through `new_position` (old index → new index), keeping each target once and never `own`.
pub(crate) fn remap_hints(hints: &[usize], new_position: &[Option<usize>], own: usize) -> Vec<usize> {
    let mut remapped = Vec::with_capacity(hints.len());
    for hint in hints {
        if let Some(&Some(target)) = new_position.get(*hint)
            && target != own
            && !remapped.contains(&target)
        {
            remapped.push(target);
        }
    }
    remapped
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn cosine_is_zero_for_mismatched_or_empty_vectors() {
        assert_eq!(cosine(&[1.0, 0.0], &[1.0]), 0.0);
        assert_eq!(cosine(&[0.0, 0.0], &[1.0, 0.0]), 0.0);
        assert!((cosine(&[1.0, 1.0], &[2.0, 2.0]) - 1.0).abs() < 1e-6);
    }
}
