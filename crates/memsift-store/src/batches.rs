//! The batch protocol's committed states: pack → submitting → submitted → ended → ingested.
//!
//! Intent is committed before effect (invariant 3): a batch is written `submitting` with its
//! requests assigned before the provider's create call is made, so a crash or a lost reply leaves a
//! row the reconciler resolves. Polls are snoozes, never attempts.

use chrono::{DateTime, Duration, Utc};
use memsift_core::BatchId;
use serde::Serialize;

use crate::Result;
use crate::handles::Batches;
use crate::health::note_waiting_segments;
use crate::requests::{CREATE_UNKNOWN, WORK_COLUMNS, WorkRequest, WorkRow, create_outcome_unknown};
use crate::tx::{WriteTx, sql};

/// How batches are packed: when a group is due and how big a batch may be.
#[derive(Clone, Copy, Debug)]
pub struct PackPolicy {
    /// Requests per provider batch at most.
    pub max_requests: i64,
    /// A group is due once its oldest request has waited this long, even if the batch is small.
    pub max_wait: Duration,
    /// How long the packing worker's claim on the new batch lasts (longer than a create call).
    pub lease: Duration,
}

/// A planned batch-lane request and when it was planned (packing waits for the oldest).
#[derive(sqlx::FromRow)]
struct PackRow {
    #[sqlx(flatten)]
    work: WorkRow,
    created_at: DateTime<Utc>,
}

/// A batch just packed and committed in `submitting`: what the create call must send.
#[derive(Clone, Debug)]
pub struct PackedBatch {
    /// Our id.
    pub id: BatchId,
    /// Provider kind.
    pub provider: String,
    /// `{purpose}_{tier}` of its requests.
    pub config_key: String,
    /// When the intent was committed (the reconciler's search window starts here).
    pub submit_started_at: DateTime<Utc>,
    /// Its requests.
    pub requests: Vec<WorkRequest>,
}

/// A batch row as the coordinator uses it.
#[derive(Clone, Debug, PartialEq, Serialize, sqlx::FromRow)]
pub struct BatchRow {
    /// Our id.
    pub id: String,
    /// Provider kind.
    pub provider: String,
    /// The provider's id, once known.
    pub provider_batch_id: Option<String>,
    /// Purpose of its requests.
    pub purpose: String,
    /// `{purpose}_{tier}`.
    pub config_key: String,
    /// Status.
    pub status: String,
    /// Requests in it.
    pub n_requests: i64,
    /// Results by kind.
    pub n_succeeded: i64,
    /// Errored results.
    pub n_errored: i64,
    /// Expired results.
    pub n_expired: i64,
    /// Canceled results.
    pub n_canceled: i64,
    /// Created (row).
    pub created_at: DateTime<Utc>,
    /// Intent committed.
    pub submit_started_at: Option<DateTime<Utc>>,
    /// Provider accepted it.
    pub submitted_at: Option<DateTime<Utc>>,
    /// Provider finished it.
    pub ended_at: Option<DateTime<Utc>>,
    /// The provider's processing deadline.
    pub provider_expires_at: Option<DateTime<Utc>>,
    /// Next poll.
    pub next_poll_at: Option<DateTime<Utc>>,
    /// Polls so far.
    pub n_polls: i64,
    /// Result lines fanned out so far.
    pub ingest_cursor: i64,
    /// Reconciler passes that found nothing.
    pub reconcile_misses: i64,
    /// Last problem.
    pub last_error: Option<String>,
    /// Results downloads that could not be read as the provider's format or were incomplete.
    pub download_failures: i64,
    /// Since when the provider answers 404 for this batch or its results (none: it answers).
    pub missing_since: Option<DateTime<Utc>>,
}

pub(crate) const BATCH_COLUMNS: &str =
    "id, provider, provider_batch_id, purpose, config_key, status, n_requests, n_succeeded, n_errored,
    n_expired, n_canceled, created_at, submit_started_at, submitted_at, ended_at, provider_expires_at, next_poll_at,
    n_polls, ingest_cursor, reconcile_misses, last_error, download_failures, missing_since";

/// What the reconciler's miss found out about a `submitting` batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReconcileMiss {
    /// Passes that found nothing, this one included.
    pub misses: i64,
    /// Whether a create call was made and answered without a verdict (rather than never made,
    /// because the process died between the intent and the call).
    pub create_was_called: bool,
}

