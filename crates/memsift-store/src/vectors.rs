//! Memory embeddings in the store and the exact per-user vector index (invariant 8).
//!
//! Vectors are stored as little-endian f32 bytes (`BLOB` on SQLite, `bytea` on PostgreSQL) next to
//! the model id and dimension that made them. Search is exact: one contiguous `n × d` buffer of unit
//! rows per user, a dot product per row, top-k by partial selection. At the sizes one user has this
//! takes microseconds to milliseconds, and a lossy index would let duplicates through dedupe.
//!
//! An index in memory is a cache, and a cache in one daemon cannot see another daemon's writes. So
//! each index remembers the user's `memory_version` it was loaded at, every embedding write bumps
//! that version in the same transaction, and [`VectorCache`] brings the index forward whenever the
//! two differ: it reads the memories stamped since (the database stamps every insert, archive and
//! embedding write, migration 0023) and reads the index whole only after a memory row was deleted.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use memsift_core::{MemoryId, UserId};

use crate::handles::Vectors;
use crate::tx::sql;
use crate::{Result, Store, StoreError, corrupt};

/// One active memory's stored embedding, as read back (any field may be missing or stale).
#[derive(Clone, Debug, PartialEq)]
pub struct MemoryVector {
    /// The memory.
    pub memory_id: MemoryId,
    /// The model that made the vector, if any.
    pub model_id: Option<String>,
    /// The dimension recorded with it.
    pub dimension: Option<usize>,
    /// The vector; `None` when the memory has none or its bytes do not decode.
    pub vector: Option<Vec<f32>>,
}

/// A user's active memory vectors together with the memory version they were read at.
#[derive(Clone, Debug, PartialEq)]
pub struct UserVectors {
    /// `users.memory_version` read before the rows, so a concurrent write can only make the
    /// cache look older than it is (and reload), never newer.
    pub version: i64,
    /// One entry per active memory.
    pub rows: Vec<MemoryVector>,
}

/// What changed in a user's memory vectors since some version.
#[derive(Clone, Debug, PartialEq)]
pub struct ChangedVectors {
    /// `users.memory_version` and `memory_floor`, read before the rows.
    pub state: crate::StampState,
    /// Active memories written or changed since, with whatever embedding they have.
    pub changed: Vec<MemoryVector>,
    /// Memories that stopped being active since.
    pub gone: Vec<MemoryId>,
}

/// A memory that `memsift reembed` must (re-)embed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemoryToEmbed {
    /// The memory.
    pub memory_id: MemoryId,
    /// Its owner, needed to write the vector back.
    pub user_id: UserId,
    /// The text to embed.
    pub text: String,
    /// The model of the vector it has now, if any.
    pub current_model: Option<String>,
}

/// Encodes a vector as little-endian f32 bytes (the same layout `memsift_embed::to_le_bytes` writes;
/// duplicated so the store does not depend on the model crates).
pub fn vector_to_le_bytes(vector: &[f32]) -> Vec<u8> {
    vector.iter().flat_map(|value| value.to_le_bytes()).collect()
}

/// Decodes little-endian f32 bytes; `None` when the length is not a multiple of 4.
pub fn vector_from_le_bytes(bytes: &[u8]) -> Option<Vec<f32>> {
    if !bytes.len().is_multiple_of(4) {
        return None;
    }
    Some(
        bytes
            .chunks_exact(4)
            .map(|chunk| f32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]))
            .collect(),
    )
}

/// `id, embedding, embedding_model, embedding_dim` as stored.
type VectorRow = (String, Option<Vec<u8>>, Option<String>, Option<i64>);

/// A [`VectorRow`] with 1 when the memory is active (0 when retired).
type StampedVectorRow = (String, Option<Vec<u8>>, Option<String>, Option<i64>, i64);

fn memory_vector((id, bytes, model_id, dimension): VectorRow) -> Result<MemoryVector> {
    Ok(MemoryVector {
        memory_id: parse_memory_id(&id)?,
        model_id,
        dimension: dimension.and_then(|value| usize::try_from(value).ok()),
        vector: bytes.as_deref().and_then(vector_from_le_bytes),
    })
}

