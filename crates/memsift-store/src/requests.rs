//! Request attempts: planning them, claiming them for a lane, recording answers and failures,
//! quarantining answers that cannot be applied, and re-planning failed attempts.
//!
//! Every transition is one statement or one short transaction; no transaction is held across a
//! provider call. A request's id is the provider `custom_id`, so a result recorded twice is a no-op.

use chrono::{DateTime, Duration, Utc};
use memsift_core::request::{RequestBody, RequestContext, RequestSubject};
use memsift_core::status::{Lane, Purpose, RequestStatus};
use memsift_core::{RequestId, SegmentId, UserId};
use serde::Serialize;
use serde_json::Value;
use sqlx::types::Json;

use crate::handles::Requests;
use crate::tx::{Arg, WriteTx, sql};
use crate::{Result, StoreError, corrupt, from_json};

/// A request attempt to record.
#[derive(Clone, Debug)]
pub struct NewRequest {
    /// Its id; also the provider `custom_id`.
    pub id: RequestId,
    /// What it is for.
    pub purpose: Purpose,
    /// Whose data it carries.
    pub user_id: UserId,
    /// The segment, for extraction.
    pub segment_id: Option<SegmentId>,
    /// Which chunk of the segment.
    pub chunk_index: i64,
    /// The lane it goes through.
    pub lane: Lane,
    /// The `{purpose}_{tier}` key that configured it.
    pub config_key: String,
    /// Provider kind (`heuristic`, `anthropic`, …).
    pub provider: String,
    /// Model name.
    pub model: Option<String>,
    /// Prompt (or rule set) version.
    pub prompt_version: String,
    /// The context snapshot the processor needs later: short ids, memory texts, turn labels.
    pub context: RequestContext,
    /// What to send (kept so the batch lane can submit later; erasure removes it).
    pub request_body: RequestBody,
    /// What a post-processing request is about (memory, cluster, entity ids and its run); `{}`
    /// for extraction, whose segment and chunk say it.
    pub subject: RequestSubject,
    /// The request whose answer planned this one (a consolidation review names its proposal).
    pub parent_request_id: Option<RequestId>,
    /// Its estimated cost (USD), held against the user's daily budget until it is answered.
    pub reserved_usd: f64,
    /// The most output it may produce (the `max_tokens` it is sent with), when that is less than
    /// its config's: the learned allowance its reservation prices (see the engine's `budget.rs`).
    pub max_output_tokens: Option<u32>,
}

/// A request's stored output and the snapshot needed to process it.
#[derive(Clone, Debug)]
pub struct StoredOutput {
    /// The request.
    pub request_id: RequestId,
    /// Its user.
    pub user_id: UserId,
    /// Its segment, for extraction.
    pub segment_id: Option<SegmentId>,
    /// Which chunk of the segment.
    pub chunk_index: i64,
    /// Its status.
    pub status: RequestStatus,
    /// Prompt version.
    pub prompt_version: String,
    /// Model.
    pub model: Option<String>,
    /// Raw text, when an output was recorded.
    pub raw_output: Option<String>,
    /// Stop reason as the provider reported it.
    pub stop_reason: Option<String>,
    /// The context snapshot.
    pub context: RequestContext,
    /// What it is for.
    pub purpose: Purpose,
    /// What a post-processing request is about.
    pub subject: RequestSubject,
}

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
    /// What to send.
    pub request_body: RequestBody,
    /// The most output it may produce, when less than its config's `max_tokens`.
    pub max_output_tokens: Option<u32>,
}

#[derive(sqlx::FromRow)]
pub(crate) struct WorkRow {
    pub(crate) id: String,
    pub(crate) purpose: String,
    pub(crate) user_id: String,
    pub(crate) segment_id: Option<String>,
    pub(crate) chunk_index: i64,
    pub(crate) attempt: i64,
    pub(crate) lane: String,
    pub(crate) config_key: String,
    pub(crate) provider: String,
    pub(crate) model: Option<String>,
    pub(crate) prompt_version: String,
    pub(crate) request_body: Option<Json<Value>>,
    pub(crate) max_output_tokens: Option<i64>,
}

pub(crate) const WORK_COLUMNS: &str = "id, purpose, user_id, segment_id, chunk_index, attempt, lane, config_key, provider, model, prompt_version, request_body, max_output_tokens";

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

