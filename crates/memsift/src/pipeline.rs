//! The extraction pipeline: claim closed segments, plan their requests, run each lane, and apply
//! every answer once.
//!
//! [`run_once`] is one step of every stage, each moving work forward by at most one committed
//! state: close idle segments → plan (payload + route per chunk) → execute the heuristic and
//! immediate lanes → step the batch coordinator → apply every recorded answer → re-plan failed
//! attempts. Lanes only record answers; [`drain_answers`] applies them all through
//! [`crate::apply::apply_request_output`], the single place that turns a stored raw output into memories.
//! Background work is driven step by step, so tests need no sleeps.
//!
//! One bad item stalls nothing else: a request, answer or segment that fails is recorded on that
//! item and the step goes on. An answer whose apply fails is tried again on later steps, behind
//! fresher answers, and quarantined as `failed` after `[extraction] max_apply_attempts`. A failure
//! of the environment (the database unreachable, the embedder missing) counts against no item: it
//! ends the step with the error, and the work waits.

use std::collections::HashMap;
use std::sync::Arc;

use anyhow::Context;
use chrono::{DateTime, Duration, Utc};
use memsift_core::config::{OverBudget, ProviderKind};
use memsift_core::request::{RequestBody, RequestContext, RequestSubject};
use memsift_core::status::{Lane, Purpose, RequestStatus, Role};
use memsift_core::transcript::parse_turns;
use memsift_core::{MemoryId, RequestId, SegmentId};
use memsift_llm::{BreakerState, FaultClass, LaneKey, OpenCause, Permit, ResolvedLlm};
use memsift_payload::{KnownMemory, PayloadOptions, build_extraction_chunks};
use memsift_routing::{ExecutionOutcome, ExecutionRequest, ExecutionStrategy, Route};
use memsift_store::{ApplyFailure, ClaimedSegment, NewRequest, RequestUsage};
use serde::Serialize;

use crate::app::App;
use crate::apply::{Applied, apply_request_output, apply_stored_output, embed_ahead, is_environment_fault};
use crate::budget::{OVER_BUDGET_KEY, Pending, estimate_usd, within_budget};
use crate::timings::{Phase, timed};

/// How many segments or requests one step claims per stage.
const CLAIM_BATCH: i64 = 32;

/// What one step of the pipeline did.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct StepReport {
    /// Open segments closed by the idle timeout.
    pub n_segments_closed: u64,
    /// Segments claimed and planned.
    pub n_segments_planned: u64,
    /// Requests planned.
    pub n_requests_planned: u64,
    /// Requests answered on the heuristic or immediate lane.
    pub n_requests_executed: u64,
    /// Segments that became `extracted`.
    pub n_segments_extracted: u64,
    /// Segment planning attempts that failed.
    pub n_segments_failed: u64,
    /// Memories written.
    pub n_memories: u64,
    /// Items dropped by the processor or at write.
    pub n_items_dropped: u64,
    /// Failed attempts given a new attempt.
    pub n_requests_replanned: u64,
    /// Requests out of attempts.
    pub n_requests_dead: u64,
    /// Post-processing answers that changed the store.
    pub n_stage_changes: u64,
    /// Applies that failed; each answer is tried again on a later step.
    pub n_apply_failures: u64,
    /// Answers quarantined as `failed` after `max_apply_attempts` failed applies.
    pub n_requests_quarantined: u64,
    /// Planned requests moved off an unwell lane to the next usable one of their route.
    pub n_requests_rerouted: u64,
    /// Requests held back (no attempt spent) because their lane is paused by a setting fault.
    pub n_requests_held: u64,
    /// What the batch coordinator did.
    pub batch: memsift_batch::CoordinatorReport,
}

impl StepReport {
    /// Whether the step moved anything.
    pub fn progressed(&self) -> bool {
        // A failed apply moves nothing forward (the answer is tried on a later step); a
        // quarantine does.
        // Nor does holding a request back for a paused lane.
        let idle = StepReport {
            batch: self.batch.clone(),
            n_apply_failures: self.n_apply_failures,
            n_requests_held: self.n_requests_held,
            ..StepReport::default()
        };
        (*self != idle) || self.batch.progressed()
    }

