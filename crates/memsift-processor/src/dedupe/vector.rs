//! The vector stage: cosine similarity over embeddings computed elsewhere, against known memories and earlier items.

use memsift_core::MemoryId;

use crate::{DropReason, DroppedItem, ValidItem};

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
/// `duplicate_of_index` the earlier item, with the score. Re-index linking hints with [`retain_with_hints`](super::retain_with_hints).
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cosine_is_zero_for_mismatched_or_empty_vectors() {
        assert_eq!(cosine(&[1.0, 0.0], &[1.0]), 0.0);
        assert_eq!(cosine(&[0.0, 0.0], &[1.0, 0.0]), 0.0);
        assert!((cosine(&[1.0, 1.0], &[2.0, 2.0]) - 1.0).abs() < 1e-6);
    }
}