#[derive(sqlx::FromRow)]
struct FailedAttempt {
    id: String,
    segment_id: Option<String>,
    /// Attempts of this piece of work so far: of its chunk, or of its continuation of a cut answer
    /// (which continues its chunk's attempt numbers but has attempts of its own).
    tries: i64,
    status: String,
    error: Option<String>,
}

/// What one re-planning pass did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ReplanReport {
    /// Failed attempts given a new attempt.
    pub n_replanned: u64,
    /// Requests out of attempts (their segments went `dead`).
    pub n_dead: u64,
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

type Due = Option<DateTime<Utc>>;

/// The note a batch carries while its create outcome is unknown; kept through reconcile misses so
/// the last miss knows whether the create was ever called (and, here, when it is due).
pub(crate) const CREATE_UNKNOWN: &str = "create outcome unknown: ";

/// Whether a `submitting` batch's note says its create was called and answered without an outcome.
pub(crate) fn create_outcome_unknown(last_error: Option<&str>) -> bool {
    last_error.is_some_and(|note| note.starts_with(CREATE_UNKNOWN))
}

/// What `next_due_work` reads: the earliest time of each kind of waiting work.
struct DueInputs {
    poll: Due,
    ingest_lease: Due,
    retry: Due,
    /// (claimed until, lane, config key) of requests whose call is in flight or held back.
    request_leases: Vec<(Due, String, String)>,
    /// (created, not before, config key) of planned batch requests.
    oldest_planned: Vec<(Due, Due, String)>,
    /// (submit started, claimed until, last error) of `submitting` batches.
    submitting: Vec<(Due, Due, Option<String>)>,
}

impl WriteTx {
    /// Inserts one `planned` request row. A request with a segment continues that chunk's attempt
    /// numbers (so re-planning never makes two live twins); one without starts at 1. A request of
    /// an erased user is not inserted (its body holds their text, read before the erasure): the
    /// user's lock is taken first, as every write of a user's data does (see `users.rs`).
    pub(crate) async fn insert_planned_request(&mut self, request: &NewRequest, now: DateTime<Utc>) -> Result<bool> {
        if !self.lock_live_user(request.user_id).await? {
            return Ok(false);
        }
        self.insert_request_of_locked_user(request, now).await?;
        Ok(true)
    }

    /// [`WriteTx::insert_planned_request`] in a transaction that already holds the request's
    /// user's lock and found the user live (one lock a plan, not one a chunk).
    pub(crate) async fn insert_request_of_locked_user(
        &mut self,
        request: &NewRequest,
        now: DateTime<Utc>,
    ) -> Result<()> {
        self.execute(sql!(
            "INSERT INTO llm_requests (id, purpose, user_id, segment_id, chunk_index, attempt, lane, config_key,
                                       provider, model, prompt_version, context, request_body, status, created_at,
                                       subject, parent_request_id, reserved_usd, run_id, subject_entity_id,
                                       max_output_tokens)
             VALUES ($1, $2, $3, $4, $5,
                     (SELECT COALESCE(MAX(attempt), 0) + 1 FROM llm_requests
                      WHERE purpose = $2 AND segment_id = $4 AND chunk_index = $5),
                     $6, $7, $8, $9, $10, $11, $12, 'planned', $13, $14, $15, $16, $17, $18, $19)",
            request.id,
            request.purpose.as_str(),
            request.user_id,
            request.segment_id,
            request.chunk_index,
            request.lane.as_str(),
            &request.config_key,
            &request.provider,
            &request.model,
            &request.prompt_version,
            Arg::json(&request.context),
            Arg::json(&request.request_body),
            now,
            Arg::json(&request.subject),
            request.parent_request_id,
            request.reserved_usd,
            &request.subject.run,
            &request.subject.entity_id,
            request.max_output_tokens.map(i64::from)
        ))
        .await?;
        Ok(())
    }
}

