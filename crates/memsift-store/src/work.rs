//! Request and batch lifecycle: execution claims, outputs and failures, re-planning, and the
//! batch protocol's committed states (pack → submitting → submitted → ended → ingested).
//!
//! Every transition is one statement or one short transaction; no transaction is ever held
//! across a provider call. Intent is committed before effect (invariant 3): a batch is written
//! `submitting` with its requests assigned before the provider's create call is made.

use chrono::{DateTime, Duration, Utc};
use memsift_core::status::{Lane, Purpose, RequestStatus};
use memsift_core::{BatchId, RequestId, SegmentId, UserId};
use serde::Serialize;
use serde_json::Value;
use sqlx::types::Json;

use crate::tx::sql;
use crate::{Result, Store, StoreError, corrupt, on_pool};

/// A request attempt as an executor or the coordinator needs it.
#[derive(Clone, Debug, PartialEq)]
pub struct WorkRequest {
    /// Its id (the provider `custom_id`).
    pub id: RequestId,
    /// Purpose.
    pub purpose: Purpose,
    /// Whose data.
    pub user_id: UserId,
    /// Segment, for extraction.
    pub segment_id: Option<SegmentId>,
    /// Chunk of the segment.
    pub chunk_index: i64,
    /// Attempt number of this chunk.
    pub attempt: i64,
    /// Lane.
    pub lane: Lane,
    /// `{purpose}_{tier}`.
    pub config_key: String,
    /// Provider kind.
    pub provider: String,
    /// Model.
    pub model: Option<String>,
    /// Prompt version.
    pub prompt_version: String,
    /// What to send: `{"system": …, "user_message": …}`.
    pub request_body: Value,
}

#[derive(sqlx::FromRow)]
struct WorkRow {
    id: String,
    purpose: String,
    user_id: String,
    segment_id: Option<String>,
    chunk_index: i64,
    attempt: i64,
    lane: String,
    config_key: String,
    provider: String,
    model: Option<String>,
    prompt_version: String,
    request_body: Option<Json<Value>>,
}

const WORK_COLUMNS: &str = "id, purpose, user_id, segment_id, chunk_index, attempt, lane, config_key, provider, model, prompt_version, request_body";

impl TryFrom<WorkRow> for WorkRequest {
    type Error = StoreError;
    fn try_from(row: WorkRow) -> Result<WorkRequest> {
        let bad = |error: &dyn std::fmt::Display| corrupt("llm_requests", error);
        Ok(WorkRequest {
            id: RequestId::parse(&row.id).map_err(|error| bad(&error))?,
            purpose: Purpose::parse(&row.purpose).map_err(|error| bad(&error))?,
            user_id: UserId::parse(&row.user_id).map_err(|error| bad(&error))?,
            segment_id: row
                .segment_id
                .map(|id| SegmentId::parse(&id))
                .transpose()
                .map_err(|error| bad(&error))?,
            chunk_index: row.chunk_index,
            attempt: row.attempt,
            lane: Lane::parse(&row.lane).map_err(|error| bad(&error))?,
            config_key: row.config_key,
            provider: row.provider,
            model: row.model,
            prompt_version: row.prompt_version,
            request_body: row.request_body.map(|Json(body)| body).unwrap_or(Value::Null),
        })
    }
}

/// Token usage and cost of one answered request.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct RequestUsage {
    /// Uncached input tokens.
    pub input_tokens: i64,
    /// Output tokens.
    pub output_tokens: i64,
    /// Input tokens written to the prompt cache.
    pub cache_creation_tokens: i64,
    /// Input tokens read from the prompt cache.
    pub cache_read_tokens: i64,
    /// USD.
    pub cost_usd: f64,
}

/// A planned batch-lane request and when it was planned (packing waits for the oldest).
#[derive(sqlx::FromRow)]
struct PackRow {
    #[sqlx(flatten)]
    work: WorkRow,
    created_at: DateTime<Utc>,
}