fn parse_memory_id(text: &str) -> Result<MemoryId> {
    MemoryId::parse(text).map_err(|error| corrupt("memories", error))
}

impl Vectors<'_> {
    /// Stores several of `user_id`'s memory embeddings (all made by `model_id`) in one transaction
    /// with one memory-version bump; returns the new version. Memories of other users, and ones
    /// deleted meanwhile, are skipped (the version still moves, so caches reload).
    pub async fn set_memory_embeddings(
        self,
        user_id: UserId,
        model_id: &str,
        vectors: &[(MemoryId, Vec<f32>)],
    ) -> Result<i64> {
        if let Some((memory_id, _)) = vectors
            .iter()
            .find(|(_, vector)| vector.is_empty() || vector.iter().any(|value| !value.is_finite()))
        {
            return Err(corrupt(
                "memories",
                format!("refusing to store an empty or non-finite embedding for memory {memory_id}"),
            ));
        }
        self.write(async |tx| {
            tx.lock_user(&user_id.to_string(), false).await?;
            for (memory_id, vector) in vectors {
                tx.execute(sql!(
                    "UPDATE memories SET embedding = $1, embedding_model = $2, embedding_dim = $3
                     WHERE id = $4 AND user_id = $5",
                    vector_to_le_bytes(vector),
                    model_id,
                    vector.len(),
                    memory_id,
                    user_id
                ))
                .await?;
            }
            tx.scalar_one(sql!(
                "UPDATE users SET memory_version = memory_version + 1 WHERE id = $1 RETURNING memory_version",
                user_id
            ))
            .await
        })
        .await
    }

    /// The user's current memory version.
    pub async fn memory_version(self, user_id: UserId) -> Result<i64> {
        let version: Option<i64> = self
            .read_scalar_optional(sql!("SELECT memory_version FROM users WHERE id = $1", user_id))
            .await?;
        version.ok_or_else(|| StoreError::NotFound(format!("no user {user_id}")))
    }

    /// `user_id`'s memory version and floor (zeros for a user not stored).
    pub async fn memory_state(self, user_id: UserId) -> Result<crate::StampState> {
        self.stamp_state(sql!(
            "SELECT memory_version, memory_floor FROM users WHERE id = $1",
            user_id
        ))
        .await
    }

    /// Every active memory of `user_id` with whatever embedding it has, and the version read first.
    pub async fn user_memory_vectors(self, user_id: UserId) -> Result<UserVectors> {
        let version = self.memory_version(user_id).await?;
        let rows: Vec<VectorRow> = self
            .read_all(sql!(
                "SELECT id, embedding, embedding_model, embedding_dim FROM memories
                 WHERE user_id = $1 AND archived_at IS NULL
                 ORDER BY id",
                user_id
            ))
            .await?;
        let rows = rows.into_iter().map(memory_vector).collect::<Result<Vec<_>>>()?;
        Ok(UserVectors { version, rows })
    }

    /// What a vector index built at `since` must re-read: the active memories of `user_id`
    /// stamped after it, with whatever embedding they have, and the memories stamped after it
    /// that are no longer active; with the memory version and floor read first, so the rows are
    /// at least as new as they say.
    pub async fn memory_vectors_since(self, user_id: UserId, since: i64) -> Result<ChangedVectors> {
        let state = self.memory_state(user_id).await?;
        // The user and the stamp are the only conditions, archived rows included: see
        // `Search::memory_texts_since` for the plan this keeps PostgreSQL from.
        let rows: Vec<StampedVectorRow> = self
            .read_all(sql!(
                "SELECT id, embedding, embedding_model, embedding_dim,
                        CAST(CASE WHEN archived_at IS NULL THEN 1 ELSE 0 END AS BIGINT)
                 FROM memories WHERE user_id = $1 AND memory_stamp > $2",
                user_id,
                since
            ))
            .await?;
        let mut changed = ChangedVectors {
            state,
            changed: Vec::new(),
            gone: Vec::new(),
        };
        for (id, bytes, model_id, dimension, active) in rows {
            if active == 1 {
                changed.changed.push(memory_vector((id, bytes, model_id, dimension))?);
            } else {
                changed.gone.push(parse_memory_id(&id)?);
            }
        }
        Ok(changed)
    }

    /// Active memories whose embedding is missing or was made by another model or dimension,
    /// in id order after `after` (pass the last id of the previous page; successfully embedded
    /// memories leave the set, and the cursor keeps a long run from rescanning them).
    pub async fn memories_needing_embedding(
        self,
        model_id: &str,
        dimension: usize,
        after: Option<MemoryId>,
        limit: i64,
    ) -> Result<Vec<MemoryToEmbed>> {
        let rows: Vec<(String, String, String, Option<String>)> = self
            .read_all(sql!(
                "SELECT id, user_id, text, embedding_model FROM memories
                 WHERE archived_at IS NULL AND id > $3
                   AND (embedding IS NULL OR embedding_model IS NULL OR embedding_model <> $1
                        OR embedding_dim IS NULL OR embedding_dim <> $2)
                 ORDER BY id
                 LIMIT $4",
                model_id,
                dimension as i64,
                after.map_or_else(String::new, |id| id.to_string()),
                limit
            ))
            .await?;
        rows.into_iter()
            .map(|(id, user_id, text, current_model)| {
                Ok(MemoryToEmbed {
                    memory_id: parse_memory_id(&id)?,
                    user_id: UserId::parse(&user_id).map_err(|error| corrupt("memories", error))?,
                    text,
                    current_model,
                })
            })
            .collect()
    }
}