    /// Attempts that failed: segment plannings that failed, request attempts that failed (each is
    /// either re-planned or, out of attempts, dead) and applies that failed.
    pub fn n_failed_attempts(&self) -> u64 {
        self.n_segments_failed + self.n_requests_replanned + self.n_requests_dead + self.n_apply_failures
    }

    /// Adds another step's counts.
    pub fn add(&mut self, other: &StepReport) {
        self.n_segments_closed += other.n_segments_closed;
        self.n_segments_planned += other.n_segments_planned;
        self.n_requests_planned += other.n_requests_planned;
        self.n_requests_executed += other.n_requests_executed;
        self.n_segments_extracted += other.n_segments_extracted;
        self.n_segments_failed += other.n_segments_failed;
        self.n_memories += other.n_memories;
        self.n_items_dropped += other.n_items_dropped;
        self.n_requests_replanned += other.n_requests_replanned;
        self.n_requests_dead += other.n_requests_dead;
        self.n_stage_changes += other.n_stage_changes;
        self.n_apply_failures += other.n_apply_failures;
        self.n_requests_quarantined += other.n_requests_quarantined;
        self.n_requests_rerouted += other.n_requests_rerouted;
        self.n_requests_held += other.n_requests_held;
        let batch = &mut self.batch;
        let more = &other.batch;
        batch.n_batches_created += more.n_batches_created;
        batch.n_batches_rejected += more.n_batches_rejected;
        batch.n_creates_unknown += more.n_creates_unknown;
        batch.n_batches_adopted += more.n_batches_adopted;
        batch.n_batches_replanned += more.n_batches_replanned;
        batch.n_polls += more.n_polls;
        batch.n_batches_ended += more.n_batches_ended;
        batch.n_batches_ingested += more.n_batches_ingested;
        batch.n_answers += more.n_answers;
        batch.n_failures += more.n_failures;
        batch.n_lines_refused += more.n_lines_refused;
        batch.n_batch_errors += more.n_batch_errors;
        batch.n_provider_deletes += more.n_provider_deletes;
        batch.n_batches_held += more.n_batches_held;
    }

    fn add_applied(&mut self, applied: &Applied) {
        self.n_memories += applied.n_memories;
        self.n_items_dropped += applied.n_items_dropped;
        self.n_segments_extracted += applied.n_segments_extracted;
        self.n_stage_changes += applied.n_stage_changes;
    }
}

/// One step of every stage.
pub async fn run_once(app: &App) -> anyhow::Result<StepReport> {
    let _step = timed(Phase::Step);
    let now = app.clock.now();
    let bookkeeping = timed(Phase::Bookkeeping);
    share_quotas(app, now).await?;
    let mut report = StepReport {
        n_segments_closed: app.store.close_idle_segments(now, app.config.idle_timeout()).await?,
        ..StepReport::default()
    };
    drop(bookkeeping);
    {
        let _planning = timed(Phase::Planning);
        plan_closed_segments(app, &mut report).await?;
    }
    {
        let _bookkeeping = timed(Phase::Bookkeeping);
        report.n_requests_rerouted = crate::health::reroute_waiting(app).await?;
    }
    execute_and_drain(app, None, &mut report).await?;
    let _bookkeeping = timed(Phase::Bookkeeping);
    // A consolidation proposal applied above is reviewed by a request of its own.
    report.n_requests_planned += crate::stages::plan_reviews(app).await?;
    // With the extraction reviewer on, every memory extraction wrote gets one review request.
    report.n_requests_planned += crate::stages::plan_extraction_reviews(app).await?;
    replan_failed(app, None, &mut report).await?;
    Ok(report)
}

/// The part of a step that moves planned requests (only `segment`'s when given): execute the
/// heuristic and immediate lanes, step the batch coordinator, apply every recorded answer.
async fn execute_and_drain(app: &App, segment: Option<SegmentId>, report: &mut StepReport) -> anyhow::Result<()> {
    {
        let _lanes = timed(Phase::Lanes);
        for lane in [Lane::Heuristic, Lane::Immediate] {
            execute_lane(app, lane, segment, report).await?;
        }
    }
    if let Some(coordinator) = &app.coordinator {
        let _coordinator = timed(Phase::Coordinator);
        let stepped = coordinator.step().await.context("batch coordinator step");
        crate::health::persist_transitions(app).await?;
        report.batch = stepped?;
    }
    {
        let _bookkeeping = timed(Phase::Bookkeeping);
        crate::health::persist_transitions(app).await?;
    }
    let _drain = timed(Phase::Drain);
    drain_answers_of(app, segment, report).await
}

