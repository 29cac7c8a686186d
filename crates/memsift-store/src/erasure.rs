//! Erasing a user: everything memsift learned from or stored about them goes, in one
//! transaction, leaving keyed fingerprints so the same facts are never stored again.
//!
//! What stays: the user row, its external id replaced by an opaque one, and the request rows'
//! token and cost figures (budgets and the bill need them), scrubbed of every text, errors
//! included. The erased facts are kept only as HMAC fingerprints (`erasure_key`), never as text.
//! Requests still in flight are ended as `dead` with the reason `erased`, so a batch answer
//! arriving later applies nothing, and their batches are marked so that what the provider keeps
//! of them is deleted once they are ingested.
//!
//! Deleted text must not survive in the database files either: SQLite runs with `secure_delete`
//! (freed pages are zeroed), and after an erasure its write-ahead log is checkpointed and
//! truncated, so no older copy of a page stays in it; PostgreSQL vacuums the tables the erasure
//! touched, which removes the dead rows from the tables (their bytes can stay in free space until
//! reused: `VACUUM FULL`, which rewrites the files, is for an operator to schedule).

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::tx::sql;
use crate::{BackendKind, ErasureKey, Result, Store, StoreError};

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
    /// Batches that held the user's text but were left at the provider (deletion off, no
    /// provider configured for them, or the delete failed); the admin deletes these by hand.
    pub n_provider_batches_left: u64,
    /// Batches still in flight that held the user's text: what the provider keeps of each is
    /// deleted once it is ingested.
    pub n_provider_batches_pending: u64,
    /// When.
    pub erased_at: DateTime<Utc>,
}