/// A vector that does not fit the index.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum VectorIndexError {
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

/// A search hit.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Neighbour {
    /// The memory.
    pub memory_id: MemoryId,
    /// Cosine similarity (dot product of unit vectors).
    pub score: f32,
}

/// The exact vector index of one user's active memories for one model.
#[derive(Clone, Debug)]
pub struct VectorIndex {
    user_id: UserId,
    model_id: String,
    dimension: usize,
    version: i64,
    ids: Vec<MemoryId>,
    /// `ids.len() × dimension` unit rows, contiguous so the scan streams through memory.
    rows: Vec<f32>,
    positions: HashMap<MemoryId, usize>,
}

/// An index just loaded, and the memories it could not take.
#[derive(Clone, Debug)]
pub struct LoadedIndex {
    /// The index of every memory whose vector matches the model and dimension.
    pub index: VectorIndex,
    /// Memories with no vector, or one from another model or dimension: re-embed these
    /// (`memsift reembed`); they are left out rather than compared across models.
    pub needs_embedding: Vec<MemoryId>,
}

impl VectorIndex {
    /// An empty index at version 0.
    pub fn new(user_id: UserId, model_id: &str, dimension: usize) -> Self {
        Self {
            user_id,
            model_id: model_id.to_owned(),
            dimension,
            version: 0,
            ids: Vec::new(),
            rows: Vec::new(),
            positions: HashMap::new(),
        }
    }

    /// Loads `user_id`'s active memory vectors made by `model_id` at `dimension`.
    pub async fn load(store: &Store, user_id: UserId, model_id: &str, dimension: usize) -> Result<LoadedIndex> {
        let vectors = store.vectors().user_memory_vectors(user_id).await?;
        Ok(Self::from_user_vectors(user_id, model_id, dimension, vectors))
    }

    /// Builds an index from rows already read, splitting off the ones of another model.
    pub fn from_user_vectors(user_id: UserId, model_id: &str, dimension: usize, vectors: UserVectors) -> LoadedIndex {
        let mut index = Self::new(user_id, model_id, dimension);
        index.version = vectors.version;
        index.ids.reserve(vectors.rows.len());
        index.rows.reserve(vectors.rows.len() * dimension);
        let needs_embedding = index.take_rows(vectors.rows);
        LoadedIndex { index, needs_embedding }
    }

    /// Brings this index to `version` with what changed since it was read: `changed` rows
    /// replace their own (or leave when they no longer have a vector of this model) and `gone`
    /// ones leave. Returns the changed memories that need a vector of this model, as a load would.
    pub fn bring_forward(&mut self, version: i64, changed: Vec<MemoryVector>, gone: &[MemoryId]) -> Vec<MemoryId> {
        for memory_id in gone {
            self.remove(*memory_id);
        }
        self.version = version;
        self.take_rows(changed)
    }

