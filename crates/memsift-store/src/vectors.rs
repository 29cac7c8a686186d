//! Memory embeddings in the store: written with the model id and dimension that made them, and
//! read back whole or since a memory version, for the engine's exact per-user index (invariant 8).
//!
//! Vectors are stored as little-endian f32 bytes (`BLOB` on SQLite, `bytea` on PostgreSQL). An
//! index in memory is a cache, and a cache in one daemon cannot see another daemon's writes: so
//! every embedding write bumps the user's `memory_version` in the same transaction, the database
//! stamps every insert, archive and embedding write (migration 0023), and an index built at a
//! version is brought forward by [`Vectors::memory_vectors_since`], or read whole by
//! [`Vectors::user_memory_vectors`] after a memory row was deleted.

use memsift_core::{MemoryId, UserId};

use crate::handles::Vectors;
use crate::tx::sql;
use crate::{Result, StoreError, corrupt};

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_round_trip() {
        let vector = vec![0.5_f32, -1.25, 3.0];
        assert_eq!(vector_from_le_bytes(&vector_to_le_bytes(&vector)), Some(vector));
        assert_eq!(vector_from_le_bytes(&[0, 0, 0]), None);
    }
}
