//! Near-duplicate detection: a bounded fuzzy ratio on normalized text, and the cosine stage over embeddings.
//!
//! The fuzzy ratio is strsim's normalized Levenshtein (1 − edits / longer length, in characters) on lowercased,
//! whitespace-collapsed text. Two cheap lower bounds on the edit count run first: the length difference, and the
//! difference of character histograms. They are exact bounds, so skipping on them never misses a duplicate,
//! and with hundreds of known texts almost every pair is rejected without running the quadratic comparison.

use memsift_core::MemoryId;

use crate::{DropReason, DroppedItem, ValidItem};

/// Fuzzy ratio at or above which two texts are the same memory (DESIGN §4 invariant 8).
pub const FUZZY_DUPLICATE_THRESHOLD: f64 = 0.95;
/// Cosine similarity at or above which two embeddings are the same memory (DESIGN §4 invariant 8).
pub const VECTOR_DUPLICATE_THRESHOLD: f32 = 0.92;

/// Ratios such as 1 − 5/100 are not exact in binary; without a tolerance a pair sitting exactly on the
/// threshold would fall on either side depending on rounding.
const SCORE_TOLERANCE: f64 = 1e-9;
/// Histogram buckets; 61 is prime and above the span of lowercase ASCII letters, so letters, digits and space
/// land in distinct buckets and the bound stays tight for the texts we see most.
const BAG_BUCKETS: usize = 61;

/// A text prepared for fuzzy comparison: its normalized form and the summaries the cheap bounds need.
#[derive(Clone, Debug)]
pub struct FuzzyText {
    normalized: String,
    n_chars: usize,
    bag: [u16; BAG_BUCKETS],
}

impl FuzzyText {
    /// Normalizes (lowercase, whitespace collapsed) and summarizes a text.
    pub fn new(text: &str) -> Self {
        let mut normalized = String::with_capacity(text.len());
        for word in text.split_whitespace() {
            if !normalized.is_empty() {
                normalized.push(' ');
            }
            if word.is_ascii() {
                normalized.extend(word.bytes().map(|byte| char::from(byte.to_ascii_lowercase())));
            } else {
                normalized.extend(word.chars().flat_map(char::to_lowercase));
            }
        }
        let mut bag = [0u16; BAG_BUCKETS];
        let mut n_chars = 0usize;
        for c in normalized.chars() {
            n_chars += 1;
            let bucket = c as usize % BAG_BUCKETS;
            bag[bucket] = bag[bucket].saturating_add(1);
        }
        Self {
            normalized,
            n_chars,
            bag,
        }
    }

    /// The lowercased, whitespace-collapsed text.
    pub fn normalized(&self) -> &str {
        &self.normalized
    }

    /// The fuzzy ratio with `other` when it reaches `threshold`; `None` when it cannot or does not.
    pub fn similarity_at_least(&self, other: &FuzzyText, threshold: f64) -> Option<f64> {
        let longer = self.n_chars.max(other.n_chars);
        if longer == 0 {
            return Some(1.0);
        }
        // ratio ≥ t  ⇔  edits ≤ (1 − t)·longer; both bounds below are lower bounds on the edit count.
        let allowed_edits = ((1.0 - threshold) * longer as f64 + SCORE_TOLERANCE).floor() as usize;
        if self.n_chars.abs_diff(other.n_chars) > allowed_edits {
            return None;
        }
        if histogram_edit_bound(&self.bag, &other.bag) > allowed_edits {
            return None;
        }
        let score = strsim::normalized_levenshtein(&self.normalized, &other.normalized);
        (score + SCORE_TOLERANCE >= threshold).then_some(score)
    }
}

/// Each edit removes at most one surplus character from either side, so the larger surplus bounds the edits.
/// Merging characters into buckets only shrinks surpluses, so the bound holds for the bucketed histogram too.
fn histogram_edit_bound(a: &[u16; BAG_BUCKETS], b: &[u16; BAG_BUCKETS]) -> usize {
    let mut surplus_a = 0usize;
    let mut surplus_b = 0usize;
    for (count_a, count_b) in a.iter().zip(b) {
        if count_a > count_b {
            surplus_a += usize::from(count_a - count_b);
        } else {
            surplus_b += usize::from(count_b - count_a);
        }
    }
    surplus_a.max(surplus_b)
}

/// The fuzzy ratio of two raw texts after normalization (a convenience for tests and reports).
pub fn fuzzy_ratio(a: &str, b: &str) -> f64 {
    strsim::normalized_levenshtein(FuzzyText::new(a).normalized(), FuzzyText::new(b).normalized())
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
    fn cosine_is_zero_for_mismatched_or_empty_vectors() {
        assert_eq!(cosine(&[1.0, 0.0], &[1.0]), 0.0);
        assert_eq!(cosine(&[0.0, 0.0], &[1.0, 0.0]), 0.0);
        assert!((cosine(&[1.0, 1.0], &[2.0, 2.0]) - 1.0).abs() < 1e-6);
    }
}
