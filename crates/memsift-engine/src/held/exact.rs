//! The one exact vector index: contiguous unit rows searched by a dot product per row, for a
//! user's memories (by memory id) and for their turns (by message id) alike.
//!
//! Exact, not approximate: at the sizes one user has a scan takes microseconds to milliseconds,
//! and a lossy index would let duplicates through dedupe and lose recall that a per-user filter
//! after an approximate scan cannot win back.

use std::collections::HashMap;
use std::hash::Hash;

/// A vector that does not fit the index.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ExactIndexError {
    /// The vector's length is not the index's dimension.
    #[error("vector of {got} dimensions given to an index of {expected}; embed with the index's model")]
    Dimension {
        /// The index's dimension.
        expected: usize,
        /// The vector's.
        got: usize,
    },
    /// The vector holds NaN or infinity.
    #[error("vector holds NaN or infinite values; the embedder is broken")]
    NotFinite,
}

/// Unit rows by id, searched exactly.
#[derive(Clone, Debug)]
pub struct ExactIndex<Id> {
    dimension: usize,
    ids: Vec<Id>,
    /// `ids.len() × dimension` unit rows, contiguous so the scan streams through memory.
    rows: Vec<f32>,
    positions: HashMap<Id, usize>,
}

impl<Id: Clone + Eq + Hash + Ord> ExactIndex<Id> {
    /// An empty index of rows of `dimension`.
    pub fn new(dimension: usize) -> Self {
        ExactIndex {
            dimension,
            ids: Vec::new(),
            rows: Vec::new(),
            positions: HashMap::new(),
        }
    }

    /// Adds or replaces `id`'s vector, scaled to unit length here so a slightly off embedder
    /// cannot skew scores (a zero vector stays zero and matches nothing).
    pub fn insert(&mut self, id: Id, vector: &[f32]) -> Result<(), ExactIndexError> {
        if vector.len() != self.dimension {
            return Err(ExactIndexError::Dimension {
                expected: self.dimension,
                got: vector.len(),
            });
        }
        if vector.iter().any(|value| !value.is_finite()) {
            return Err(ExactIndexError::NotFinite);
        }
        let norm = vector.iter().map(|value| value * value).sum::<f32>().sqrt();
        let scale = if norm > 0.0 { 1.0 / norm } else { 0.0 };
        let normalized = vector.iter().map(|value| value * scale);
        match self.positions.get(&id) {
            Some(&position) => {
                let row = &mut self.rows[position * self.dimension..(position + 1) * self.dimension];
                for (slot, value) in row.iter_mut().zip(normalized) {
                    *slot = value;
                }
            }
            None => {
                self.positions.insert(id.clone(), self.ids.len());
                self.ids.push(id);
                self.rows.extend(normalized);
            }
        }
        Ok(())
    }

    /// Removes `id`; false when it was not indexed.
    pub fn remove(&mut self, id: &Id) -> bool {
        let Some(position) = self.positions.remove(id) else {
            return false;
        };
        // The last row moves into the hole, so the buffer stays contiguous.
        let last = self.ids.len() - 1;
        if position != last {
            let (start, end) = (last * self.dimension, (last + 1) * self.dimension);
            self.rows.copy_within(start..end, position * self.dimension);
            let moved = self.ids[last].clone();
            self.positions.insert(moved.clone(), position);
            self.ids[position] = moved;
        }
        self.ids.pop();
        self.rows.truncate(last * self.dimension);
        true
    }

    /// The `k` ids closest to `query` by cosine, best first, ties by id; empty for a query of
    /// another length, of no length, or not finite.
    pub fn search(&self, query: &[f32], k: usize) -> Vec<(Id, f32)> {
        let norm = query.iter().map(|value| value * value).sum::<f32>().sqrt();
        if query.len() != self.dimension || norm == 0.0 || !norm.is_finite() || k == 0 || self.ids.is_empty() {
            return Vec::new();
        }
        let query: Vec<f32> = query.iter().map(|value| value / norm).collect();
        let mut scored: Vec<(f32, u32)> = self
            .rows
            .chunks_exact(self.dimension)
            .enumerate()
            .map(|(position, row)| (dot(row, &query), position as u32))
            .collect();
        let best_first = |a: &(f32, u32), b: &(f32, u32)| {
            b.0.total_cmp(&a.0)
                .then_with(|| self.ids[a.1 as usize].cmp(&self.ids[b.1 as usize]))
        };
        if k < scored.len() {
            scored.select_nth_unstable_by(k - 1, best_first);
            scored.truncate(k);
        }
        scored.sort_unstable_by(best_first);
        scored
            .into_iter()
            .map(|(score, position)| (self.ids[position as usize].clone(), score))
            .collect()
    }

    /// The row length.
    pub fn dimension(&self) -> usize {
        self.dimension
    }

    /// Ids indexed.
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    /// Whether nothing is indexed.
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// Whether `id` is indexed.
    pub fn contains(&self, id: &Id) -> bool {
        self.positions.contains_key(id)
    }

    /// The contiguous `len() × dimension()` unit rows (benchmarks read them for a bandwidth floor).
    pub fn rows(&self) -> &[f32] {
        &self.rows
    }