/// What [`Store::record_apply_failure`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum ApplyFailure {
    /// The answer stays `succeeded`; a later step tries again.
    WillRetry {
        /// Failed applies so far.
        attempts: i64,
    },
    /// The request is now `failed` (quarantined), with the error.
    Quarantined {
        /// Failed applies in all.
        attempts: i64,
    },
    /// The request was not waiting to be applied (applied meanwhile, or not answered).
    NotPending,
}

#[derive(sqlx::FromRow)]
struct FailedAttempt {
    id: String,
    segment_id: Option<String>,
    attempt: i64,
    status: String,
    error: Option<String>,
}

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

/// What one re-planning pass did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ReplanReport {
    /// Failed attempts given a new attempt.
    pub n_replanned: u64,
    /// Requests out of attempts (their segments went `dead`).
    pub n_dead: u64,
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
}

const BATCH_COLUMNS: &str =
    "id, provider, provider_batch_id, purpose, config_key, status, n_requests, n_succeeded, n_errored,
    n_expired, n_canceled, created_at, submit_started_at, submitted_at, ended_at, provider_expires_at, next_poll_at,
    n_polls, ingest_cursor, reconcile_misses, last_error";

impl Store {
    /// Claims planned requests of the given lane for execution outside any transaction; a claim
    /// whose lease ran out (its worker died mid-call) is taken over, and a request held back
    /// until a not-before time waits for it.
    pub async fn claim_requests(
        &self,
        lane: Lane,
        worker: &str,
        now: DateTime<Utc>,
        lease: Duration,
        limit: i64,
    ) -> Result<Vec<WorkRequest>> {
        let lock = self.skip_locked();
        let sql = format!(
            "UPDATE llm_requests SET status = 'submitted', submitted_at = $2, claimed_by = $3, claimed_until = $4
             WHERE id IN (SELECT id FROM llm_requests
                          WHERE lane = $1 AND batch_id IS NULL
                            -- A planned request's `claimed_until` is its not-before time (a paused lane).
                            AND ((status = 'planned' AND (claimed_until IS NULL OR claimed_until <= $2))
                                 OR (status = 'submitted' AND claimed_until <= $2))
                          ORDER BY created_at, id LIMIT $5 {lock})
             RETURNING {WORK_COLUMNS}"
        );
        let rows: Vec<WorkRow> = on_pool!(self, |pool| {
            sqlx::query_as(&sql)
                .bind(lane.as_str())
                .bind(now)
                .bind(worker)
                .bind(now + lease)
                .bind(limit)
                .fetch_all(pool)
                .await?
        });
        rows.into_iter().map(WorkRequest::try_from).collect()
    }

    /// Records a provider's answer and its cost: the request becomes `succeeded` (raw output kept for replay).
    ///
    /// Only a request still waiting for output changes, so a result line read twice is a no-op;
    /// returns whether this call recorded it.
    pub async fn record_answer(
        &self,
        request_id: RequestId,
        raw_output: &str,
        stop_reason: Option<&str>,
        usage: &RequestUsage,
        now: DateTime<Utc>,
    ) -> Result<bool> {
        let updated = self
            .write(async |tx| {
                tx.execute(sql!(
                    "UPDATE llm_requests SET status = 'succeeded', raw_output = $2, stop_reason = $3, completed_at = $4,
                            input_tokens = $5, output_tokens = $6, cache_creation_tokens = $7, cache_read_tokens = $8,
                            cost_usd = $9, claimed_by = NULL, claimed_until = NULL
                     WHERE id = $1 AND status IN ('planned', 'submitted')",
                    request_id,
                    raw_output,
                    stop_reason,
                    now,
                    usage.input_tokens,
                    usage.output_tokens,
                    usage.cache_creation_tokens,
                    usage.cache_read_tokens,
                    usage.cost_usd
                ))
                .await
            })
            .await?;
        Ok(updated == 1)
    }