/// Gives failed attempts (only `segment`'s when given) a new attempt, or ends them `dead`.
async fn replan_failed(app: &App, segment: Option<SegmentId>, report: &mut StepReport) -> anyhow::Result<()> {
    let replan = app
        .store
        .replan_failed_requests_of(segment, app.config.extraction.max_attempts as i64, app.clock.now())
        .await?;
    report.n_requests_replanned = replan.n_replanned;
    // Requests the immediate lane found refused as they are were counted dead when it ran.
    report.n_requests_dead += replan.n_dead;
    Ok(())
}

/// Applies every recorded answer once, whichever lane answered it: the one apply path.
///
/// Each answer is tried at most once per step. One whose apply fails is recorded on its request
/// and tried again on a later step, behind fresher answers (so no number of failing answers can
/// starve the rest), and quarantined as `failed` after `max_apply_attempts`. A failure of the
/// environment stops the drain with the error and counts against no answer.
pub async fn drain_answers(app: &App, report: &mut StepReport) -> anyhow::Result<()> {
    drain_answers_of(app, None, report).await
}

/// [`drain_answers`], only of `segment`'s requests when given.
async fn drain_answers_of(app: &App, segment: Option<SegmentId>, report: &mut StepReport) -> anyhow::Result<()> {
    let context = app.apply_context();
    let max_apply_attempts = i64::from(app.config.extraction.max_apply_attempts);
    let mut tried = std::collections::HashSet::new();
    loop {
        let page = {
            let _reads = timed(Phase::Reads);
            app.store
                .unapplied_answers_of(segment, CLAIM_BATCH + tried.len() as i64)
                .await?
        };
        let fresh: Vec<RequestId> = page.into_iter().filter(|id| !tried.contains(id)).collect();
        if fresh.is_empty() {
            return Ok(());
        }
        let mut read = embed_ahead(&context, &fresh).await;
        for request_id in fresh {
            tried.insert(request_id);
            let applied = match read.remove(&request_id) {
                Some(stored) => apply_stored_output(&context, stored).await,
                None => apply_request_output(&context, request_id).await,
            };
            let error = match applied {
                Ok(applied) => {
                    report.add_applied(&applied);
                    continue;
                }
                Err(error) if is_environment_fault(&error) => {
                    return Err(error.context(format!(
                        "applying request {request_id} stopped; it and every other recorded answer wait, nothing counted against them"
                    )));
                }
                Err(error) => error,
            };
            let message = format!("{error:#}");
            match app
                .store
                .record_apply_failure(request_id, &message, max_apply_attempts, app.clock.now())
                .await?
            {
                ApplyFailure::WillRetry { attempts } => {
                    report.n_apply_failures += 1;
                    tracing::warn!(%request_id, attempts, error = %message, "Applying an answer failed; it is tried again on a later step.");
                }
                ApplyFailure::Quarantined { attempts } => {
                    report.n_apply_failures += 1;
                    report.n_requests_quarantined += 1;
                    tracing::error!(%request_id, attempts, error = %message, "An answer could not be applied and is quarantined as failed; see `memsift show` and retry its segment after fixing the cause.");
                }
                ApplyFailure::NotPending => {}
            }
        }
    }
}

/// Drops raw outputs past `[retention] raw_output_days` (0: keeps them); returns how many.
pub async fn apply_retention(app: &App) -> anyhow::Result<u64> {
    let days = app.config.retention.raw_output_days;
    if days == 0 {
        return Ok(0);
    }
    let before = app.clock.now() - Duration::days(i64::from(days));
    Ok(app.store.purge_raw_outputs(before).await?)
}

/// Recalculates importance and archives the lowest memories under `[scoring]`.
pub async fn score(app: &App) -> anyhow::Result<memsift_store::ScoringReport> {
    let config = &app.config.scoring;
    let policy = memsift_store::ScoringPolicy {
        floor: config.floor,
        min_age_days: i64::from(config.min_age_days),
        max_share_per_run: config.max_share_per_run,
    };
    Ok(app.store.score_memories(&policy, app.clock.now()).await?)
}