    /// Inserts each row that has a usable vector of this index's model and dimension, removes the
    /// others and returns their ids.
    fn take_rows(&mut self, rows: Vec<MemoryVector>) -> Vec<MemoryId> {
        let mut needs_embedding = Vec::new();
        for row in rows {
            let matches =
                row.model_id.as_deref() == Some(self.model_id.as_str()) && row.dimension == Some(self.dimension);
            match row.vector {
                Some(vector) if matches && self.insert(row.memory_id, &vector).is_ok() => {}
                _ => {
                    self.remove(row.memory_id);
                    needs_embedding.push(row.memory_id);
                }
            }
        }
        needs_embedding
    }

    /// Adds or replaces `memory_id`'s vector (normalized here, so a slightly off embedder cannot
    /// skew scores).
    pub fn insert(&mut self, memory_id: MemoryId, vector: &[f32]) -> Result<(), VectorIndexError> {
        if vector.len() != self.dimension {
            return Err(VectorIndexError::Dimension {
                expected: self.dimension,
                got: vector.len(),
            });
        }
        if vector.iter().any(|value| !value.is_finite()) {
            return Err(VectorIndexError::NotFinite);
        }
        let norm = vector.iter().map(|value| value * value).sum::<f32>().sqrt();
        let scale = if norm > 0.0 { 1.0 / norm } else { 0.0 };
        let normalized = vector.iter().map(|value| value * scale);
        match self.positions.get(&memory_id) {
            Some(&position) => {
                for (slot, value) in self.rows[position * self.dimension..(position + 1) * self.dimension]
                    .iter_mut()
                    .zip(normalized)
                {
                    *slot = value;
                }
            }
            None => {
                self.positions.insert(memory_id, self.ids.len());
                self.ids.push(memory_id);
                self.rows.extend(normalized);
            }
        }
        Ok(())
    }

    /// Removes `memory_id` (archived, merged, erased); false when it was not indexed.
    pub fn remove(&mut self, memory_id: MemoryId) -> bool {
        let Some(position) = self.positions.remove(&memory_id) else {
            return false;
        };
        // Move the last row into the hole so the buffer stays contiguous.
        let last = self.ids.len() - 1;
        if position != last {
            let (start, end) = (last * self.dimension, (last + 1) * self.dimension);
            self.rows.copy_within(start..end, position * self.dimension);
            let moved = self.ids[last];
            self.ids[position] = moved;
            self.positions.insert(moved, position);
        }
        self.ids.pop();
        self.rows.truncate(last * self.dimension);
        true
    }