    /// Records a failed attempt (`errored`, `expired`, `canceled`, or `dead` when retrying cannot help).
    pub async fn record_failure(
        &self,
        request_id: RequestId,
        status: RequestStatus,
        error: &str,
        now: DateTime<Utc>,
    ) -> Result<bool> {
        let updated = self
            .write(async |tx| {
                tx.execute(sql!(
                    "UPDATE llm_requests SET status = $2, error = $3, completed_at = $4, claimed_by = NULL, claimed_until = NULL
                     WHERE id = $1 AND status IN ('planned', 'submitted')",
                    request_id,
                    status.as_str(),
                    error,
                    now
                ))
                .await
            })
            .await?;
        Ok(updated == 1)
    }

    /// Requests answered but not yet applied (a crash between recording and applying leaves
    /// these, and so does an apply that failed). Answers whose applies failed fewer times come
    /// first, so answers that keep failing (until they are quarantined) never starve the rest.
    pub async fn unapplied_answers(&self, limit: i64) -> Result<Vec<RequestId>> {
        let ids: Vec<String> = on_pool!(self, |pool| {
            sqlx::query_scalar(
                "SELECT id FROM llm_requests WHERE status = 'succeeded'
                 ORDER BY apply_attempts, completed_at, id LIMIT $1",
            )
            .bind(limit)
            .fetch_all(pool)
            .await?
        });
        ids.iter()
            .map(|id| RequestId::parse(id).map_err(|error| corrupt("llm_requests", error)))
            .collect()
    }

    /// Records that applying `request_id`'s answer failed with `error`. Below `max_apply_attempts`
    /// failures the answer stays `succeeded` for the next step; at it, the request is quarantined
    /// as `failed` with the error (and an extraction request's segment goes `dead` with the
    /// reason, for an admin to retry), so one bad answer never holds up the others.
    pub async fn record_apply_failure(
        &self,
        request_id: RequestId,
        error: &str,
        max_apply_attempts: i64,
        now: DateTime<Utc>,
    ) -> Result<ApplyFailure> {
        let error = format!("applying the answer failed: {error}");
        self.write(async |tx| {
            let row: Option<(i64, String, Option<String>)> = tx
                .fetch_optional(sql!(
                    "UPDATE llm_requests SET apply_attempts = apply_attempts + 1, error = $2,
                            status = CASE WHEN apply_attempts + 1 >= $3 THEN 'failed' ELSE status END,
                            applied_at = CASE WHEN apply_attempts + 1 >= $3 THEN $4 ELSE applied_at END
                     WHERE id = $1 AND status = 'succeeded'
                     RETURNING apply_attempts, status, segment_id",
                    request_id,
                    &error,
                    max_apply_attempts.max(1),
                    now
                ))
                .await?;
            let Some((attempts, status, segment_id)) = row else {
                return Ok(ApplyFailure::NotPending);
            };
            if status != RequestStatus::Failed.as_str() {
                return Ok(ApplyFailure::WillRetry { attempts });
            }
            if let Some(segment_id) = segment_id {
                tx.execute(sql!(
                    "UPDATE segments SET status = 'dead', claimed_by = NULL, claimed_until = NULL,
                            last_error = $2
                     WHERE id = $1 AND status <> 'extracted'",
                    &segment_id,
                    format!("request {request_id} quarantined after {attempts} failed applies: {error}")
                ))
                .await?;
            }
            Ok(ApplyFailure::Quarantined { attempts })
        })
        .await
    }

