//! One user's turn vectors in memory: contiguous unit rows searched exactly, like the memory
//! index, and remembered with the turn version they were read at.

use std::collections::HashMap;

/// A user's turn vectors of one model.
#[derive(Clone, Debug)]
pub struct TurnIndex {
    /// `users.turn_version` when read; a different version in the database means bring it
    /// forward, or read it again.
    pub version: i64,
    dimension: usize,
    ids: Vec<String>,
    rows: Vec<f32>,
    /// Each id's row.
    position: HashMap<String, usize>,
}

impl TurnIndex {
    /// An index over `(message id, unit vector)` rows; rows of another length are left out.
    pub fn new(version: i64, dimension: usize, vectors: Vec<(String, Vec<f32>)>) -> Self {
        let mut index = TurnIndex {
            version,
            dimension,
            ids: Vec::with_capacity(vectors.len()),
            rows: Vec::with_capacity(vectors.len() * dimension),
            position: HashMap::with_capacity(vectors.len()),
        };
        index.merge(version, vectors);
        index
    }

    /// Brings this index to `version`: `changed` rows replace its own of the same ids and the new
    /// ones go after, which is what reading every row again would hold. In place, so a new turn
    /// costs its own row, not a copy of every other.
    pub fn merge(&mut self, version: i64, changed: Vec<(String, Vec<f32>)>) {
        self.version = version;
        for (id, vector) in changed {
            if vector.len() != self.dimension {
                continue;
            }
            match self.position.get(&id) {
                Some(&index) => {
                    self.rows[index * self.dimension..(index + 1) * self.dimension].copy_from_slice(&vector);
                }
                None => {
                    self.position.insert(id.clone(), self.ids.len());
                    self.ids.push(id);
                    self.rows.extend_from_slice(&vector);
                }
            }
        }
    }

    /// Turns indexed.
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    /// Whether no turn is indexed.
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// The `k` turns most similar to `query` (cosine, best first); empty for a query of another
    /// length or of no length.
    pub fn search(&self, query: &[f32], k: usize) -> Vec<(String, f32)> {
        let norm = query.iter().map(|value| value * value).sum::<f32>().sqrt();
        if query.len() != self.dimension || norm == 0.0 || !norm.is_finite() || k == 0 {
            return Vec::new();
        }
        let mut scored: Vec<(usize, f32)> = self
            .rows
            .chunks_exact(self.dimension)
            .enumerate()
            .map(|(index, row)| (index, row.iter().zip(query).map(|(a, b)| a * b).sum::<f32>() / norm))
            .collect();
        let k = k.min(scored.len());
        if k < scored.len() {
            scored.select_nth_unstable_by(k, |a, b| b.1.total_cmp(&a.1));
            scored.truncate(k);
        }
        scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        scored
            .into_iter()
            .map(|(index, score)| (self.ids[index].clone(), score))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn search_ranks_by_cosine_and_skips_rows_of_another_length() {
        let index = TurnIndex::new(
            3,
            2,
            vec![
                ("a".into(), vec![1.0, 0.0]),
                ("b".into(), vec![0.0, 1.0]),
                ("c".into(), vec![0.6, 0.8]),
                ("bad".into(), vec![1.0]),
            ],
        );
        assert_eq!(index.len(), 3);
        let found = index.search(&[2.0, 0.0], 2);
        assert_eq!(found.iter().map(|(id, _)| id.as_str()).collect::<Vec<_>>(), ["a", "c"]);
        assert!((found[1].1 - 0.6).abs() < 1e-6);
        assert!(index.search(&[1.0], 2).is_empty());
        assert!(index.search(&[0.0, 0.0], 2).is_empty());
    }

    #[test]
    fn merging_replaces_rows_of_known_ids_appends_new_ones_and_skips_other_lengths() {
        let index = TurnIndex::new(3, 2, vec![("a".into(), vec![1.0, 0.0]), ("b".into(), vec![0.0, 1.0])]);
        let mut merged = index.clone();
        merged.merge(
            5,
            vec![
                ("b".into(), vec![1.0, 0.0]),
                ("c".into(), vec![0.0, 1.0]),
                ("bad".into(), vec![1.0]),
            ],
        );
        assert_eq!((merged.version, merged.len()), (5, 3));
        let nearest_x: Vec<String> = merged.search(&[1.0, 0.0], 2).into_iter().map(|(id, _)| id).collect();
        assert_eq!(nearest_x, ["a", "b"], "b's row was replaced");
        assert_eq!(merged.search(&[0.0, 1.0], 1)[0].0, "c");
        let twice = TurnIndex::new(1, 2, vec![("a".into(), vec![1.0, 0.0]), ("a".into(), vec![0.0, 1.0])]);
        assert_eq!(twice.len(), 1, "an id is one row, its last vector");
        assert_eq!(twice.search(&[0.0, 1.0], 1)[0].1, 1.0);
    }
}
