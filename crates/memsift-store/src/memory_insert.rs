//! The one insert every memory goes through, whichever path wrote it (extraction, replay,
//! consolidation, refinement, an operator's supersede): it refuses an erased fact (a tombstone
//! holds its fingerprint) and a second active memory with the same normalised text.

use chrono::{DateTime, Utc};
use memsift_core::{MemoryId, RequestId, SegmentId, UserId};

use crate::Result;
use crate::tx::{WriteTx, sql};

/// The importance a memory starts with (the column's default), before daily scoring moves it.
pub(crate) const DEFAULT_IMPORTANCE: f64 = 0.5;

/// What `model` says on a memory an operator wrote (`memory supersede`).
pub const OPERATOR_MODEL: &str = "operator";

/// A memory row to insert.
#[derive(Clone, Debug)]
pub(crate) struct MemoryInsert<'a> {
    /// The id it is written under (an extraction chooses it before the write, so a continuation
    /// planned in the same transaction can show the memory by it).
    pub(crate) id: MemoryId,
    pub(crate) user_id: UserId,
    /// The text as stored (whitespace collapsed by the caller).
    pub(crate) text: &'a str,
    /// `dedupe_key(text)`: the exact-dedupe and tombstone key.
    pub(crate) dedupe_key: &'a str,
    pub(crate) importance: f64,
    pub(crate) confidence: f64,
    pub(crate) happens_at: Option<DateTime<Utc>>,
    pub(crate) expires_at: Option<DateTime<Utc>>,
    pub(crate) sensitive: bool,
    pub(crate) temporal: &'a str,
    pub(crate) source_segment_id: Option<SegmentId>,
    pub(crate) source_request_id: Option<RequestId>,
    pub(crate) prompt_version: &'a str,
    /// What wrote it: the model, `heuristic` for the offline lane, [`OPERATOR_MODEL`] for an
    /// operator's supersede.
    pub(crate) model: Option<&'a str>,
    pub(crate) refined_at: Option<DateTime<Utc>>,
    /// The vector's little-endian bytes, its model and its dimension.
    pub(crate) embedding: Option<(Vec<u8>, &'a str, i64)>,
    pub(crate) now: DateTime<Utc>,
}

/// What [`WriteTx::insert_memory`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Inserted {
    /// Written with this id.
    Written(MemoryId),
    /// The user already has an active memory with the same normalised text.
    Duplicate,
    /// The user's erased memories held this fact; it stays erased.
    Erased,
}

impl WriteTx {
    /// Inserts a memory unless it was erased or is already held; see [`Inserted`].
    pub(crate) async fn insert_memory(&mut self, memory: &MemoryInsert<'_>) -> Result<Inserted> {
        if self.is_tombstoned(memory.user_id, memory.dedupe_key).await? {
            return Ok(Inserted::Erased);
        }
        let id = memory.id;
        let (embedding, embedding_model, embedding_dim) = match &memory.embedding {
            Some((bytes, model, dimension)) => (Some(bytes.clone()), Some(*model), Some(*dimension)),
            None => (None, None, None),
        };
        let inserted: Option<String> = self
            .scalar_optional(sql!(
                "INSERT INTO memories (id, user_id, text, dedupe_key, importance, confidence, happens_at, expires_at,
                                       sensitive, temporal, source_segment_id, source_request_id, prompt_version,
                                       refined_at, created_at, updated_at, embedding, embedding_model, embedding_dim,
                                       model)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $15, $16, $17, $18, $19)
                 ON CONFLICT (user_id, dedupe_key) WHERE archived_at IS NULL DO NOTHING
                 RETURNING id",
                id,
                memory.user_id,
                memory.text,
                memory.dedupe_key,
                memory.importance,
                memory.confidence,
                memory.happens_at,
                memory.expires_at,
                memory.sensitive,
                memory.temporal,
                memory.source_segment_id,
                memory.source_request_id,
                memory.prompt_version,
                memory.refined_at,
                memory.now,
                embedding,
                embedding_model,
                embedding_dim,
                memory.model
            ))
            .await?;
        Ok(match inserted {
            Some(_) => Inserted::Written(id),
            None => Inserted::Duplicate,
        })
    }

    /// The model a request's answer came from, as memories record it: the request's model, or its
    /// provider when it names none (the offline lane: `heuristic`).
    pub(crate) async fn model_of_request(&mut self, request_id: RequestId) -> Result<Option<String>> {
        Ok(self
            .scalar_optional::<Option<String>>(sql!(
                "SELECT COALESCE(NULLIF(model, ''), provider) FROM llm_requests WHERE id = $1",
                request_id
            ))
            .await?
            .flatten())
    }

    /// Whether the user's erased memories held a fact with this normalised text. Erased facts are
    /// keyed by the fingerprint of the user's external id, so they stay erased for the same person
    /// imported again under a new user row.
    pub(crate) async fn is_tombstoned(&mut self, user_id: UserId, dedupe_key: &str) -> Result<bool> {
        let Some(key) = self.erasure.clone() else {
            // Without the key no fingerprint can be checked: refuse rather than let a fact back in,
            // unless this database never had a key (nothing was ever erased in it).
            let keyed: Option<i64> = self
                .scalar_optional(sql!("SELECT id FROM erasure_key_check WHERE id = 1"))
                .await?;
            return match keyed {
                None => Ok(false),
                Some(_) => Err(crate::StoreError::Invalid(
                    "this database holds erased facts and memory writes must check them: give memsift the erasure key (MEMSIFT_ERASURE_KEY or [erasure] key_file)"
                        .to_owned(),
                )),
            };
        };
        let external_id: Option<String> = self
            .scalar_optional(sql!("SELECT external_id FROM users WHERE id = $1", user_id))
            .await?;
        let Some(external_id) = external_id else {
            return Ok(false);
        };
        let found: Option<String> = self
            .scalar_optional(sql!(
                "SELECT fingerprint FROM erased_facts WHERE user_key = $1 AND fingerprint = $2",
                key.user_key(&external_id),
                key.fact(dedupe_key)
            ))
            .await?;
        Ok(found.is_some())
    }
}