    /// Gives every failed attempt (`errored`, `expired`, `canceled`) without a successor a new
    /// attempt with a new id, up to `max_attempts`; past it, the request and its segment go `dead`.
    pub async fn replan_failed_requests(&self, max_attempts: i64, now: DateTime<Utc>) -> Result<ReplanReport> {
        let mut report = ReplanReport::default();
        self.write(async |tx| {
            let failed: Vec<FailedAttempt> = tx
                .fetch_all(sql!(
                    "SELECT r.id, r.segment_id, r.attempt, r.status, r.error FROM llm_requests r
                     WHERE r.status IN ('errored', 'expired', 'canceled')
                       AND NOT EXISTS (SELECT 1 FROM llm_requests later
                                       WHERE later.purpose = r.purpose AND later.user_id = r.user_id
                                         AND later.chunk_index = r.chunk_index AND later.attempt > r.attempt
                                         AND (later.segment_id = r.segment_id
                                              -- Post-processing requests have no segment: their subject names the work.
                                              OR (r.segment_id IS NULL AND later.segment_id IS NULL AND later.subject = r.subject)))
                     ORDER BY r.completed_at, r.id"
                ))
                .await?;
            for FailedAttempt {
                id,
                segment_id,
                attempt,
                status,
                error,
            } in failed
            {
                if attempt < max_attempts {
                    tx.execute(sql!(
                        "INSERT INTO llm_requests (id, purpose, user_id, segment_id, chunk_index, subject, lane, config_key,
                                                   provider, model, prompt_version, context, request_body, status, attempt,
                                                   created_at, parent_request_id)
                         SELECT $2, purpose, user_id, segment_id, chunk_index, subject, lane, config_key, provider, model,
                                prompt_version, context, request_body, 'planned', attempt + 1, $3, parent_request_id
                         FROM llm_requests WHERE id = $1",
                        &id,
                        RequestId::new_v7(),
                        now
                    ))
                    .await?;
                    report.n_replanned += 1;
                } else {
                    let reason = format!(
                        "request {id} {status} on attempt {attempt} of {max_attempts}: {}",
                        error.as_deref().unwrap_or("no detail")
                    );
                    tx.execute(sql!("UPDATE llm_requests SET status = 'dead' WHERE id = $1", &id))
                        .await?;
                    if let Some(segment_id) = segment_id {
                        tx.execute(sql!(
                            "UPDATE segments SET status = 'dead', last_error = $2, claimed_by = NULL, claimed_until = NULL
                             WHERE id = $1 AND status <> 'extracted'",
                            &segment_id,
                            &reason
                        ))
                        .await?;
                    }
                    report.n_dead += 1;
                }
            }
            Ok(())
        })
        .await?;
        Ok(report)
    }

    /// The (provider, config key) groups that have planned batch-lane requests.
    pub async fn planned_batch_groups(&self) -> Result<Vec<(String, String)>> {
        Ok(on_pool!(self, |pool| {
            sqlx::query_as(
                "SELECT DISTINCT provider, config_key FROM llm_requests
                 WHERE lane = 'batch' AND status = 'planned' AND batch_id IS NULL ORDER BY provider, config_key",
            )
            .fetch_all(pool)
            .await?
        }))
    }

    /// Packs planned batch-lane requests of one group into a batch committed in `submitting`
    /// (the write-ahead intent), when there are `max_requests` of them or the oldest has waited
    /// `max_wait`. Returns `None` when it is not time yet.
    pub async fn pack_batch(
        &self,
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
    pub async fn batch_requests(&self, batch_id: BatchId) -> Result<Vec<WorkRequest>> {
        let sql = format!("SELECT {WORK_COLUMNS} FROM llm_requests WHERE batch_id = $1 ORDER BY created_at, id");
        let rows: Vec<WorkRow> = on_pool!(self, |pool| sqlx::query_as(&sql)
            .bind(batch_id.to_string())
            .fetch_all(pool)
            .await?);
        rows.into_iter().map(WorkRequest::try_from).collect()
    }

    /// The provider accepted the batch: record its id and schedule the first poll.
    pub async fn mark_batch_submitted(
        &self,
        batch_id: BatchId,
        provider_batch_id: &str,
        provider_expires_at: Option<DateTime<Utc>>,
        next_poll_at: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Result<bool> {
        let updated = on_pool!(self, |pool| {
            sqlx::query(
                "UPDATE batches SET status = 'submitted', provider_batch_id = $2, provider_expires_at = $3,
                        next_poll_at = $4, submitted_at = $5, claimed_by = NULL, claimed_until = NULL, last_error = NULL
                 WHERE id = $1 AND status = 'submitting'",
            )
            .bind(batch_id.to_string())
            .bind(provider_batch_id)
            .bind(provider_expires_at)
            .bind(next_poll_at)
            .bind(now)
            .execute(pool)
            .await?
            .rows_affected()
        });
        Ok(updated == 1)
    }

    /// The provider definitely refused the batch: it failed, and its requests are `errored` so
    /// re-planning counts their attempts.
    pub async fn mark_batch_rejected(&self, batch_id: BatchId, error: &str, now: DateTime<Utc>) -> Result<()> {
        self.write(async |tx| {
            tx.execute(sql!(
                "UPDATE batches SET status = 'failed', last_error = $2, ended_at = $3, claimed_by = NULL, claimed_until = NULL
                 WHERE id = $1",
                batch_id,
                error,
                now
            ))
            .await?;
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

    /// Records that the create call's outcome is unknown; the row stays `submitting` for the reconciler.
    pub async fn note_batch_outcome_unknown(&self, batch_id: BatchId, error: &str) -> Result<()> {
        self.write(async |tx| {
            tx.execute(sql!(
                "UPDATE batches SET last_error = $2, claimed_by = NULL, claimed_until = NULL WHERE id = $1",
                batch_id,
                error
            ))
            .await
        })
        .await?;
        Ok(())
    }

    /// Batches left in `submitting` for longer than `grace` (a crash or an unknown create outcome).
    pub async fn batches_to_reconcile(&self, now: DateTime<Utc>, grace: Duration) -> Result<Vec<BatchRow>> {
        let sql = format!(
            "SELECT {BATCH_COLUMNS} FROM batches
             WHERE status = 'submitting' AND submit_started_at <= $1 AND (claimed_until IS NULL OR claimed_until <= $2)
             ORDER BY submit_started_at, id"
        );
        Ok(on_pool!(self, |pool| sqlx::query_as(&sql)
            .bind(now - grace)
            .bind(now)
            .fetch_all(pool)
            .await?))
    }

    /// The reconciler found no provider batch this pass; returns the number of misses so far.
    pub async fn note_reconcile_miss(&self, batch_id: BatchId, now: DateTime<Utc>, grace: Duration) -> Result<i64> {
        Ok(on_pool!(self, |pool| {
            sqlx::query_scalar(
                "UPDATE batches SET reconcile_misses = reconcile_misses + 1, claimed_until = $2,
                        last_error = 'no provider batch found yet'
                 WHERE id = $1 RETURNING reconcile_misses",
            )
            .bind(batch_id.to_string())
            .bind(now + grace)
            .fetch_one(pool)
            .await?
        }))
    }

    /// Proven never created (or refused for now): the batch fails and its requests go back to
    /// `planned` (same ids, no attempt used), packable again from `not_before` when given.
    pub async fn replan_batch(
        &self,
        batch_id: BatchId,
        reason: &str,
        now: DateTime<Utc>,
        not_before: Option<DateTime<Utc>>,
    ) -> Result<()> {
        self.write(async |tx| {
            tx.execute(sql!(
                "UPDATE batches SET status = 'failed', last_error = $2, ended_at = $3, claimed_by = NULL, claimed_until = NULL
                 WHERE id = $1",
                batch_id,
                reason,
                now
            ))
            .await?;
            // For a planned batch-lane request, `claimed_until` is the earliest time it may be packed.
            tx.execute(sql!(
                "UPDATE llm_requests SET status = 'planned', batch_id = NULL, submitted_at = NULL, claimed_until = $2
                 WHERE batch_id = $1 AND status = 'submitted'",
                batch_id,
                not_before
            ))
            .await?;
            Ok(())
        })
        .await
    }

    /// Provider batch ids we already track (so the reconciler never adopts one twice).
    pub async fn known_provider_batch_ids(&self, provider: &str) -> Result<Vec<String>> {
        Ok(on_pool!(self, |pool| {
            sqlx::query_scalar(
                "SELECT provider_batch_id FROM batches WHERE provider = $1 AND provider_batch_id IS NOT NULL",
            )
            .bind(provider)
            .fetch_all(pool)
            .await?
        }))
    }

    /// Claims submitted batches whose poll is due; the claim pushes `next_poll_at` out by `lease`
    /// so another daemon does not poll the same batch meanwhile.
    pub async fn claim_batches_to_poll(
        &self,
        now: DateTime<Utc>,
        lease: Duration,
        limit: i64,
    ) -> Result<Vec<BatchRow>> {
        let lock = self.skip_locked();
        let sql = format!(
            "UPDATE batches SET next_poll_at = $2
             WHERE id IN (SELECT id FROM batches WHERE status = 'submitted' AND next_poll_at <= $1
                          ORDER BY next_poll_at, id LIMIT $3 {lock})
             RETURNING {BATCH_COLUMNS}"
        );
        Ok(on_pool!(self, |pool| sqlx::query_as(&sql)
            .bind(now)
            .bind(now + lease)
            .bind(limit)
            .fetch_all(pool)
            .await?))
    }

    /// Not finished yet: count the poll and sleep until `next_poll_at` (a snooze, never an attempt).
    pub async fn snooze_batch(&self, batch_id: BatchId, next_poll_at: DateTime<Utc>, note: Option<&str>) -> Result<()> {
        self.write(async |tx| {
            tx.execute(sql!(
                "UPDATE batches SET n_polls = n_polls + 1, next_poll_at = $2, last_error = $3 WHERE id = $1",
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
    pub async fn mark_batch_ended(&self, batch_id: BatchId, counts: [i64; 4], now: DateTime<Utc>) -> Result<()> {
        on_pool!(self, |pool| {
            sqlx::query(
                "UPDATE batches SET status = 'ended', n_polls = n_polls + 1, ended_at = $2, n_succeeded = $3,
                        n_errored = $4, n_expired = $5, n_canceled = $6, next_poll_at = NULL, last_error = NULL
                 WHERE id = $1 AND status = 'submitted'",
            )
            .bind(batch_id.to_string())
            .bind(now)
            .bind(counts[0])
            .bind(counts[1])
            .bind(counts[2])
            .bind(counts[3])
            .execute(pool)
            .await?;
        });
        Ok(())
    }

    /// Claims ended batches for result ingestion (a claim whose lease ran out is taken over).
    pub async fn claim_batches_to_ingest(
        &self,
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
        Ok(on_pool!(self, |pool| {
            sqlx::query_as(&sql)
                .bind(now)
                .bind(worker)
                .bind(now + lease)
                .bind(limit)
                .fetch_all(pool)
                .await?
        }))
    }

    /// Records ingestion progress: result lines fanned out so far.
    pub async fn advance_ingest_cursor(&self, batch_id: BatchId, cursor: i64) -> Result<()> {
        on_pool!(self, |pool| {
            sqlx::query("UPDATE batches SET ingest_cursor = $2 WHERE id = $1")
                .bind(batch_id.to_string())
                .bind(cursor)
                .execute(pool)
                .await?;
        });
        Ok(())
    }

    /// Every line was read: requests that had no result line are `errored` (so they are
    /// re-planned), and the batch is `ingested`. Returns how many had no line.
    pub async fn finish_ingest(&self, batch_id: BatchId, now: DateTime<Utc>) -> Result<u64> {
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

    /// Batches, newest first (admin listing).
    pub async fn list_batches(&self, status: Option<&str>, limit: Option<i64>) -> Result<Vec<BatchRow>> {
        let sql = format!(
            "SELECT {BATCH_COLUMNS} FROM batches WHERE ($1 IS NULL OR status = $1) ORDER BY created_at DESC, id DESC LIMIT $2"
        );
        Ok(on_pool!(self, |pool| sqlx::query_as(&sql)
            .bind(status)
            .bind(limit.unwrap_or(i64::MAX))
            .fetch_all(pool)
            .await?))
    }

    /// The batches that carried any request of a user (external id), oldest first: what an
    /// erasure must clean up at the provider.
    pub async fn batches_of_user(&self, user_external_id: &str) -> Result<Vec<BatchRow>> {
        let sql = format!(
            "SELECT {BATCH_COLUMNS} FROM batches WHERE id IN (
                 SELECT r.batch_id FROM llm_requests r JOIN users u ON u.id = r.user_id
                 WHERE u.external_id = $1 AND r.batch_id IS NOT NULL)
             ORDER BY created_at, id"
        );
        Ok(on_pool!(self, |pool| sqlx::query_as(&sql)
            .bind(user_external_id)
            .fetch_all(pool)
            .await?))
    }

    /// One batch by our id.
    pub async fn batch(&self, batch_id: BatchId) -> Result<Option<BatchRow>> {
        let sql = format!("SELECT {BATCH_COLUMNS} FROM batches WHERE id = $1");
        Ok(on_pool!(self, |pool| sqlx::query_as(&sql)
            .bind(batch_id.to_string())
            .fetch_optional(pool)
            .await?))
    }
}

type Due = Option<DateTime<Utc>>;

/// What `next_due_work` reads: the earliest time of each kind of waiting work.
struct DueInputs {
    poll: Due,
    ingest_lease: Due,
    retry: Due,
    request_lease: Due,
    /// (created, not before) of planned batch requests.
    oldest_planned: Vec<(Due, Due)>,
    /// (submit started, claimed until) of `submitting` batches.
    submitting: Vec<(Due, Due)>,
}

impl Store {
    /// The earliest time at which waiting work becomes due: a batch poll, a batch waiting to be
    /// packed or reconciled, a claim lease running out, a failed segment's retry. `None`: no work
    /// is waiting (open segments are not counted: they wait for their conversation, not for us).
    pub async fn next_due_work(
        &self,
        pack_max_wait: Duration,
        reconcile_grace: Duration,
    ) -> Result<Option<DateTime<Utc>>> {
        let DueInputs {
            poll,
            ingest_lease,
            retry,
            request_lease,
            oldest_planned,
            submitting,
        } = on_pool!(self, |pool| {
            let poll = sqlx::query_scalar("SELECT MIN(next_poll_at) FROM batches WHERE status = 'submitted'")
                .fetch_one(pool)
                .await?;
            let ingest_lease = sqlx::query_scalar("SELECT MIN(claimed_until) FROM batches WHERE status = 'ended'")
                .fetch_one(pool)
                .await?;
            let retry = sqlx::query_scalar("SELECT MIN(next_attempt_at) FROM segments WHERE status = 'failed'")
                .fetch_one(pool)
                .await?;
            let request_lease = sqlx::query_scalar(
                "SELECT MIN(claimed_until) FROM llm_requests WHERE status = 'submitted' AND batch_id IS NULL",
            )
            .fetch_one(pool)
            .await?;
            let waiting: Option<DateTime<Utc>> = sqlx::query_scalar(
                "SELECT MIN(created_at) FROM llm_requests
                 WHERE status = 'planned' AND lane = 'batch' AND claimed_until IS NULL",
            )
            .fetch_one(pool)
            .await?;
            let mut oldest_planned: Vec<(Due, Due)> = sqlx::query_as(
                "SELECT created_at, claimed_until FROM llm_requests
                 WHERE status = 'planned' AND lane = 'batch' AND claimed_until IS NOT NULL",
            )
            .fetch_all(pool)
            .await?;
            oldest_planned.push((waiting, None));
            let submitting =
                sqlx::query_as("SELECT submit_started_at, claimed_until FROM batches WHERE status = 'submitting'")
                    .fetch_all(pool)
                    .await?;
            DueInputs {
                poll,
                ingest_lease,
                retry,
                request_lease,
                oldest_planned,
                submitting,
            }
        });
        // A `submitting` batch is reconciled once its grace period has passed and its
        // submitter's claim has run out, whichever is later.
        let reconcile = submitting
            .into_iter()
            .filter_map(|(started, claimed_until)| {
                let after_grace = started? + reconcile_grace;
                Some(claimed_until.map_or(after_grace, |until| until.max(after_grace)))
            })
            .min();
        // A planned batch request is packable once it has waited `pack_max_wait` and any
        // not-before time (set after a create refused for now) has passed, whichever is later.
        let pack = oldest_planned
            .into_iter()
            .filter_map(|(created, not_before)| {
                let waited = created? + pack_max_wait;
                Some(not_before.map_or(waited, |not_before| not_before.max(waited)))
            })
            .min();
        Ok([poll, ingest_lease, retry, request_lease, pack, reconcile]
            .into_iter()
            .flatten()
            .min())
    }
}