impl Batches<'_> {
    /// The (provider, config key) groups that have planned batch-lane requests.
    pub async fn planned_batch_groups(self) -> Result<Vec<(String, String)>> {
        self.read_all(sql!(
            "SELECT DISTINCT provider, config_key FROM llm_requests
                 WHERE lane = 'batch' AND status = 'planned' AND batch_id IS NULL ORDER BY provider, config_key"
        ))
        .await
    }

    /// Packs planned batch-lane requests of one group into a batch committed in `submitting`
    /// (the write-ahead intent), when there are `max_requests` of them or the oldest has waited
    /// `max_wait`. Returns `None` when it is not time yet.
    pub async fn pack_batch(
        self,
        provider: &str,
        config_key: &str,
        worker: &str,
        now: DateTime<Utc>,
        policy: PackPolicy,
    ) -> Result<Option<PackedBatch>> {
        let PackPolicy {
            max_requests,
            max_wait,
            lease,
        } = policy;
        let lock = self.skip_locked();
        let select = format!(
            "SELECT {WORK_COLUMNS}, created_at FROM llm_requests
             WHERE lane = 'batch' AND status = 'planned' AND batch_id IS NULL AND provider = $1 AND config_key = $2
               AND (claimed_until IS NULL OR claimed_until <= $4)
             ORDER BY created_at, id LIMIT $3 {lock}"
        );
        let batch_id = BatchId::new_v7();
        let packed: Option<Vec<WorkRow>> = self
            .write(async |tx| {
                let rows: Vec<PackRow> = tx
                    .fetch_all(sql!(&select, provider, config_key, max_requests, now))
                    .await?;
                let oldest = rows.iter().map(|row| row.created_at).min();
                let due = match oldest {
                    None => false,
                    Some(oldest) => rows.len() as i64 >= max_requests || now - oldest >= max_wait,
                };
                if !due {
                    return Ok(None);
                }
                let purpose = rows[0].work.purpose.clone();
                let model = rows[0].work.model.clone();
                tx.execute(sql!(
                    "INSERT INTO batches (id, provider, purpose, config_key, model, status, n_requests, created_at,
                                          submit_started_at, claimed_by, claimed_until)
                     VALUES ($1, $2, $3, $4, $5, 'submitting', $6, $7, $7, $8, $9)",
                    batch_id,
                    provider,
                    &purpose,
                    config_key,
                    &model,
                    rows.len(),
                    now,
                    worker,
                    now + lease
                ))
                .await?;
                for row in &rows {
                    tx.execute(sql!(
                        "UPDATE llm_requests SET status = 'submitted', batch_id = $2, submitted_at = $3 WHERE id = $1",
                        &row.work.id,
                        batch_id,
                        now
                    ))
                    .await?;
                }
                Ok(Some(rows.into_iter().map(|row| row.work).collect()))
            })
            .await?;
        let Some(rows) = packed else { return Ok(None) };
        Ok(Some(PackedBatch {
            id: batch_id,
            provider: provider.to_owned(),
            config_key: config_key.to_owned(),
            submit_started_at: now,
            requests: rows.into_iter().map(WorkRequest::try_from).collect::<Result<_>>()?,
        }))
    }

    /// The requests assigned to a batch.
    pub async fn batch_requests(self, batch_id: BatchId) -> Result<Vec<WorkRequest>> {
        let sql = format!("SELECT {WORK_COLUMNS} FROM llm_requests WHERE batch_id = $1 ORDER BY created_at, id");
        let rows: Vec<WorkRow> = self.read_all(sql!(&sql, batch_id)).await?;
        rows.into_iter().map(WorkRequest::try_from).collect()
    }

    /// The provider accepted the batch: record its id and schedule the first poll.
    pub async fn mark_batch_submitted(
        self,
        batch_id: BatchId,
        provider_batch_id: &str,
        provider_expires_at: Option<DateTime<Utc>>,
        next_poll_at: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Result<bool> {
        let updated = self
            .write(async |tx| {
                tx.execute(sql!(
                    "UPDATE batches SET status = 'submitted', provider_batch_id = $2, provider_expires_at = $3,
                        next_poll_at = $4, submitted_at = $5, claimed_by = NULL, claimed_until = NULL, last_error = NULL
                 WHERE id = $1 AND status = 'submitting'",
                    batch_id,
                    provider_batch_id,
                    provider_expires_at,
                    next_poll_at,
                    now
                ))
                .await
            })
            .await?;
        Ok(updated == 1)
    }

    /// The provider definitely refused the batch: it failed, and its requests are `errored` so
    /// re-planning counts their attempts.
    pub async fn mark_batch_rejected(self, batch_id: BatchId, error: &str, now: DateTime<Utc>) -> Result<()> {
        self.write(async |tx| {
            fail_batch(tx, batch_id, error, now).await?;
            tx.execute(sql!(
                "UPDATE llm_requests SET status = 'errored', error = $2, completed_at = $3
                 WHERE batch_id = $1 AND status = 'submitted'",
                batch_id,
                format!("batch rejected by the provider: {error}"),
                now
            ))
            .await?;
            Ok(())
        })
        .await
    }

    /// Proven never created (or refused for now): the batch fails and its requests go back to
    /// `planned` (same ids, no attempt used), packable again from `not_before` when given.
    pub async fn replan_batch(
        self,
        batch_id: BatchId,
        reason: &str,
        now: DateTime<Utc>,
        not_before: Option<DateTime<Utc>>,
    ) -> Result<()> {
        self.write(async |tx| {
            fail_batch(tx, batch_id, reason, now).await?;
            submitted_back_to_planned(tx, batch_id, not_before).await?;
            Ok(())
        })
        .await
    }

    /// A lane is paused by a setting fault: like [`Store::replan_batch`] with a not-before time,
    /// and the requests' segments say what they wait for.
    pub async fn hold_batch(
        self,
        batch_id: BatchId,
        reason: &str,
        not_before: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Result<()> {
        self.write(async |tx| {
            fail_batch(tx, batch_id, reason, now).await?;
            note_waiting_segments(
                tx,
                "batch_id = $1 AND status = 'submitted'",
                batch_id.to_string(),
                reason,
            )
            .await?;
            submitted_back_to_planned(tx, batch_id, Some(not_before)).await?;
            Ok(())
        })
        .await
    }

    /// Every request of an ingested batch failed validation, which only the configuration can
    /// cause: their failures are taken back (same ids, no attempt spent), they wait as `planned`
    /// until `not_before`, and the batch and their segments say why. Returns how many.
    pub async fn hold_refused_batch(self, batch_id: BatchId, reason: &str, not_before: DateTime<Utc>) -> Result<u64> {
        self.write(async |tx| {
            tx.execute(sql!(
                "UPDATE batches SET last_error = $2 WHERE id = $1",
                batch_id,
                reason
            ))
            .await?;
            note_waiting_segments(tx, "batch_id = $1 AND status = 'errored'", batch_id.to_string(), reason).await?;
            tx.execute(sql!(
                "UPDATE llm_requests SET status = 'planned', batch_id = NULL, submitted_at = NULL, completed_at = NULL,
                        error = $2, claimed_until = $3
                 WHERE batch_id = $1 AND status = 'errored'",
                batch_id,
                reason,
                not_before
            ))
            .await
        })
        .await
    }

    /// A create call was made for a `submitting` batch and answered without a verdict: the row
    /// stays `submitting` for the reconciler, with a note that the create was called.
    pub async fn note_create_unknown(self, batch_id: BatchId, error: &str) -> Result<()> {
        self.write(async |tx| {
            tx.execute(sql!(
                "UPDATE batches SET last_error = $2, claimed_by = NULL, claimed_until = NULL WHERE id = $1",
                batch_id,
                format!("{CREATE_UNKNOWN}{error}")
            ))
            .await
        })
        .await?;
        Ok(())
    }

    /// Batches to look for at the provider: left in `submitting` for longer than `grace` (a
    /// process that died around its create), or whose create answered without an outcome (a 5xx,
    /// a lost reply) at once, since no create of theirs is still running; either only once a
    /// reconcile hold on it has run out.
    pub async fn batches_to_reconcile(self, now: DateTime<Utc>, grace: Duration) -> Result<Vec<BatchRow>> {
        let sql = format!(
            "SELECT {BATCH_COLUMNS} FROM batches
             WHERE status = 'submitting' AND (submit_started_at <= $1 OR last_error LIKE $3)
               AND (claimed_until IS NULL OR claimed_until <= $2)
             ORDER BY submit_started_at, id"
        );
        self.read_all(sql!(&sql, now - grace, now, format!("{CREATE_UNKNOWN}%")))
            .await
    }

    /// The reconciler found no provider batch this pass: counts the miss, keeps the note of an
    /// unknown create outcome, and holds the batch until the next pass: `recheck` after a create
    /// that answered without an outcome (a provider's list catches up within seconds), `grace`
    /// after a process that died around its create (its create may still be running).
    pub async fn reconcile_miss(
        self,
        batch_id: BatchId,
        now: DateTime<Utc>,
        grace: Duration,
        recheck: Duration,
    ) -> Result<ReconcileMiss> {
        self.write(async |tx| {
            let note: Option<String> = tx
                .scalar_optional(sql!("SELECT last_error FROM batches WHERE id = $1", batch_id))
                .await?
                .flatten();
            let create_was_called = create_outcome_unknown(note.as_deref());
            let kept = if create_was_called {
                note.unwrap_or_default()
            } else {
                "no provider batch found yet".to_owned()
            };
            let misses: i64 = tx
                .scalar_one(sql!(
                    "UPDATE batches SET reconcile_misses = reconcile_misses + 1, claimed_until = $2, last_error = $3
                     WHERE id = $1 RETURNING reconcile_misses",
                    batch_id,
                    now + if create_was_called { recheck } else { grace },
                    kept
                ))
                .await?;
            Ok(ReconcileMiss {
                misses,
                create_was_called,
            })
        })
        .await
    }

    /// Provider batch ids we already track (so the reconciler never adopts one twice).
    pub async fn known_provider_batch_ids(self, provider: &str) -> Result<Vec<String>> {
        self.read_scalar_all(sql!(
            "SELECT provider_batch_id FROM batches WHERE provider = $1 AND provider_batch_id IS NOT NULL",
            provider
        ))
        .await
    }

    /// Claims submitted batches whose poll is due; the claim pushes `next_poll_at` out by `lease`
    /// so another daemon does not poll the same batch meanwhile.
    pub async fn claim_batches_to_poll(self, now: DateTime<Utc>, lease: Duration, limit: i64) -> Result<Vec<BatchRow>> {
        let lock = self.skip_locked();
        let sql = format!(
            "UPDATE batches SET next_poll_at = $2
             WHERE id IN (SELECT id FROM batches WHERE status = 'submitted' AND next_poll_at <= $1
                          ORDER BY next_poll_at, id LIMIT $3 {lock})
             RETURNING {BATCH_COLUMNS}"
        );
        self.write(async |tx| tx.fetch_all(sql!(&sql, now, now + lease, limit)).await)
            .await
    }

    /// Not finished yet: count the poll and sleep until `next_poll_at` (a snooze, never an attempt).
    pub async fn snooze_batch(self, batch_id: BatchId, next_poll_at: DateTime<Utc>, note: Option<&str>) -> Result<()> {
        self.write(async |tx| {
            tx.execute(sql!(
                "UPDATE batches SET n_polls = n_polls + 1, next_poll_at = $2, last_error = $3, missing_since = NULL
                 WHERE id = $1",
                batch_id,
                next_poll_at,
                note
            ))
            .await
        })
        .await?;
        Ok(())
    }

    /// The provider finished the batch; results can be fetched.
    pub async fn mark_batch_ended(self, batch_id: BatchId, counts: [i64; 4], now: DateTime<Utc>) -> Result<()> {
        self.write(async |tx| {
            tx.execute(sql!(
                "UPDATE batches SET status = 'ended', n_polls = n_polls + 1, ended_at = $2, n_succeeded = $3,
                        n_errored = $4, n_expired = $5, n_canceled = $6, next_poll_at = NULL, last_error = NULL,
                        missing_since = NULL
                 WHERE id = $1 AND status = 'submitted'",
                batch_id,
                now,
                counts[0],
                counts[1],
                counts[2],
                counts[3]
            ))
            .await
        })
        .await?;
        Ok(())
    }

    /// Claims ended batches for result ingestion (a claim whose lease ran out is taken over).
    pub async fn claim_batches_to_ingest(
        self,
        worker: &str,
        now: DateTime<Utc>,
        lease: Duration,
        limit: i64,
    ) -> Result<Vec<BatchRow>> {
        let lock = self.skip_locked();
        let sql = format!(
            "UPDATE batches SET claimed_by = $2, claimed_until = $3
             WHERE id IN (SELECT id FROM batches WHERE status = 'ended' AND (claimed_until IS NULL OR claimed_until <= $1)
                          ORDER BY ended_at, id LIMIT $4 {lock})
             RETURNING {BATCH_COLUMNS}"
        );
        self.write(async |tx| tx.fetch_all(sql!(&sql, now, worker, now + lease, limit)).await)
            .await
    }

    /// Extends `worker`'s claim on a batch whose results it is still reading; `false` when the
    /// claim is no longer its own (another worker took the batch after the claim lapsed).
    pub async fn renew_ingest_claim(self, batch_id: BatchId, worker: &str, until: DateTime<Utc>) -> Result<bool> {
        let renewed = self
            .write(async |tx| {
                tx.execute(sql!(
                    "UPDATE batches SET claimed_until = $3 WHERE id = $1 AND claimed_by = $2 AND status = 'ended'",
                    batch_id,
                    worker,
                    until
                ))
                .await
            })
            .await?;
        Ok(renewed == 1)
    }

    /// Records ingestion progress: result lines fanned out so far.
    pub async fn advance_ingest_cursor(self, batch_id: BatchId, cursor: i64) -> Result<()> {
        self.write(async |tx| {
            tx.execute(sql!(
                "UPDATE batches SET ingest_cursor = $2 WHERE id = $1",
                batch_id,
                cursor
            ))
            .await
        })
        .await?;
        Ok(())
    }

    /// Every line was read: requests that had no result line are `errored` (so they are
    /// re-planned), and the batch is `ingested`. Returns how many had no line.
    pub async fn finish_ingest(self, batch_id: BatchId, now: DateTime<Utc>) -> Result<u64> {
        self.write(async |tx| {
            let missing = tx
                .execute(sql!(
                    "UPDATE llm_requests SET status = 'errored', error = 'no result line for this request', completed_at = $2
                     WHERE batch_id = $1 AND status = 'submitted'",
                    batch_id,
                    now
                ))
                .await?;
            tx.execute(sql!(
                "UPDATE batches SET status = 'ingested', claimed_by = NULL, claimed_until = NULL WHERE id = $1",
                batch_id
            ))
            .await?;
            Ok(missing)
        })
        .await
    }

    /// A results download could not be used (unreadable, cut short, stalled, more or fewer lines
    /// than the provider counts): counted against the batch, never its requests, and the batch is
    /// left alone until `retry_at`. Returns the failures so far, this one included.
    pub async fn note_download_failure(self, batch_id: BatchId, reason: &str, retry_at: DateTime<Utc>) -> Result<i64> {
        self.write(async |tx| {
            tx.scalar_one(sql!(
                "UPDATE batches SET download_failures = download_failures + 1, last_error = $2, claimed_by = NULL,
                        claimed_until = $3
                 WHERE id = $1 RETURNING download_failures",
                batch_id,
                reason,
                retry_at
            ))
            .await
        })
        .await
    }

    /// The provider answered 404 for the batch (a poll) or its results (a download): remembers
    /// since when it is missing (since its submission when no poll has found it yet: a batch the
    /// provider never knew is missing from the start), notes why, and looks again at `next_at`, or
    /// at the end of the grace when that comes first, so a lost batch is given up when its grace
    /// ends rather than at the poll after. Returns since when it is missing.
    pub async fn note_batch_missing(
        self,
        batch_id: BatchId,
        reason: &str,
        now: DateTime<Utc>,
        next_at: DateTime<Utc>,
        grace: Duration,
    ) -> Result<DateTime<Utc>> {
        self.write(async |tx| {
            let since: DateTime<Utc> = tx
                .scalar_one(sql!(
                    "UPDATE batches SET missing_since = COALESCE(missing_since,
                            CASE WHEN status = 'submitted' AND n_polls = 0 THEN COALESCE(submitted_at, $2) ELSE $2 END),
                        last_error = $3,
                        n_polls = CASE WHEN status = 'submitted' THEN n_polls + 1 ELSE n_polls END,
                        claimed_by = NULL
                     WHERE id = $1 RETURNING missing_since",
                    batch_id,
                    now,
                    reason
                ))
                .await?;
            let next_at = next_at.min(since + grace).max(now);
            tx.execute(sql!(
                "UPDATE batches SET
                        next_poll_at = CASE WHEN status = 'submitted' THEN $2 ELSE next_poll_at END,
                        claimed_until = CASE WHEN status = 'ended' THEN $2 ELSE claimed_until END
                 WHERE id = $1",
                batch_id,
                next_at
            ))
            .await?;
            Ok(since)
        })
        .await
    }

    /// The batch will not give more: it ends `failed` with `reason`, the answers already recorded
    /// stay, and every request still waiting on it goes back to `planned` under its id with no
    /// attempt spent (its segment is not at fault), its loss counted (`batch_losses`).
    pub async fn give_up_batch(self, batch_id: BatchId, reason: &str, now: DateTime<Utc>) -> Result<GivenUp> {
        self.write(async |tx| {
            fail_batch(tx, batch_id, reason, now).await?;
            let most_losses: Option<i64> = tx
                .scalar_one(sql!(
                    "SELECT MAX(batch_losses) + 1 FROM llm_requests WHERE batch_id = $1 AND status = 'submitted'",
                    batch_id
                ))
                .await?;
            tx.execute(sql!(
                "UPDATE llm_requests SET batch_losses = batch_losses + 1 WHERE batch_id = $1 AND status = 'submitted'",
                batch_id
            ))
            .await?;
            let n_replanned = submitted_back_to_planned(tx, batch_id, None).await?;
            Ok(GivenUp {
                n_replanned,
                most_losses: most_losses.unwrap_or(0),
            })
        })
        .await
    }

    /// Batches, newest first (admin listing).
    pub async fn list_batches(self, status: Option<&str>, limit: Option<i64>) -> Result<Vec<BatchRow>> {
        let sql = format!(
            "SELECT {BATCH_COLUMNS} FROM batches WHERE ($1 IS NULL OR status = $1) ORDER BY created_at DESC, id DESC LIMIT $2"
        );
        self.read_all(sql!(&sql, status, limit.unwrap_or(i64::MAX))).await
    }

    /// The batches that carried any request of a user (external id), oldest first: what an
    /// erasure must clean up at the provider.
    pub async fn batches_of_user(self, user_external_id: &str) -> Result<Vec<BatchRow>> {
        let sql = format!(
            "SELECT {BATCH_COLUMNS} FROM batches WHERE id IN (
                 SELECT r.batch_id FROM llm_requests r JOIN users u ON u.id = r.user_id
                 WHERE u.external_id = $1 AND r.batch_id IS NOT NULL)
             ORDER BY created_at, id"
        );
        self.read_all(sql!(&sql, user_external_id)).await
    }

    /// One batch by our id.
    pub async fn batch(self, batch_id: BatchId) -> Result<Option<BatchRow>> {
        let sql = format!("SELECT {BATCH_COLUMNS} FROM batches WHERE id = $1");
        self.read_optional(sql!(&sql, batch_id)).await
    }

    /// Whether what the provider keeps of this batch is to be deleted now that it is ingested (one
    /// of its users was erased while it was in flight).
    pub async fn provider_deletion_pending(self, batch_id: BatchId) -> Result<bool> {
        let pending: Option<bool> = self
            .read_scalar_optional(sql!("SELECT delete_when_ingested FROM batches WHERE id = $1", batch_id))
            .await?;
        Ok(pending.unwrap_or(false))
    }

    /// The provider's copies of this batch were deleted.
    pub async fn clear_provider_deletion(self, batch_id: BatchId) -> Result<()> {
        self.write(async |tx| {
            tx.execute(sql!(
                "UPDATE batches SET delete_when_ingested = FALSE WHERE id = $1",
                batch_id
            ))
            .await?;
            Ok(())
        })
        .await
    }
}