/// The safety-net sweep (every six hours under the daemon, or `memsift sweep`): one pass of every
/// stage, which between them find closed segments not yet extracted, answers not yet applied,
/// failed attempts due for another try, claims whose worker died, and batches left `submitting`,
/// and move each forward once. Nothing loops: every claim counts an attempt and attempts are capped.
pub async fn sweep(app: &App) -> anyhow::Result<StepReport> {
    run_once(app).await
}

/// How long a process counts as live after its last step, for splitting quotas.
const LIVE_WINDOW_SECS: i64 = 120;

/// Records this process as live and takes its share of every provider quota: the quota divided
/// by the processes that stepped the pipeline on this database in the last two minutes. On SQLite
/// that is usually one; on PostgreSQL every daemon does the same, so together they stay under it.
async fn share_quotas(app: &App, now: DateTime<Utc>) -> anyhow::Result<()> {
    app.store.heartbeat(&app.worker_id, now).await?;
    let live = app
        .store
        .live_workers(now - Duration::seconds(LIVE_WINDOW_SECS))
        .await?;
    app.limiter.set_share(u32::try_from(live).unwrap_or(u32::MAX));
    Ok(())
}

/// Runs steps until nothing is left to do. When the only work left is waiting (a batch whose next
/// poll is due later, a failed segment's retry time), it waits for it through [`App::waiter`].
///
/// A lane paused by a setting fault is not waited for: once nothing else moves, this returns an
/// error naming the lane, the provider's answer and the likely fix, with nothing spent.
pub async fn run_until_idle(app: &App) -> anyhow::Result<StepReport> {
    let _run = timed(Phase::Run);
    let mut total = StepReport::default();
    loop {
        let step_started = app.clock.now();
        let step = run_once(app).await?;
        total.add(&step);
        if step.progressed() {
            continue;
        }
        crate::health::stop_if_paused(app).await?;
        let pack_max_wait = Duration::seconds(app.config.batch.pack_max_wait_secs as i64);
        let reconcile_grace = Duration::seconds(app.config.batch.reconcile_grace_secs as i64);
        match app.store.next_due_work(pack_max_wait, reconcile_grace).await? {
            // Work that was already due when the step ran and still did not move would only
            // spin: report it instead (it is a bug, or a provider this build cannot reach).
            Some(due) if due <= step_started => {
                tracing::warn!(%due, "Work is due but no stage can move it; stopping.");
                return Ok(total);
            }
            Some(due) => {
                let _waits = timed(Phase::Waits);
                app.waiter.wait_until(due).await;
            }
            None => return Ok(total),
        }
    }
}

/// Extracts one segment (`memsift extract --segment`) and nothing else: claims it (closing it first
/// if it is open; a `failed` or `dead` one gets another attempt), plans it, then runs only its
/// requests and answers, step by step, until it is extracted, failed or dead, or nothing moves.
///
/// No other segment is closed, claimed or planned, and no other request is executed, applied or
/// re-planned; the batch coordinator is stepped as usual, since it alone submits and ingests the
/// batch lane, so it may also carry what was planned for that lane before.
pub async fn run_segment_until_done(app: &App, segment_id: SegmentId) -> anyhow::Result<StepReport> {
    let claimed = app
        .store
        .claim_segment(segment_id, &app.worker_id, app.clock.now())
        .await?;
    let mut total = StepReport::default();
    plan_claimed(app, std::slice::from_ref(&claimed), &mut total).await?;
    loop {
        let step_started = app.clock.now();
        let mut step = StepReport::default();
        execute_and_drain(app, Some(segment_id), &mut step).await?;
        replan_failed(app, Some(segment_id), &mut step).await?;
        total.add(&step);
        if step.progressed() {
            continue;
        }
        let status = app.store.segment_status(segment_id).await?;
        if !matches!(status.as_deref(), Some("extracting")) {
            return Ok(total);
        }
        crate::health::stop_if_paused(app).await?;
        let pack_max_wait = Duration::seconds(app.config.batch.pack_max_wait_secs as i64);
        let reconcile_grace = Duration::seconds(app.config.batch.reconcile_grace_secs as i64);
        match app.store.next_due_work(pack_max_wait, reconcile_grace).await? {
            Some(due) if due > step_started => app.waiter.wait_until(due).await,
            Some(due) => {
                tracing::warn!(%segment_id, %due, "Work is due but no stage can move it; stopping.");
                return Ok(total);
            }
            None => return Ok(total),
        }
    }
}