impl Store {
    /// Erases `user_external_id`'s memories, vectors, links, entities, segments, messages, raw
    /// outputs and request bodies in one transaction and records a tombstone per erased fact.
    pub async fn erase_user(&self, user_external_id: &str, now: DateTime<Utc>) -> Result<ErasureReceipt> {
        let key = self.erasure_key()?;
        let user_key = key.user_key(user_external_id);
        let kind = self.kind();
        let receipt = self
            .write(async |tx| {
                let user_id: Option<String> = tx
                    .scalar_optional(sql!("SELECT id FROM users WHERE external_id = $1", user_external_id))
                    .await?;
                let Some(user_id) = user_id else {
                    // Erased before: the row's external id was replaced by its keyed fingerprint,
                    // so a second erasure of the same person is answered as done, nothing left.
                    let erased: Option<String> = tx
                        .scalar_optional(sql!(
                            "SELECT id FROM users WHERE external_id LIKE $1",
                            format!("erased:{user_key}:%")
                        ))
                        .await?;
                    if erased.is_some() {
                        return Ok(ErasureReceipt {
                            user: user_external_id.to_owned(),
                            erased_at: now,
                            ..ErasureReceipt::default()
                        });
                    }
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
                let facts: Vec<String> = tx
                    .scalar_all(sql!(
                        "SELECT DISTINCT dedupe_key FROM memories WHERE user_id = $1",
                        user_id
                    ))
                    .await?;
                for fact in &facts {
                    tx.execute(sql!(
                        "INSERT INTO erased_facts (user_key, fingerprint, erased_at) VALUES ($1, $2, $3)
                     ON CONFLICT DO NOTHING",
                        &user_key,
                        key.fact(fact),
                        now
                    ))
                    .await?;
                }
                // Rows of the plain-text table this user may have from before keyed erasure.
                tx.execute(sql!("DELETE FROM tombstones WHERE user_id = $1", user_id))
                    .await?;
                // Batches in flight with this user's requests: their provider copies go once ingested.
                let n_provider_batches_pending = tx
                    .execute(sql!(
                        "UPDATE batches SET delete_when_ingested = TRUE, last_error = NULL
                 WHERE status IN ('submitting', 'submitted', 'ended')
                   AND id IN (SELECT batch_id FROM llm_requests WHERE user_id = $1 AND batch_id IS NOT NULL)",
                        user_id
                    ))
                    .await?;
                // A batch's last error is the provider's text, which can quote a prompt.
                tx.execute(sql!(
                    "UPDATE batches SET last_error = NULL
                 WHERE id IN (SELECT batch_id FROM llm_requests WHERE user_id = $1 AND batch_id IS NOT NULL)",
                    user_id
                ))
                .await?;
                let n_requests_ended = tx
                    .execute(sql!(
                    "UPDATE llm_requests SET status = 'dead', error = 'erased', claimed_by = NULL, claimed_until = NULL
                     WHERE user_id = $1 AND status NOT IN ('applied', 'dead')",
                    user_id
                ))
                    .await? as i64;
                // Keep the figures, drop every text (a provider's error can quote the prompt); detach from
                // the segments about to go.
                tx.execute(sql!(
                    "UPDATE llm_requests SET raw_output = NULL, request_body = NULL, context = '{}', subject = '{}',
                                         drops = '[]', segment_id = NULL, run_id = NULL, subject_entity_id = NULL,
                                         error = CASE WHEN error IS NULL THEN NULL ELSE 'erased' END
                 WHERE user_id = $1",
                    user_id
                ))
                .await?;
                tx.execute(sql!(
                    "DELETE FROM request_drops WHERE request_id IN (SELECT id FROM llm_requests WHERE user_id = $1)",
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
                // FTS5 keeps a deleted row's terms in its index segments until they are merged:
                // merging every segment now leaves no term of the erased text in the index.
                if kind == BackendKind::Sqlite {
                    for index in ["memories_fts", "messages_fts"] {
                        let merge = format!("INSERT INTO {index}({index}) VALUES ('optimize')");
                        tx.execute(crate::tx::Statement {
                            sql: &merge,
                            args: Vec::new(),
                        })
                        .await?;
                    }
                }
                // The external id is the person's identifier in the host app: replaced by an opaque one.
                // Their erased facts hang off its keyed fingerprint, not off this row.
                tx.execute(sql!(
                    "UPDATE users SET memory_version = memory_version + 1, external_id = $2 WHERE id = $1",
                    user_id,
                    format!("erased:{user_key}:{user_id}")
                ))
                .await?;
                let n_tombstones: i64 = tx
                    .scalar_one(sql!("SELECT COUNT(*) FROM erased_facts WHERE user_key = $1", &user_key))
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
                    n_provider_batches_pending,
                    erased_at: now,
                })
            })
            .await?;
        self.wipe_deleted_text().await?;
        Ok(receipt)
    }

    /// The store's erasure key, or an error saying how to give it one.
    pub(crate) fn erasure_key(&self) -> Result<&ErasureKey> {
        self.erasure.as_deref().ok_or_else(|| {
            StoreError::Invalid(
                "this store has no erasure key; memsift loads it from MEMSIFT_ERASURE_KEY or [erasure] key_file"
                    .to_owned(),
            )
        })
    }

    /// Uses `key` for the fingerprints of erased users and facts.
    pub fn with_erasure_key(mut self, key: ErasureKey) -> Store {
        self.erasure = Some(std::sync::Arc::new(key));
        self
    }

    /// Checks the erasure key against the one this database was first used with (recording it on
    /// first use) and moves any plain-text tombstones left by older versions to keyed fingerprints,
    /// giving the users they belong to opaque external ids. Returns how many were moved.
    pub async fn adopt_erasure_key(&self, now: DateTime<Utc>) -> Result<u64> {
        let key = self.erasure_key()?;
        let check = key.check_value();
        self.write(async |tx| {
            let recorded: Option<String> = tx
                .scalar_optional(sql!("SELECT check_value FROM erasure_key_check WHERE id = 1"))
                .await?;
            match recorded {
                None => {
                    tx.execute(sql!(
                        "INSERT INTO erasure_key_check (id, check_value, created_at) VALUES (1, $1, $2)",
                        &check,
                        now
                    ))
                    .await?;
                }
                Some(recorded) if recorded != check => {
                    return Err(StoreError::Invalid(
                        "the erasure key is not the one this database's erasures were made with; \
                         use that key (MEMSIFT_ERASURE_KEY or [erasure] key_file, backed up with the database)"
                            .to_owned(),
                    ));
                }
                Some(_) => {}
            }
            let legacy: Vec<(String, String, Option<String>)> = tx
                .fetch_all(sql!(
                    "SELECT t.user_id, t.fingerprint, u.external_id FROM tombstones t LEFT JOIN users u ON u.id = t.user_id"
                ))
                .await?;
            for (user_id, fingerprint, external_id) in &legacy {
                let user_key = key.user_key(external_id.as_deref().unwrap_or(user_id));
                tx.execute(sql!(
                    "INSERT INTO erased_facts (user_key, fingerprint, erased_at) VALUES ($1, $2, $3)
                     ON CONFLICT DO NOTHING",
                    &user_key,
                    key.fact(fingerprint),
                    now
                ))
                .await?;
                tx.execute(sql!(
                    "UPDATE users SET external_id = $2 WHERE id = $1 AND external_id NOT LIKE 'erased:%'",
                    user_id,
                    format!("erased:{user_key}:{user_id}")
                ))
                .await?;
            }
            tx.execute(sql!("DELETE FROM tombstones")).await?;
            Ok(legacy.len() as u64)
        })
        .await
    }

    /// Makes deleted rows unreadable in the database files: on SQLite a `TRUNCATE` checkpoint of
    /// the write-ahead log (with `secure_delete` on, the freed pages were zeroed; the log still
    /// held the old pages until now); on PostgreSQL a `VACUUM` of the tables an erasure touches.
    async fn wipe_deleted_text(&self) -> Result<()> {
        match self.kind() {
            BackendKind::Sqlite => {
                // A reader in another connection can hold the log open; try a few times. A log
                // that cannot be truncated now is truncated by the next erasure or checkpoint.
                for _ in 0..5 {
                    let busy = self
                        .maintain::<(i64, i64, i64)>("PRAGMA wal_checkpoint(TRUNCATE)")
                        .await?;
                    if busy.is_none_or(|(busy, _, _)| busy == 0) {
                        break;
                    }
                }
            }
            BackendKind::Postgres => {
                // VACUUM returns no row; `(i64,)` only names a row type it never decodes.
                self.maintain::<(i64,)>(
                    "VACUUM messages, segments, memories, memory_evidence, memory_links, memory_entities, entities,
                            llm_requests, operations, segment_summaries, users, batches",
                )
                .await?;
            }
        }
        Ok(())
    }
}