    /// What this index holds in memory, in bytes: its rows, its id list, and its position map's
    /// slots (key, value and one control byte each). Ids are typed UUIDs that own no heap.
    pub fn bytes(&self) -> usize {
        self.rows.capacity() * 4
            + self.ids.capacity() * std::mem::size_of::<Id>()
            + self.positions.capacity() * (std::mem::size_of::<(Id, usize)>() + 1)
    }
}

/// Dot product with 16 independent accumulators: the compiler vectorizes this loop, where a
/// single running sum is a serial dependency chain it must not reorder (measured 19.5 vs 32 ms
/// per 100k × 384 on a development machine).
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut sums = [0.0_f32; 16];
    let a_chunks = a.chunks_exact(16);
    let b_chunks = b.chunks_exact(16);
    let tail: f32 = a_chunks
        .remainder()
        .iter()
        .zip(b_chunks.remainder())
        .map(|(x, y)| x * y)
        .sum();
    for (x, y) in a_chunks.zip(b_chunks) {
        for ((sum, x), y) in sums.iter_mut().zip(x).zip(y) {
            *sum += x * y;
        }
    }
    sums.iter().sum::<f32>() + tail
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dot_handles_lengths_that_are_not_multiples_of_16() {
        let a: Vec<f32> = (0..37).map(|i| i as f32).collect();
        let b: Vec<f32> = (0..37).map(|i| (37 - i) as f32).collect();
        let naive: f32 = a.iter().zip(&b).map(|(x, y)| x * y).sum();
        assert_eq!(dot(&a, &b), naive);
    }

    #[test]
    fn remove_keeps_the_buffer_contiguous_and_positions_right() {
        let mut index = ExactIndex::new(2);
        index.insert("a", &[1.0, 0.0]).unwrap();
        index.insert("b", &[0.0, 1.0]).unwrap();
        index.insert("c", &[1.0, 1.0]).unwrap();
        assert!(index.remove(&"a"));
        assert!(!index.remove(&"a"));
        assert_eq!(index.len(), 2);
        let hits = index.search(&[1.0, 1.0], 1);
        assert_eq!(hits[0].0, "c");
        assert!((hits[0].1 - 1.0).abs() < 1e-6);
        assert_eq!(index.search(&[0.0, 1.0], 1)[0].0, "b");
    }

    #[test]
    fn insert_replaces_and_refuses_the_wrong_dimension_and_non_finite_values() {
        let mut index = ExactIndex::new(2);
        index.insert("a", &[1.0, 0.0]).unwrap();
        index.insert("a", &[0.0, 3.0]).unwrap();
        assert_eq!(index.len(), 1);
        assert!((index.search(&[0.0, 1.0], 5)[0].1 - 1.0).abs() < 1e-6);
        assert_eq!(
            index.insert("a", &[1.0, 0.0, 0.0]),
            Err(ExactIndexError::Dimension { expected: 2, got: 3 })
        );
        assert_eq!(index.insert("a", &[f32::NAN, 0.0]), Err(ExactIndexError::NotFinite));
        assert!(index.search(&[1.0], 2).is_empty(), "a query of another length");
        assert!(index.search(&[0.0, 0.0], 2).is_empty(), "a query of no length");
    }

    proptest::proptest! {
        /// Any inserts and removes: the index answers what a scan of the surviving vectors
        /// answers, in the same order.
        #[test]
        fn the_index_answers_what_a_plain_scan_answers(
            steps in proptest::collection::vec((0u8..12, proptest::bool::ANY, proptest::collection::vec(-4i8..5, 3)), 1..40),
            query in proptest::collection::vec(-4i8..5, 3),
            k in 1usize..8,
        ) {
            let mut index = ExactIndex::new(3);
            let mut plain: std::collections::BTreeMap<u8, Vec<f32>> = std::collections::BTreeMap::new();
            for (id, keep, vector) in steps {
                let vector: Vec<f32> = vector.into_iter().map(f32::from).collect();
                if keep {
                    index.insert(id, &vector).unwrap();
                    plain.insert(id, vector);
                } else {
                    proptest::prop_assert_eq!(index.remove(&id), plain.remove(&id).is_some());
                }
            }
            let query: Vec<f32> = query.into_iter().map(f32::from).collect();
            let norm = query.iter().map(|v| v * v).sum::<f32>().sqrt();
            let found = index.search(&query, k);
            if norm == 0.0 {
                proptest::prop_assert!(found.is_empty());
                return Ok(());
            }
            // The same arithmetic as the index: rows scaled by the inverse norm, the query divided.
            let unit = |v: &[f32]| {
                let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
                let scale = if n > 0.0 { 1.0 / n } else { 0.0 };
                v.iter().map(|x| x * scale).collect::<Vec<f32>>()
            };
            let q: Vec<f32> = query.iter().map(|x| x / norm).collect();
            let mut expected: Vec<(u8, f32)> = plain.iter().map(|(id, v)| (*id, dot(&unit(v), &q))).collect();
            expected.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
            expected.truncate(k);
            proptest::prop_assert_eq!(found.iter().map(|(id, _)| *id).collect::<Vec<_>>(), expected.iter().map(|(id, _)| *id).collect::<Vec<_>>());
        }
    }
}