/// Claims closed segments and plans one request per chunk through the route of its user's tier.
async fn plan_closed_segments(app: &App, report: &mut StepReport) -> anyhow::Result<()> {
    let lease = Duration::seconds(app.config.extraction.claim_lease_secs as i64);
    let claimed = app
        .store
        .claim_segments(&app.worker_id, app.clock.now(), lease, CLAIM_BATCH)
        .await?;
    plan_claimed(app, &claimed, report).await
}

/// Plans claimed segments, in order; a segment whose planning fails is failed with the reason
/// (retried later), and an environment fault hands it and the rest back unspent.
async fn plan_claimed(app: &App, claimed: &[ClaimedSegment], report: &mut StepReport) -> anyhow::Result<()> {
    for (position, segment) in claimed.iter().enumerate() {
        match plan_segment(app, segment).await {
            Ok(n_requests) => {
                report.n_segments_planned += 1;
                report.n_requests_planned += n_requests;
            }
            Err(error) if is_environment_fault(&error) => {
                // Not the segment's fault: hand this one and the rest back without an attempt.
                let reason = format!("waiting: {error:#}");
                for waiting in &claimed[position..] {
                    app.store.defer_segment(waiting.id, app.clock.now(), &reason).await?;
                }
                return Err(error.context(format!(
                    "planning segment {} stopped; it and the other claimed segments wait, no attempt counted",
                    segment.id
                )));
            }
            Err(error) => {
                report.n_segments_failed += 1;
                tracing::warn!(segment_id = %segment.id, attempt = segment.attempt, error = %format!("{error:#}"), "Planning a segment failed.");
                // Later attempts wait longer: 5, 10, 15 … minutes.
                let retry_after = Duration::minutes(5 * segment.attempt);
                let max_attempts = app.config.extraction.max_attempts as i64;
                app.store
                    .fail_segment(
                        segment.id,
                        &format!("{error:#}"),
                        max_attempts,
                        retry_after,
                        app.clock.now(),
                    )
                    .await?;
            }
        }
    }
    Ok(())
}