impl Requests<'_> {
    /// Loads what the apply path needs for one request.
    pub async fn stored_output(self, request_id: RequestId) -> Result<StoredOutput> {
        type Row = (
            String,
            Option<String>,
            String,
            String,
            Option<String>,
            Option<String>,
            Option<String>,
            Json<Value>,
            String,
            Json<Value>,
            i64,
        );
        let row: Option<Row> = self
            .read_optional(sql!(
                "SELECT user_id, segment_id, status, prompt_version, model, raw_output, stop_reason, context, purpose,
                        subject, chunk_index
                 FROM llm_requests WHERE id = $1",
                request_id
            ))
            .await?;
        let (
            user_id,
            segment_id,
            status,
            prompt_version,
            model,
            raw_output,
            stop_reason,
            Json(context),
            purpose,
            Json(subject),
            chunk_index,
        ) = row.ok_or_else(|| StoreError::NotFound(format!("no request {request_id}")))?;
        Ok(StoredOutput {
            request_id,
            user_id: UserId::parse(&user_id).map_err(|error| corrupt("llm_requests", error))?,
            segment_id: segment_id
                .map(|id| SegmentId::parse(&id))
                .transpose()
                .map_err(|error| corrupt("llm_requests", error))?,
            chunk_index,
            status: RequestStatus::parse(&status).map_err(|error| corrupt("llm_requests", error))?,
            prompt_version,
            model,
            raw_output,
            stop_reason,
            context: from_json("llm_requests", context)?,
            purpose: Purpose::parse(&purpose).map_err(|error| corrupt("llm_requests", error))?,
            subject: from_json("llm_requests", subject)?,
        })
    }

    /// Drops the raw model output of finished requests (applied or dead) completed before
    /// `before`: retention for text nobody needs once its memories are written. `memsift replay`
    /// cannot re-read a request after this. Returns how many outputs were dropped.
    pub async fn purge_raw_outputs(self, before: DateTime<Utc>) -> Result<u64> {
        self.write(async |tx| {
            tx.execute(sql!(
                "UPDATE llm_requests SET raw_output = NULL
                 WHERE raw_output IS NOT NULL AND status IN ('applied', 'dead') AND completed_at < $1",
                before
            ))
            .await
        })
        .await
    }

    /// Test convenience: [`Store::claim_requests_of`] over every segment.
    #[cfg(feature = "testing")]
    pub async fn claim_requests(
        self,
        lane: Lane,
        worker: &str,
        now: DateTime<Utc>,
        lease: Duration,
        limit: i64,
    ) -> Result<Vec<WorkRequest>> {
        self.claim_requests_of(None, lane, worker, now, lease, limit).await
    }

    /// Claims planned requests of the given lane for execution outside any transaction; a claim
    /// whose lease ran out (its worker died mid-call) is taken over, and a request held back
    /// until a not-before time waits for it.
    ///
    /// Only of `segment`'s requests when given (`memsift extract --segment`).
    pub async fn claim_requests_of(
        self,
        segment: Option<SegmentId>,
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
                          WHERE lane = $1 AND batch_id IS NULL AND ($6 IS NULL OR segment_id = $6)
                            -- A planned request's `claimed_until` is its not-before time (a paused lane).
                            AND ((status = 'planned' AND (claimed_until IS NULL OR claimed_until <= $2))
                                 OR (status = 'submitted' AND claimed_until <= $2))
                          ORDER BY created_at, id LIMIT $5 {lock})
             RETURNING {WORK_COLUMNS}"
        );
        let rows: Vec<WorkRow> = self
            .write(async |tx| {
                tx.fetch_all(sql!(
                    &sql,
                    lane.as_str(),
                    now,
                    worker,
                    now + lease,
                    limit,
                    segment.map(|id| id.to_string())
                ))
                .await
            })
            .await?;
        rows.into_iter().map(WorkRequest::try_from).collect()
    }

    /// Records a provider's answer and its cost: the request becomes `succeeded` (raw output kept for replay).
    ///
    /// Only a request still waiting for output changes, so a result line read twice is a no-op;
    /// returns whether this call recorded it.
    pub async fn record_answer(
        self,
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
        self,
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

    /// Test convenience: [`Store::unapplied_answers_of`] over every segment.
    #[cfg(feature = "testing")]
    pub async fn unapplied_answers(self, limit: i64) -> Result<Vec<RequestId>> {
        self.unapplied_answers_of(None, limit).await
    }

    /// Requests answered but not yet applied (a crash between recording and applying leaves
    /// these, and so does an apply that failed). Answers whose applies failed fewer times come
    /// first, so answers that keep failing (until they are quarantined) never starve the rest.
    ///
    /// Only of `segment`'s requests when given.
    pub async fn unapplied_answers_of(self, segment: Option<SegmentId>, limit: i64) -> Result<Vec<RequestId>> {
        let ids: Vec<String> = self
            .read_scalar_all(sql!(
                "SELECT id FROM llm_requests WHERE status = 'succeeded' AND ($2 IS NULL OR segment_id = $2)
                 ORDER BY apply_attempts, completed_at, id LIMIT $1",
                limit,
                segment.map(|id| id.to_string())
            ))
            .await?;
        ids.iter()
            .map(|id| RequestId::parse(id).map_err(|error| corrupt("llm_requests", error)))
            .collect()
    }

    /// Records that applying `request_id`'s answer failed with `error`. Below `max_apply_attempts`
    /// failures the answer stays `succeeded` for the next step; at it, the request is quarantined
    /// as `failed` with the error (and an extraction request's segment goes `dead` with the
    /// reason, for an admin to retry), so one bad answer never holds up the others.
    pub async fn record_apply_failure(
        self,
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

    /// Test convenience: [`Store::replan_failed_requests_of`] over every segment.
    #[cfg(feature = "testing")]
    pub async fn replan_failed_requests(self, max_attempts: i64, now: DateTime<Utc>) -> Result<ReplanReport> {
        self.replan_failed_requests_of(None, max_attempts, now).await
    }

    /// Gives every failed attempt (`errored`, `expired`, `canceled`) without a successor a new
    /// attempt with a new id, up to `max_attempts`; past it, the request and its segment go `dead`.
    ///
    /// Only of `segment`'s requests when given.
    pub async fn replan_failed_requests_of(
        self,
        segment: Option<SegmentId>,
        max_attempts: i64,
        now: DateTime<Utc>,
    ) -> Result<ReplanReport> {
        let mut report = ReplanReport::default();
        self.write(async |tx| {
            let failed: Vec<FailedAttempt> = tx
                .fetch_all(sql!(
                    "SELECT r.id, r.segment_id, r.status, r.error,
                            CASE WHEN r.segment_id IS NOT NULL AND r.parent_request_id IS NOT NULL
                                 THEN (SELECT COUNT(*) FROM llm_requests piece
                                       WHERE piece.purpose = r.purpose AND piece.segment_id = r.segment_id
                                         AND piece.chunk_index = r.chunk_index
                                         AND piece.parent_request_id = r.parent_request_id)
                                 ELSE r.attempt END AS tries
                     FROM llm_requests r
                     WHERE r.status IN ('errored', 'expired', 'canceled') AND ($1 IS NULL OR r.segment_id = $1)
                       AND NOT EXISTS (SELECT 1 FROM llm_requests later
                                       WHERE later.purpose = r.purpose AND later.user_id = r.user_id
                                         AND later.chunk_index = r.chunk_index AND later.attempt > r.attempt
                                         AND (later.segment_id = r.segment_id
                                              -- Post-processing requests have no segment: their subject names the work.
                                              OR (r.segment_id IS NULL AND later.segment_id IS NULL AND later.subject = r.subject)))
                     ORDER BY r.completed_at, r.id",
                    segment
                ))
                .await?;
            for FailedAttempt {
                id,
                segment_id,
                tries,
                status,
                error,
            } in failed
            {
                if tries < max_attempts {
                    tx.execute(sql!(
                        "INSERT INTO llm_requests (id, purpose, user_id, segment_id, chunk_index, subject, lane, config_key,
                                                   provider, model, prompt_version, context, request_body, status, attempt,
                                                   created_at, parent_request_id, reserved_usd, run_id, subject_entity_id,
                                                   max_output_tokens)
                         SELECT $2, purpose, user_id, segment_id, chunk_index, subject, lane, config_key, provider, model,
                                prompt_version, context, request_body, 'planned', attempt + 1, $3, parent_request_id,
                                reserved_usd, run_id, subject_entity_id, max_output_tokens
                         FROM llm_requests WHERE id = $1",
                        &id,
                        RequestId::new_v7(),
                        now
                    ))
                    .await?;
                    report.n_replanned += 1;
                } else {
                    let reason = format!(
                        "request {id} {status} on attempt {tries} of {max_attempts}: {}",
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

    /// The earliest time at which waiting work becomes due: a batch poll, a batch waiting to be
    /// packed or reconciled, a claim lease running out, a failed segment's retry. `None`: no work
    /// is waiting (open segments are not counted: they wait for their conversation, not for us).
    /// Planned requests of the (lane, config key) pairs in `held` (that lane is paused) wait for
    /// their lane, not for a time, and are not counted.
    pub async fn next_due_work(
        self,
        pack_max_wait: Duration,
        reconcile_grace: Duration,
        held: &[(Lane, String)],
    ) -> Result<Option<DateTime<Utc>>> {
        let DueInputs {
            poll,
            ingest_lease,
            retry,
            request_leases,
            oldest_planned,
            submitting,
        } = {
            let poll = self
                .read_scalar_one(sql!("SELECT MIN(next_poll_at) FROM batches WHERE status = 'submitted'"))
                .await?;
            let ingest_lease = self
                .read_scalar_one(sql!("SELECT MIN(claimed_until) FROM batches WHERE status = 'ended'"))
                .await?;
            let retry = self
                .read_scalar_one(sql!(
                    "SELECT MIN(next_attempt_at) FROM segments WHERE status = 'failed'"
                ))
                .await?;
            let request_leases = self
                .read_all(sql!(
                    // A call in flight (any lane), or a request held back after its lane's outage
                    // until a probe (planned, not on the batch lane).
                    "SELECT MIN(claimed_until), CASE WHEN status = 'planned' THEN lane ELSE '' END, config_key
                     FROM llm_requests
                     WHERE batch_id IS NULL AND (status = 'submitted' OR (status = 'planned' AND lane <> 'batch'))
                     GROUP BY CASE WHEN status = 'planned' THEN lane ELSE '' END, config_key"
                ))
                .await?;
            let waiting: Vec<(Due, String)> = self
                .read_all(sql!(
                    "SELECT MIN(created_at), config_key FROM llm_requests
                 WHERE status = 'planned' AND lane = 'batch' AND claimed_until IS NULL GROUP BY config_key"
                ))
                .await?;
            let mut oldest_planned: Vec<(Due, Due, String)> = self
                .read_all(sql!(
                    "SELECT created_at, claimed_until, config_key FROM llm_requests
                 WHERE status = 'planned' AND lane = 'batch' AND claimed_until IS NOT NULL"
                ))
                .await?;
            oldest_planned.extend(waiting.into_iter().map(|(created, key)| (created, None, key)));
            let submitting = self
                .read_all(sql!(
                    "SELECT submit_started_at, claimed_until, last_error FROM batches WHERE status = 'submitting'"
                ))
                .await?;
            DueInputs {
                poll,
                ingest_lease,
                retry,
                request_leases,
                oldest_planned,
                submitting,
            }
        };
        // A `submitting` batch is reconciled once its grace period has passed and its
        // submitter's claim has run out, whichever is later; one whose create answered without
        // an outcome, as soon as its claim (the recheck hold) allows.
        let reconcile = submitting
            .into_iter()
            .filter_map(|(started, claimed_until, last_error)| {
                let started = started?;
                let after_grace = if create_outcome_unknown(last_error.as_deref()) {
                    started
                } else {
                    started + reconcile_grace
                };
                Some(claimed_until.map_or(after_grace, |until| until.max(after_grace)))
            })
            .min();
        // A planned batch request is packable once it has waited `pack_max_wait` and any
        // not-before time (set after a create refused for now) has passed, whichever is later.
        let pack = oldest_planned
            .into_iter()
            .filter(|(_, _, config_key)| !held.iter().any(|(lane, key)| *lane == Lane::Batch && key == config_key))
            .filter_map(|(created, not_before, _)| {
                let waited = created? + pack_max_wait;
                Some(not_before.map_or(waited, |not_before| not_before.max(waited)))
            })
            .min();
        // A request held back until its lane's probe waits for the lane, not for a time, when
        // that lane is paused.
        let request_lease = request_leases
            .into_iter()
            .filter(|(_, held_on, config_key)| {
                !held
                    .iter()
                    .any(|(lane, key)| lane.as_str() == held_on.as_str() && key == config_key)
            })
            .filter_map(|(until, _, _)| until)
            .min();
        Ok([poll, ingest_lease, retry, request_lease, pack, reconcile]
            .into_iter()
            .flatten()
            .min())
    }
}

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
            request_body: row
                .request_body
                .map(|Json(body)| from_json("llm_requests", body))
                .transpose()?
                .unwrap_or_default(),
            // A stored allowance outside u32 cannot have been written by memsift: read as none,
            // which sends the config's `max_tokens`.
            max_output_tokens: row.max_output_tokens.and_then(|tokens| u32::try_from(tokens).ok()),
        })
    }
}
