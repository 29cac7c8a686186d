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

use std::collections::BTreeSet;

use chrono::{DateTime, Utc};
use serde::Serialize;

use memsift_core::message::{ERASED_USER_PREFIX, canonical_user_id};

use crate::handles::Erasure;
use crate::tx::{WriteTx, sql};
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

/// Reads the normalised keys (`dedupe_key`) of every item in one stored raw output of the given
/// purpose, kept or dropped; the engine gives the processor's reading, the store knows no format.
pub type FactKeys = dyn Fn(&str, &str) -> Vec<String> + Sync;

impl Erasure<'_> {
    /// Erases `user_external_id`'s memories, vectors, links, entities, segments, messages, raw
    /// outputs and request bodies in one transaction and records a tombstone per erased fact:
    /// every memory the user had, and every item of their stored raw outputs as `fact_keys` reads
    /// them (dropped ones included, so a near-duplicate dropped the first time is not stored after
    /// a re-import).
    ///
    /// The id is taken in its canonical form. The transaction first takes the user's row lock
    /// (waiting for an ingest creating the user right now), so an ingest, apply or plan of this
    /// user that began before it ends first and is erased with the rest, and one that comes after
    /// finds the user erased.
    pub async fn erase_user(
        self,
        user_external_id: &str,
        now: DateTime<Utc>,
        fact_keys: &FactKeys,
    ) -> Result<ErasureReceipt> {
        let key = self.erasure_key()?;
        let user_external_id = canonical_user_id(user_external_id)
            .map_err(|error| StoreError::Invalid(format!("user `{}`: {error}", user_external_id.escape_debug())))?;
        let user_external_id = user_external_id.as_str();
        let user_key = key.user_key(user_external_id);
        let receipt = self
            .write(async |tx| {
                let Some(user_id) = tx.lock_user_to_erase(user_external_id, &user_key, now).await? else {
                    return Ok(ErasureReceipt {
                        user: user_external_id.to_owned(),
                        erased_at: now,
                        ..ErasureReceipt::default()
                    });
                };
                let user_id = user_id.as_str();
                // Ended first: this waits for an answer being recorded on one of them, and no
                // later answer is recorded on a dead request, so the outputs read below are all.
                let n_requests_ended = tx
                    .execute(sql!(
                        "UPDATE llm_requests SET status = 'dead', error = 'erased', claimed_by = NULL, claimed_until = NULL
                         WHERE user_id = $1 AND status NOT IN ('applied', 'dead')",
                        user_id
                    ))
                    .await? as i64;
                let mut receipt = tx.count_what_goes(user_id).await?;
                receipt.n_requests_ended = n_requests_ended;
                tx.record_erased_facts(user_id, &user_key, key, fact_keys, now).await?;
                receipt.n_provider_batches_pending = tx.scrub_requests(user_id).await?;
                tx.delete_user_rows(user_id, &mut receipt).await?;
                // The external id is the person's identifier in the host app: replaced by an opaque one.
                // Their erased facts hang off its keyed fingerprint, not off this row.
                // Turns went away: the floor moves with the version, so no cached turn index is
                // brought forward past this; each is read again whole.
                tx.execute(sql!(
                    "UPDATE users SET memory_version = memory_version + 1, turn_version = turn_version + 1,
                                      turn_floor = turn_version + 1, external_id = $2
                     WHERE id = $1",
                    user_id,
                    format!("{ERASED_USER_PREFIX}{user_key}:{user_id}")
                ))
                .await?;
                receipt.n_tombstones = tx
                    .scalar_one(sql!("SELECT COUNT(*) FROM erased_facts WHERE user_key = $1", &user_key))
                    .await?;
                receipt.user = user_external_id.to_owned();
                receipt.erased_at = now;
                Ok(receipt)
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

    /// Checks the erasure key against the one this database was first used with (recording it on
    /// first use) and moves any plain-text tombstones left by older versions to keyed fingerprints,
    /// giving the users they belong to opaque external ids. Returns how many were moved.
    ///
    /// What nearly every start finds (the key recorded and no old tombstones) is read without a
    /// write transaction, so a read-only command does not wait for SQLite's write lock here.
    pub async fn adopt_erasure_key(self, now: DateTime<Utc>) -> Result<u64> {
        let key = self.erasure_key()?;
        let check = key.check_value();
        let recorded: Option<String> = self
            .read_scalar_optional(sql!("SELECT check_value FROM erasure_key_check WHERE id = 1"))
            .await?;
        let n_legacy: i64 = self.read_scalar_one(sql!("SELECT COUNT(*) FROM tombstones")).await?;
        match recorded {
            Some(recorded) if recorded != check => return Err(wrong_erasure_key()),
            Some(_) if n_legacy == 0 => return Ok(0),
            _ => {}
        }
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
                Some(recorded) if recorded != check => return Err(wrong_erasure_key()),
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
                    "UPDATE users SET external_id = $2 WHERE id = $1 AND external_id NOT LIKE $3",
                    user_id,
                    format!("{ERASED_USER_PREFIX}{user_key}:{user_id}"),
                    crate::users::erased_pattern()
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
    async fn wipe_deleted_text(self) -> Result<()> {
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

impl Store {
    /// Uses `key` for the fingerprints of erased users and facts.
    pub fn with_erasure_key(mut self, key: ErasureKey) -> Store {
        self.erasure = Some(std::sync::Arc::new(key));
        self
    }
}

impl WriteTx {
    /// Takes the row lock of the live user `external_id` and returns their id; `None` when they
    /// were erased before (answered as done, nothing left). An unknown user is an error.
    ///
    /// The insert that opens it makes this transaction wait for an ingest that is creating the
    /// user right now (the insert of the same id conflicts with it), so a message posted just
    /// before a delete is erased by it rather than left behind; the row it may make is never kept.
    async fn lock_user_to_erase(
        &mut self,
        external_id: &str,
        user_key: &str,
        now: DateTime<Utc>,
    ) -> Result<Option<String>> {
        let probe: Option<String> = self
            .scalar_optional(sql!(
                "INSERT INTO users (id, external_id, created_at) VALUES ($1, $2, $3)
                 ON CONFLICT (external_id) DO NOTHING RETURNING id",
                memsift_core::UserId::new_v7(),
                external_id,
                now
            ))
            .await?;
        if let Some(probe) = &probe {
            self.execute(sql!("DELETE FROM users WHERE id = $1", probe)).await?;
        } else {
            let locked: Option<String> = self
                .scalar_optional(sql!(
                    "UPDATE users SET memory_version = memory_version WHERE external_id = $1 RETURNING id",
                    external_id
                ))
                .await?;
            if locked.is_some() {
                return Ok(locked);
            }
        }
        // Erased before: the row's external id was replaced by its keyed fingerprint, so a second
        // erasure of the same person is answered as done, nothing left.
        let erased: Option<String> = self
            .scalar_optional(sql!(
                "SELECT id FROM users WHERE external_id LIKE $1",
                format!("{ERASED_USER_PREFIX}{user_key}:%")
            ))
            .await?;
        match erased {
            Some(_) => Ok(None),
            None => Err(StoreError::NotFound(format!(
                "no user `{external_id}`; `memsift segments` lists the users memsift knows"
            ))),
        }
    }

    /// The receipt's counts of what is about to go (vectors, links, messages, outputs, bodies).
    async fn count_what_goes(&mut self, user_id: &str) -> Result<ErasureReceipt> {
        Ok(ErasureReceipt {
            n_vectors: self
                .scalar_one(sql!(
                    "SELECT COUNT(*) FROM memories WHERE user_id = $1 AND embedding IS NOT NULL",
                    user_id
                ))
                .await?,
            n_links: self
                .scalar_one(sql!(
                    "SELECT COUNT(*) FROM memory_links WHERE source_id IN (SELECT id FROM memories WHERE user_id = $1)
                        OR target_id IN (SELECT id FROM memories WHERE user_id = $1)",
                    user_id
                ))
                .await?,
            n_messages: self
                .scalar_one(sql!("SELECT COUNT(*) FROM messages WHERE user_id = $1", user_id))
                .await?,
            n_raw_outputs: self
                .scalar_one(sql!(
                    "SELECT COUNT(*) FROM llm_requests WHERE user_id = $1 AND raw_output IS NOT NULL",
                    user_id
                ))
                .await?,
            n_request_bodies: self
                .scalar_one(sql!(
                    "SELECT COUNT(*) FROM llm_requests WHERE user_id = $1 AND request_body IS NOT NULL",
                    user_id
                ))
                .await?,
            ..ErasureReceipt::default()
        })
    }

    /// Records the keyed fingerprint of every fact the user's memories and raw outputs hold.
    async fn record_erased_facts(
        &mut self,
        user_id: &str,
        user_key: &str,
        key: &ErasureKey,
        fact_keys: &FactKeys,
        now: DateTime<Utc>,
    ) -> Result<()> {
        let mut facts: BTreeSet<String> = self
            .scalar_all(sql!(
                "SELECT DISTINCT dedupe_key FROM memories WHERE user_id = $1",
                user_id
            ))
            .await?
            .into_iter()
            .collect();
        let outputs: Vec<(String, String)> = self
            .fetch_all(sql!(
                "SELECT purpose, raw_output FROM llm_requests WHERE user_id = $1 AND raw_output IS NOT NULL",
                user_id
            ))
            .await?;
        for (purpose, raw_output) in &outputs {
            facts.extend(
                fact_keys(purpose, raw_output)
                    .into_iter()
                    .filter(|fact| !fact.is_empty()),
            );
        }
        for fact in &facts {
            self.execute(sql!(
                "INSERT INTO erased_facts (user_key, fingerprint, erased_at) VALUES ($1, $2, $3)
                 ON CONFLICT DO NOTHING",
                user_key,
                key.fact(fact),
                now
            ))
            .await?;
        }
        // Rows of the plain-text table this user may have from before keyed erasure.
        self.execute(sql!("DELETE FROM tombstones WHERE user_id = $1", user_id))
            .await?;
        Ok(())
    }

    /// Drops every text from the user's request rows and their batches' errors (the figures stay
    /// for the bill); returns how many batches still in flight held the user's requests.
    async fn scrub_requests(&mut self, user_id: &str) -> Result<u64> {
        // Batches in flight with this user's requests: their provider copies go once ingested.
        let n_provider_batches_pending = self
            .execute(sql!(
                "UPDATE batches SET delete_when_ingested = TRUE, last_error = NULL
                 WHERE status IN ('submitting', 'submitted', 'ended')
                   AND id IN (SELECT batch_id FROM llm_requests WHERE user_id = $1 AND batch_id IS NOT NULL)",
                user_id
            ))
            .await?;
        // A batch's last error is the provider's text, which can quote a prompt.
        self.execute(sql!(
            "UPDATE batches SET last_error = NULL
             WHERE id IN (SELECT batch_id FROM llm_requests WHERE user_id = $1 AND batch_id IS NOT NULL)",
            user_id
        ))
        .await?;
        // Keep the figures, drop every text (a provider's error can quote the prompt); detach from
        // the segments about to go.
        self.execute(sql!(
            "UPDATE llm_requests SET raw_output = NULL, request_body = NULL, context = '{}', subject = '{}',
                                     drops = '[]', segment_id = NULL, run_id = NULL, subject_entity_id = NULL,
                                     error = CASE WHEN error IS NULL THEN NULL ELSE 'erased' END
             WHERE user_id = $1",
            user_id
        ))
        .await?;
        self.execute(sql!(
            "DELETE FROM request_drops WHERE request_id IN (SELECT id FROM llm_requests WHERE user_id = $1)",
            user_id
        ))
        .await?;
        Ok(n_provider_batches_pending)
    }

    /// Deletes the user's journal, memories, entities and segments (links, evidence, joins and
    /// messages go with them by `ON DELETE CASCADE`), counting them into `receipt`.
    async fn delete_user_rows(&mut self, user_id: &str, receipt: &mut ErasureReceipt) -> Result<()> {
        receipt.n_operations = self
            .execute(sql!("DELETE FROM operations WHERE user_id = $1", user_id))
            .await? as i64;
        receipt.n_memories = self
            .execute(sql!("DELETE FROM memories WHERE user_id = $1", user_id))
            .await? as i64;
        receipt.n_entities = self
            .execute(sql!("DELETE FROM entities WHERE user_id = $1", user_id))
            .await? as i64;
        receipt.n_segments = self
            .execute(sql!("DELETE FROM segments WHERE user_id = $1", user_id))
            .await? as i64;
        Ok(())
    }
}

/// The refusal of a key other than the one a database's erasures were made with.
fn wrong_erasure_key() -> StoreError {
    StoreError::Invalid(
        "the erasure key is not the one this database's erasures were made with; \
         use that key (MEMSIFT_ERASURE_KEY or [erasure] key_file, backed up with the database)"
            .to_owned(),
    )
}