/// Builds a claimed segment's chunks and records one planned request per chunk; returns how many.
///
/// The chunks reserve their estimated cost against the user's daily budget together: all of them
/// fit and go the tier's route, or none is reserved and the segment follows `[billing]
/// over_budget` (the offline lane, or waiting for the next day).
pub async fn plan_segment(app: &App, segment: &ClaimedSegment) -> anyhow::Result<u64> {
    let now = app.clock.now();
    let tier = app
        .billing
        .tier_of(app.store.user_billing_tier(segment.user_id).await?.as_deref());
    let mut route = app.router.route(Purpose::Extraction, &tier, false, now)?;
    let segment_turns = app.store.segment_turns(segment.id).await?;
    let turns: Vec<_> = segment_turns
        .iter()
        .map(|turn| (turn.message_id, turn.turn.clone()))
        .collect();
    let known = memory_context(app, segment, &segment_turns).await?;
    let prompt = app.prompts.get("extraction")?.clone();
    let extraction_prompt_version = prompt.version.clone();
    let options = PayloadOptions {
        chunk_budget_tokens: app.config.batch.chunk_budget_tokens as usize,
        max_known_memories: app.config.batch.max_known_memories as usize,
    };
    // Chunking counts the tokens of the whole segment: for a megabyte of text, CPU time that the
    // task serving the API and the watchdog pings cannot spare, so it runs on a blocking thread.
    let worker_id = app.worker_id.clone();
    let chunks = tokio::task::spawn_blocking(move || {
        crate::app::worker_fail_point("pipeline::chunking", &worker_id);
        build_extraction_chunks(&prompt, now, &turns, &known, &options)
    })
    .await
    .context("chunking the segment ended abnormally")?;
    if chunks.is_empty() {
        app.store.finish_empty_segment(segment.id, now).await?;
        return Ok(0);
    }
    let estimates: Vec<f64> = chunks
        .iter()
        .map(|chunk| estimate_usd(&app.config, &route.llm, route.lane, chunk.n_tokens as u64))
        .collect();
    let needed: f64 = estimates.iter().sum();
    let mut reserve = true;
    if let Some(over) = within_budget(app, segment.user_id, &tier, route.lane, needed, &Pending::default()).await? {
        match app.config.billing.over_budget {
            OverBudget::Heuristic => {
                tracing::info!(segment_id = %segment.id, %tier, "{over}; extracting on the heuristic lane.");
                route = Route {
                    lane: Lane::Heuristic,
                    config_key: OVER_BUDGET_KEY.to_owned(),
                    llm: ResolvedLlm::offline(OVER_BUDGET_KEY),
                };
                reserve = false;
            }
            OverBudget::Defer => {
                let tomorrow = (now.date_naive() + chrono::Days::new(1))
                    .and_hms_opt(0, 0, 0)
                    .expect("midnight exists")
                    .and_utc();
                app.store
                    .defer_segment(segment.id, tomorrow, &format!("{over}; deferred to {tomorrow}"))
                    .await?;
                return Ok(0);
            }
        }
    }
    let prompt_version = match route.llm.provider {
        ProviderKind::Heuristic => memsift_heuristic::RULES_VERSION.to_owned(),
        _ => extraction_prompt_version,
    };
    let requests: Vec<NewRequest> = chunks
        .iter()
        .zip(&estimates)
        .map(|(chunk, estimate)| {
            let memories = chunk
                .short_ids
                .iter()
                .map(|(short, id)| {
                    let text = chunk.known_texts.get(short).cloned().unwrap_or_default();
                    (short.clone(), (*id, text))
                })
                .collect();
            NewRequest {
                id: RequestId::new_v7(),
                purpose: Purpose::Extraction,
                user_id: segment.user_id,
                segment_id: Some(segment.id),
                chunk_index: chunk.chunk_index as i64,
                lane: route.lane,
                config_key: route.config_key.clone(),
                provider: route.llm.provider.as_str().to_owned(),
                model: Some(route.llm.model.clone()).filter(|model| !model.is_empty()),
                prompt_version: prompt_version.clone(),
                context: RequestContext {
                    turns: chunk.turns.clone(),
                    memories,
                    ..RequestContext::default()
                },
                request_body: RequestBody {
                    system: chunk.system_prompt.clone(),
                    user_message: chunk.user_message.clone(),
                },
                subject: RequestSubject::default(),
                parent_request_id: None,
                reserved_usd: if reserve { *estimate } else { 0.0 },
            }
        })
        .collect();
    app.store.plan_segment_requests(segment.id, &requests, now).await?;
    Ok(requests.len() as u64)
}

/// The known memories shown with a segment, most relevant first: those its turns referenced (the
/// host application's retrieval hits), then the user's memories most similar to what the user
/// said, by exact cosine over every active memory. The payload caps the list.
async fn memory_context(
    app: &App,
    segment: &ClaimedSegment,
    turns: &[memsift_store::SegmentTurn],
) -> anyhow::Result<Vec<KnownMemory>> {
    let mut known = app.store.referenced_memories(segment.id).await?;
    let n_similar = app.config.extraction.similar_memories as usize;
    let room = (app.config.batch.max_known_memories as usize).saturating_sub(known.len());
    let user_texts: Vec<String> = turns
        .iter()
        .filter(|turn| turn.turn.role == Role::User && !turn.turn.content.trim().is_empty())
        .map(|turn| turn.turn.content.clone())
        .collect();
    if n_similar > 0 && room > 0 && !user_texts.is_empty() {
        let _embedding = timed(Phase::PlanningEmbed);
        let index = app.vectors.fresh_index(&app.store, segment.user_id).await?;
        if !index.is_empty() {
            let mut best: HashMap<MemoryId, f32> = HashMap::new();
            for vector in app.vectors.embed(user_texts).await? {
                for neighbour in index.search(&vector, n_similar)? {
                    let score = best.entry(neighbour.memory_id).or_insert(f32::MIN);
                    *score = score.max(neighbour.score);
                }
            }
            for (id, _) in &known {
                best.remove(id);
            }
            let mut ranked: Vec<(MemoryId, f32)> = best.into_iter().collect();
            ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
            let ids: Vec<MemoryId> = ranked.into_iter().take(n_similar.min(room)).map(|(id, _)| id).collect();
            known.extend(app.store.active_memory_texts(segment.user_id, &ids).await?);
        }
    }
    Ok(known.into_iter().map(|(id, text)| KnownMemory { id, text }).collect())
}

