//! Erasing a user: everything memsift learned from or stored about them goes, in one
//! transaction, leaving tombstones so the same facts are never extracted again.
//!
//! What stays: the user row (the tombstones hang off it) and the request rows' token and cost
//! figures (budgets and the bill need them), scrubbed of every text. Requests still in flight
//! are ended as `dead` with the reason `erased`, so a batch answer arriving later applies nothing.

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::tx::sql;
use crate::{Result, Store, StoreError};

/// What an erasure removed, for the receipt the operator keeps.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ErasureReceipt {
    /// The user (external id).
    pub user: String,
    /// Memories deleted.
    pub n_memories: i64,
    /// Of those, memories that carried a vector.
    pub n_vectors: i64,
    /// Links between memories deleted.
    pub n_links: i64,
    /// Entities deleted.
    pub n_entities: i64,
    /// Segments deleted.
    pub n_segments: i64,
    /// Messages deleted.
    pub n_messages: i64,
    /// Raw model outputs scrubbed from request rows.
    pub n_raw_outputs: i64,
    /// Stored request bodies scrubbed from request rows.
    pub n_request_bodies: i64,
    /// Requests still in flight, ended as dead.
    pub n_requests_ended: i64,
    /// Journal rows deleted (they held memory texts).
    pub n_operations: i64,
    /// Tombstones now held for the user (fingerprints of erased facts).
    pub n_tombstones: i64,
    /// Provider-side batches (or their files) deleted because they held the user's text.
    pub n_provider_batches_deleted: u64,
    /// Batches that held the user's text but were left at the provider (not yet ingested,
    /// deletion off, or no provider configured for them); the admin deletes these by hand.
    pub n_provider_batches_left: u64,
    /// When.
    pub erased_at: DateTime<Utc>,
}

impl Store {
    /// Erases `user_external_id`'s memories, vectors, links, entities, segments, messages, raw
    /// outputs and request bodies in one transaction and records a tombstone per erased fact.
    pub async fn erase_user(&self, user_external_id: &str, now: DateTime<Utc>) -> Result<ErasureReceipt> {
        self.write(async |tx| {
            let user_id: Option<String> = tx
                .scalar_optional(sql!("SELECT id FROM users WHERE external_id = $1", user_external_id))
                .await?;
            let Some(user_id) = user_id else {
                return Err(StoreError::NotFound(format!(
                    "no user `{user_external_id}`; `memsift segments` lists the users memsift knows"
                )));
            };
            let user_id = user_id.as_str();
            let n_vectors: i64 = tx
                .scalar_one(sql!(
                    "SELECT COUNT(*) FROM memories WHERE user_id = $1 AND embedding IS NOT NULL",
                    user_id
                ))
                .await?;
            let n_links: i64 = tx
                .scalar_one(sql!(
                    "SELECT COUNT(*) FROM memory_links WHERE source_id IN (SELECT id FROM memories WHERE user_id = $1)
                        OR target_id IN (SELECT id FROM memories WHERE user_id = $1)",
                    user_id
                ))
                .await?;
            let n_messages: i64 = tx
                .scalar_one(sql!("SELECT COUNT(*) FROM messages WHERE user_id = $1", user_id))
                .await?;
            let n_raw_outputs: i64 = tx
                .scalar_one(sql!(
                    "SELECT COUNT(*) FROM llm_requests WHERE user_id = $1 AND raw_output IS NOT NULL",
                    user_id
                ))
                .await?;
            let n_request_bodies: i64 = tx
                .scalar_one(sql!(
                    "SELECT COUNT(*) FROM llm_requests WHERE user_id = $1 AND request_body IS NOT NULL",
                    user_id
                ))
                .await?;
            tx.execute(sql!(
                "INSERT INTO tombstones (user_id, fingerprint, created_at)
                 SELECT DISTINCT user_id, dedupe_key, $2 FROM memories WHERE user_id = $1
                 ON CONFLICT DO NOTHING",
                user_id,
                now
            ))
            .await?;
            let n_requests_ended = tx
                .execute(sql!(
                    "UPDATE llm_requests SET status = 'dead', error = 'erased', claimed_by = NULL, claimed_until = NULL
                     WHERE user_id = $1 AND status NOT IN ('applied', 'dead')",
                    user_id
                ))
                .await? as i64;
            // Keep the figures, drop every text; detach from the segments about to go.
            tx.execute(sql!(
                "UPDATE llm_requests SET raw_output = NULL, request_body = NULL, context = '{}', subject = '{}',
                                         drops = '[]', segment_id = NULL
                 WHERE user_id = $1",
                user_id
            ))
            .await?;
            let n_operations = tx
                .execute(sql!("DELETE FROM operations WHERE user_id = $1", user_id))
                .await? as i64;
            // Links, evidence and entity joins go with their memories (ON DELETE CASCADE).
            let n_memories = tx
                .execute(sql!("DELETE FROM memories WHERE user_id = $1", user_id))
                .await? as i64;
            let n_entities = tx
                .execute(sql!("DELETE FROM entities WHERE user_id = $1", user_id))
                .await? as i64;
            // Messages go with their segments (ON DELETE CASCADE).
            let n_segments = tx
                .execute(sql!("DELETE FROM segments WHERE user_id = $1", user_id))
                .await? as i64;
            tx.execute(sql!(
                "UPDATE users SET memory_version = memory_version + 1 WHERE id = $1",
                user_id
            ))
            .await?;
            let n_tombstones: i64 = tx
                .scalar_one(sql!("SELECT COUNT(*) FROM tombstones WHERE user_id = $1", user_id))
                .await?;
            Ok(ErasureReceipt {
                user: user_external_id.to_owned(),
                n_memories,
                n_vectors,
                n_links,
                n_entities,
                n_segments,
                n_messages,
                n_raw_outputs,
                n_request_bodies,
                n_requests_ended,
                n_operations,
                n_tombstones,
                n_provider_batches_deleted: 0,
                n_provider_batches_left: 0,
                erased_at: now,
            })
        })
        .await
    }
}
