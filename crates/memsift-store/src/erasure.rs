//! Erasing a user: everything memsift learned from or stored about them goes, in one
//! transaction, leaving tombstones so the same facts are never extracted again.
//!
//! What stays: the user row (the tombstones hang off it) and the request rows' token and cost
//! figures (budgets and the bill need them), scrubbed of every text. Requests still in flight
//! are ended as `dead` with the reason `erased`, so a batch answer arriving later applies nothing.

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::{Result, Store, StoreError, in_write_tx};

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
        in_write_tx!(self, |tx| {
            let user_id: Option<String> = sqlx::query_scalar("SELECT id FROM users WHERE external_id = $1")
                .bind(user_external_id)
                .fetch_optional(&mut *tx)
                .await?;
            match user_id {
                None => Err(StoreError::NotFound(format!(
                    "no user `{user_external_id}`; `memsift segments` lists the users memsift knows"
                ))),
                Some(user_id) => {
                    let count = |sql: &'static str| sqlx::query_scalar::<_, i64>(sql).bind(user_id.clone());
                    let n_vectors = count("SELECT COUNT(*) FROM memories WHERE user_id = $1 AND embedding IS NOT NULL")
                        .fetch_one(&mut *tx)
                        .await?;
                    let n_links = count(
                        "SELECT COUNT(*) FROM memory_links WHERE source_id IN (SELECT id FROM memories WHERE user_id = $1)
                            OR target_id IN (SELECT id FROM memories WHERE user_id = $1)",
                    )
                    .fetch_one(&mut *tx)
                    .await?;
                    let n_messages = count("SELECT COUNT(*) FROM messages WHERE user_id = $1")
                        .fetch_one(&mut *tx)
                        .await?;
                    let n_raw_outputs =
                        count("SELECT COUNT(*) FROM llm_requests WHERE user_id = $1 AND raw_output IS NOT NULL")
                            .fetch_one(&mut *tx)
                            .await?;
                    let n_request_bodies =
                        count("SELECT COUNT(*) FROM llm_requests WHERE user_id = $1 AND request_body IS NOT NULL")
                            .fetch_one(&mut *tx)
                            .await?;
                    sqlx::query(
                        "INSERT INTO tombstones (user_id, fingerprint, created_at)
                         SELECT DISTINCT user_id, dedupe_key, $2 FROM memories WHERE user_id = $1
                         ON CONFLICT DO NOTHING",
                    )
                    .bind(&user_id)
                    .bind(now)
                    .execute(&mut *tx)
                    .await?;
                    let n_requests_ended = sqlx::query(
                        "UPDATE llm_requests SET status = 'dead', error = 'erased', claimed_by = NULL, claimed_until = NULL
                         WHERE user_id = $1 AND status NOT IN ('applied', 'dead')",
                    )
                    .bind(&user_id)
                    .execute(&mut *tx)
                    .await?
                    .rows_affected() as i64;
                    // Keep the figures, drop every text; detach from the segments about to go.
                    sqlx::query(
                        "UPDATE llm_requests SET raw_output = NULL, request_body = NULL, context = '{}', subject = '{}',
                                                 drops = '[]', segment_id = NULL
                         WHERE user_id = $1",
                    )
                    .bind(&user_id)
                    .execute(&mut *tx)
                    .await?;
                    let delete = |sql: &'static str| sqlx::query(sql).bind(user_id.clone());
                    let n_operations = delete("DELETE FROM operations WHERE user_id = $1")
                        .execute(&mut *tx)
                        .await?
                        .rows_affected() as i64;
                    // Links, evidence and entity joins go with their memories (ON DELETE CASCADE).
                    let n_memories = delete("DELETE FROM memories WHERE user_id = $1")
                        .execute(&mut *tx)
                        .await?
                        .rows_affected() as i64;
                    let n_entities = delete("DELETE FROM entities WHERE user_id = $1")
                        .execute(&mut *tx)
                        .await?
                        .rows_affected() as i64;
                    // Messages go with their segments (ON DELETE CASCADE).
                    let n_segments = delete("DELETE FROM segments WHERE user_id = $1")
                        .execute(&mut *tx)
                        .await?
                        .rows_affected() as i64;
                    sqlx::query("UPDATE users SET memory_version = memory_version + 1 WHERE id = $1")
                        .bind(&user_id)
                        .execute(&mut *tx)
                        .await?;
                    let n_tombstones = count("SELECT COUNT(*) FROM tombstones WHERE user_id = $1")
                        .fetch_one(&mut *tx)
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
                }
            }
        })
    }
}