    /// The `k` memories closest to `query` by cosine, best first (exact, not approximate).
    pub fn search(&self, query: &[f32], k: usize) -> Result<Vec<Neighbour>, VectorIndexError> {
        if query.len() != self.dimension {
            return Err(VectorIndexError::Dimension {
                expected: self.dimension,
                got: query.len(),
            });
        }
        if k == 0 || self.ids.is_empty() {
            return Ok(Vec::new());
        }
        let norm = query.iter().map(|value| value * value).sum::<f32>().sqrt();
        let query: Vec<f32> = query
            .iter()
            .map(|value| if norm > 0.0 { value / norm } else { 0.0 })
            .collect();
        let mut scored: Vec<(f32, u32)> = self
            .rows
            .chunks_exact(self.dimension)
            .enumerate()
            .map(|(position, row)| (dot(row, &query), position as u32))
            .collect();
        let best_first = |a: &(f32, u32), b: &(f32, u32)| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1));
        if k < scored.len() {
            scored.select_nth_unstable_by(k - 1, best_first);
            scored.truncate(k);
        }
        scored.sort_unstable_by(best_first);
        Ok(scored
            .into_iter()
            .map(|(score, position)| Neighbour {
                memory_id: self.ids[position as usize],
                score,
            })
            .collect())
    }

    /// Records that this process wrote the user's memories and the write returned `new_version`.
    /// The index stays current only if no other writer came in between (`new_version` is exactly
    /// one past its own); otherwise it keeps its old version and the next freshness check reloads.
    pub fn advance_version(&mut self, new_version: i64) -> bool {
        if new_version == self.version + 1 {
            self.version = new_version;
            true
        } else {
            false
        }
    }

    /// True when the database's memory version is still the one this index reflects.
    pub async fn is_current(&self, store: &Store) -> Result<bool> {
        Ok(store.vectors().memory_version(self.user_id).await? == self.version)
    }

    /// Whose memories.
    pub fn user_id(&self) -> UserId {
        self.user_id
    }

    /// The model every row was made by.
    pub fn model_id(&self) -> &str {
        &self.model_id
    }

    /// The row length.
    pub fn dimension(&self) -> usize {
        self.dimension
    }

    /// The user's memory version this index reflects.
    pub fn version(&self) -> i64 {
        self.version
    }

    /// Indexed memories.
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    /// True when nothing is indexed.
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// The contiguous `len() × dimension()` unit rows (benchmarks read them for a bandwidth floor).
    pub fn rows(&self) -> &[f32] {
        &self.rows
    }

    /// True when `memory_id` is indexed.
    pub fn contains(&self, memory_id: MemoryId) -> bool {
        self.positions.contains_key(&memory_id)
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

/// Per-user indexes for one model, each checked against the database's memory version before use.
#[derive(Debug)]
pub struct VectorCache {
    model_id: String,
    dimension: usize,
    indexes: Mutex<HashMap<UserId, Arc<VectorIndex>>>,
    /// Indexes read whole, and brought forward by the memories stamped since.
    builds: [std::sync::atomic::AtomicU64; 2],
}

impl VectorCache {
    /// An empty cache for vectors of `model_id` at `dimension`.
    pub fn new(model_id: &str, dimension: usize) -> Self {
        Self {
            model_id: model_id.to_owned(),
            dimension,
            indexes: Mutex::new(HashMap::new()),
            builds: Default::default(),
        }
    }

    /// How many indexes were read whole, and how many were brought forward by the memories
    /// stamped since, since this cache was made.
    pub fn builds(&self) -> (u64, u64) {
        (
            self.builds[0].load(std::sync::atomic::Ordering::Relaxed),
            self.builds[1].load(std::sync::atomic::Ordering::Relaxed),
        )
    }

    /// `user_id`'s index, reloaded when the database's memory version moved (a write here or in
    /// another daemon). The second value lists memories left out for want of a matching vector;
    /// it is empty when the cached index was still current.
    pub async fn fresh(&self, store: &Store, user_id: UserId) -> Result<(Arc<VectorIndex>, Vec<MemoryId>)> {
        let version = store.vectors().memory_version(user_id).await?;
        let held = self.lock().get(&user_id).cloned();
        if let Some(index) = held.as_ref().filter(|index| index.version() == version) {
            return Ok((Arc::clone(index), Vec::new()));
        }
        if let Some(base) = held.filter(|index| index.version() < version) {
            let read = store.vectors().memory_vectors_since(user_id, base.version()).await?;
            // The floor read with the rows decides: one read before them could miss a deletion.
            if read.state.can_extend(base.version()) {
                // Taken out of the cache first, so that unless a search still reads it, it is
                // brought forward in place instead of copied.
                self.lock().remove(&user_id);
                let mut index = Arc::try_unwrap(base).unwrap_or_else(|shared| (*shared).clone());
                let needs_embedding = index.bring_forward(read.state.version, read.changed, &read.gone);
                let index = Arc::new(index);
                self.lock().insert(user_id, Arc::clone(&index));
                self.builds[1].fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                return Ok((index, needs_embedding));
            }
        }
        self.builds[0].fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let loaded = VectorIndex::load(store, user_id, &self.model_id, self.dimension).await?;
        let index = Arc::new(loaded.index);
        self.lock().insert(user_id, Arc::clone(&index));
        Ok((index, loaded.needs_embedding))
    }

    /// Applies this process's own write of a vector to the cached index (if any), so the next
    /// `fresh` needs no reload unless another writer moved the version too.
    pub fn record_embedding(&self, user_id: UserId, memory_id: MemoryId, vector: &[f32], new_version: i64) {
        let mut indexes = self.lock();
        if let Some(index) = indexes.get_mut(&user_id) {
            let index = Arc::make_mut(index);
            if index.insert(memory_id, vector).is_err() || !index.advance_version(new_version) {
                // Cannot be kept in step: drop it and let the next `fresh` reload.
                indexes.remove(&user_id);
            }
        }
    }

    /// Applies this process's own write of several vectors made in one transaction that bumped the
    /// user's memory version once to `new_version` (an extraction apply).
    pub fn record_embeddings(&self, user_id: UserId, written: &[(MemoryId, &[f32])], new_version: i64) {
        let mut indexes = self.lock();
        if let Some(index) = indexes.get_mut(&user_id) {
            let index = Arc::make_mut(index);
            let inserted = written
                .iter()
                .all(|(memory_id, vector)| index.insert(*memory_id, vector).is_ok());
            if !inserted || !index.advance_version(new_version) {
                indexes.remove(&user_id);
            }
        }
    }

    /// The model whose vectors this cache holds.
    pub fn model_id(&self) -> &str {
        &self.model_id
    }

    /// Drops a user's index (erasure, or a change the caller cannot apply in place).
    pub fn forget(&self, user_id: UserId) {
        self.lock().remove(&user_id);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<UserId, Arc<VectorIndex>>> {
        // A panic while holding this lock leaves at worst a stale entry, which the version check
        // catches; so a poisoned lock is still safe to use.
        self.indexes.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user() -> UserId {
        UserId::new_v7()
    }

    #[test]
    fn dot_handles_lengths_that_are_not_multiples_of_16() {
        let a: Vec<f32> = (0..37).map(|i| i as f32).collect();
        let b: Vec<f32> = (0..37).map(|i| (37 - i) as f32).collect();
        let naive: f32 = a.iter().zip(&b).map(|(x, y)| x * y).sum();
        assert_eq!(dot(&a, &b), naive);
    }

    #[test]
    fn remove_keeps_the_buffer_contiguous_and_positions_right() {
        let mut index = VectorIndex::new(user(), "m", 2);
        let ids: Vec<MemoryId> = (0..3).map(|_| MemoryId::new_v7()).collect();
        index.insert(ids[0], &[1.0, 0.0]).unwrap();
        index.insert(ids[1], &[0.0, 1.0]).unwrap();
        index.insert(ids[2], &[1.0, 1.0]).unwrap();
        assert!(index.remove(ids[0]));
        assert!(!index.remove(ids[0]));
        assert_eq!(index.len(), 2);
        let hits = index.search(&[1.0, 1.0], 1).unwrap();
        assert_eq!(hits[0].memory_id, ids[2]);
        assert!((hits[0].score - 1.0).abs() < 1e-6);
        let hits = index.search(&[0.0, 1.0], 1).unwrap();
        assert_eq!(hits[0].memory_id, ids[1]);
    }

    #[test]
    fn insert_replaces_and_rejects_the_wrong_dimension() {
        let mut index = VectorIndex::new(user(), "m", 2);
        let id = MemoryId::new_v7();
        index.insert(id, &[1.0, 0.0]).unwrap();
        index.insert(id, &[0.0, 3.0]).unwrap();
        assert_eq!(index.len(), 1);
        assert!((index.search(&[0.0, 1.0], 5).unwrap()[0].score - 1.0).abs() < 1e-6);
        assert_eq!(
            index.insert(id, &[1.0, 0.0, 0.0]),
            Err(VectorIndexError::Dimension { expected: 2, got: 3 })
        );
        assert_eq!(index.insert(id, &[f32::NAN, 0.0]), Err(VectorIndexError::NotFinite));
    }

    #[test]
    fn the_version_advances_only_by_our_own_single_write() {
        let mut index = VectorIndex::new(user(), "m", 2);
        assert!(index.advance_version(1));
        assert!(!index.advance_version(3), "another writer bumped in between");
        assert_eq!(index.version(), 1);
    }

    #[test]
    fn bytes_round_trip() {
        let vector = vec![0.5_f32, -1.25, 3.0];
        assert_eq!(vector_from_le_bytes(&vector_to_le_bytes(&vector)), Some(vector));
        assert_eq!(vector_from_le_bytes(&[0, 0, 0]), None);
    }
}