/// Executes planned requests of the heuristic or immediate lane (only `segment`'s when given) and
/// records their answers.
async fn execute_lane(
    app: &App,
    lane: Lane,
    segment: Option<SegmentId>,
    report: &mut StepReport,
) -> anyhow::Result<()> {
    let lease = Duration::seconds(app.config.extraction.claim_lease_secs as i64);
    let claimed = app
        .store
        .claim_requests_of(segment, lane, &app.worker_id, app.clock.now(), lease, CLAIM_BATCH)
        .await?;
    for request in claimed {
        let llm = match app.resolved_llm(&request.config_key) {
            Ok(llm) => llm,
            // Planned under a configuration that no longer has this key: the request cannot run
            // as planned. It fails as an attempt, so re-planning (or an admin) picks it up.
            Err(error) => {
                let error = format!("{error:#}; the request was planned under another configuration");
                app.store
                    .record_failure(request.id, RequestStatus::Errored, &error, app.clock.now())
                    .await?;
                continue;
            }
        };
        let system_prompt = request.request_body.system.as_str();
        let user_message = request.request_body.user_message.as_str();
        let turns = parse_turns(user_message);
        let execution = ExecutionRequest {
            request_id: request.id,
            purpose: request.purpose,
            system_prompt,
            user_message,
            turns: &turns,
            llm: &llm,
        };
        let lane_key = (lane == Lane::Immediate).then(|| LaneKey::of(Lane::Immediate, &llm));
        if let Some(lane_key) = &lane_key
            && let Permit::Blocked(cause) = app.health.acquire(lane_key, app.clock.now())
            && cause.setting_fault
        {
            // Paused for an operator: the request waits for the lane's next probe, unspent.
            hold_request(app, request.id, lane_key, &cause).await?;
            report.n_requests_held += 1;
            continue;
        }
        let outcome = match lane {
            Lane::Heuristic => answer_offline(app, &execution).await?,
            _ => app.immediate.execute(&execution).await,
        };
        let now = app.clock.now();
        if let (Some(lane_key), Some(signal)) = (&lane_key, outcome.health_signal()) {
            app.health.record(lane_key, &signal, now);
        }
        match outcome {
            ExecutionOutcome::Completed {
                raw_output,
                stop_reason,
                usage,
                cost_usd,
                ..
            } => {
                let usage = RequestUsage {
                    input_tokens: usage.input_tokens as i64,
                    output_tokens: usage.output_tokens as i64,
                    cache_creation_tokens: (usage.cache_creation_5m_tokens + usage.cache_creation_1h_tokens) as i64,
                    cache_read_tokens: usage.cache_read_tokens as i64,
                    cost_usd,
                };
                match app
                    .store
                    .record_answer(request.id, &raw_output, stop_reason.as_deref(), &usage, now)
                    .await
                {
                    Ok(_) => report.n_requests_executed += 1,
                    Err(error) if error.is_transient() => return Err(error.into()),
                    // The answer itself cannot be stored: the attempt fails with the reason, and
                    // the other requests go on.
                    Err(error) => {
                        tracing::warn!(request_id = %request.id, error = %error, "An answer could not be stored; the attempt is marked errored.");
                        app.store
                            .record_failure(
                                request.id,
                                RequestStatus::Errored,
                                &format!("the answer could not be stored: {error}"),
                                now,
                            )
                            .await?;
                    }
                }
            }
            ExecutionOutcome::Failed {
                class: FaultClass::Setting,
                error,
                fix,
            } if lane_key.is_some() => {
                // The lane's breaker opened on this answer: the request waits, unspent.
                let lane_key = lane_key.as_ref().expect("matched Some");
                let cause = match app.health.state(lane_key, now) {
                    BreakerState::Open { cause, .. } | BreakerState::HalfOpen { cause, .. } => cause,
                    BreakerState::Closed { .. } => OpenCause {
                        setting_fault: true,
                        reason: error,
                        fix,
                        opened_at: now,
                        cool_down: app.health.policy().cool_down,
                    },
                };
                hold_request(app, request.id, lane_key, &cause).await?;
                report.n_requests_held += 1;
            }
            ExecutionOutcome::Failed { error, class, .. } => {
                // An outage or a throttle is worth another attempt; a request the provider refused
                // as it is will be refused again.
                let retryable = class != FaultClass::Request;
                let status = if retryable {
                    RequestStatus::Errored
                } else {
                    RequestStatus::Dead
                };
                app.store.record_failure(request.id, status, &error, now).await?;
                if !retryable {
                    // Refused as it is: out of attempts now, like one re-planning finds spent.
                    report.n_requests_dead += 1;
                }
                if let (false, Some(segment_id), Purpose::Extraction) = (retryable, request.segment_id, request.purpose)
                {
                    // Retrying cannot help (an invalid request, bad credentials): the segment is
                    // dead now, with the reason, for an admin to fix and retry by hand.
                    let out_of_attempts = 0;
                    app.store
                        .fail_segment(segment_id, &error, out_of_attempts, Duration::zero(), now)
                        .await?;
                }
            }
            ExecutionOutcome::Deferred => {
                // Only the batch lane defers; anything else is a bug in a strategy. The attempt
                // fails with the reason instead of stopping the lane.
                app.store
                    .record_failure(
                        request.id,
                        RequestStatus::Errored,
                        &format!("lane {lane} deferred the request; only the batch lane defers"),
                        now,
                    )
                    .await?;
            }
        }
    }
    Ok(())
}