/// What giving a batch up did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GivenUp {
    /// Requests that went back to `planned`.
    pub n_replanned: u64,
    /// The most batches any of them has now lost (0 when none was waiting).
    pub most_losses: i64,
}

/// Fails a batch with `reason`, whatever its requests then become.
async fn fail_batch(tx: &mut WriteTx, batch_id: BatchId, reason: &str, now: DateTime<Utc>) -> Result<u64> {
    tx.execute(sql!(
        "UPDATE batches SET status = 'failed', last_error = $2, ended_at = $3, claimed_by = NULL, claimed_until = NULL
         WHERE id = $1",
        batch_id,
        reason,
        now
    ))
    .await
}

/// A failed batch's submitted requests go back to `planned` under the same ids (no attempt
/// spent); for a planned batch-lane request `claimed_until` is the earliest time it may be packed.
async fn submitted_back_to_planned(
    tx: &mut WriteTx,
    batch_id: BatchId,
    not_before: Option<DateTime<Utc>>,
) -> Result<u64> {
    tx.execute(sql!(
        "UPDATE llm_requests SET status = 'planned', batch_id = NULL, submitted_at = NULL, claimed_until = $2
         WHERE batch_id = $1 AND status = 'submitted'",
        batch_id,
        not_before
    ))
    .await
}