/// The heuristic lane's answer, computed on a blocking thread: its rules read every turn, which
/// for a megabyte of text is CPU time the task serving the API and the watchdog cannot spare.
async fn answer_offline(app: &App, execution: &ExecutionRequest<'_>) -> anyhow::Result<ExecutionOutcome> {
    let heuristic = Arc::clone(&app.heuristic);
    let (request_id, purpose) = (execution.request_id, execution.purpose);
    let system_prompt = execution.system_prompt.to_owned();
    let user_message = execution.user_message.to_owned();
    let turns = execution.turns.to_vec();
    let llm = execution.llm.clone();
    tokio::task::spawn_blocking(move || {
        heuristic.answer(&ExecutionRequest {
            request_id,
            purpose,
            system_prompt: &system_prompt,
            user_message: &user_message,
            turns: &turns,
            llm: &llm,
        })
    })
    .await
    .context("the heuristic lane ended abnormally")
}

/// Holds a claimed request back while its lane is paused, until the lane's next probe.
async fn hold_request(app: &App, request_id: RequestId, lane_key: &LaneKey, cause: &OpenCause) -> anyhow::Result<()> {
    let now = app.clock.now();
    let not_before = match app.health.state(lane_key, now) {
        BreakerState::Open { until, .. } => until,
        _ => now + cause.cool_down,
    };
    let reason = format!("lane {} paused: {}", lane_key.name(), cause.describe());
    app.store.hold_request(request_id, &reason, not_before).await?;
    Ok(())
}

/// Plans one stage and, unless `dry_run` or not `execute`, runs the pipeline until it is idle so
/// the stage's requests are answered and applied (a consolidation's reviews included).
pub async fn run_stage(
    app: &App,
    stage: crate::stages::Stage,
    user: Option<&str>,
    dry_run: bool,
    execute: bool,
) -> anyhow::Result<crate::stages::StageRun> {
    let before = crate::stages::store_shape(app).await?;
    let plan = crate::stages::plan_stage(app, stage, user, dry_run).await?;
    let mut n_changes = 0;
    if !dry_run && execute {
        n_changes = run_until_idle(app).await?.n_stage_changes;
    }
    let after = crate::stages::store_shape(app).await?;
    Ok(crate::stages::StageRun {
        plan,
        before,
        after,
        n_changes,
    })
}

/// How `run --until-idle` waits for work that is due later.
#[async_trait::async_trait]
pub trait Waiter: Send + Sync {
    /// Returns once `due` has come (the wall clock sleeps; a test clock jumps).
    async fn wait_until(&self, due: DateTime<Utc>);
}

/// Sleeps on the wall clock.
pub struct SleepWaiter;

#[async_trait::async_trait]
impl Waiter for SleepWaiter {
    async fn wait_until(&self, due: DateTime<Utc>) {
        let wait = (due - Utc::now()).to_std().unwrap_or_default();
        tokio::time::sleep(wait.min(std::time::Duration::from_secs(60))).await;
    }
}
