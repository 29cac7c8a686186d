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

mod continuation;
mod drain;
mod held;
mod lanes;
mod plan;

use anyhow::Context;
use chrono::{DateTime, Duration, Utc};
use memsift_core::SegmentId;
use memsift_core::status::Lane;
use serde::Serialize;

use crate::app::App;
use crate::context::Applied;
use crate::timings::{Phase, timed};

pub use drain::drain_answers;
pub use plan::plan_segment;

/// How many segments or requests one step claims per stage.
pub(super) const CLAIM_BATCH: i64 = 32;

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
    /// Stored turns embedded for search (by [`index_turns`], which runs beside the steps, not in them).
    pub n_turns_embedded: u64,
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
        self.n_turns_embedded += other.n_turns_embedded;
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
        batch.n_download_failures += more.n_download_failures;
        batch.n_batches_given_up += more.n_batches_given_up;
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
    app.register_worker().await?;
    let _step = timed(Phase::Step);
    let now = app.clock.now();
    let bookkeeping = timed(Phase::Bookkeeping);
    share_quotas(app, now).await?;
    let mut report = StepReport {
        n_segments_closed: app
            .store
            .messages()
            .close_idle_segments(now, app.config.idle_timeout())
            .await?,
        ..StepReport::default()
    };
    drop(bookkeeping);
    {
        let _planning = timed(Phase::Planning);
        plan::plan_closed_segments(app, &mut report).await?;
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
            lanes::execute_lane(app, lane, segment, report).await?;
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
    drain::drain_answers_of(app, segment, report).await
}

/// Gives failed attempts (only `segment`'s when given) a new attempt, or ends them `dead`.
async fn replan_failed(app: &App, segment: Option<SegmentId>, report: &mut StepReport) -> anyhow::Result<()> {
    let replan = app
        .store
        .requests()
        .replan_failed_requests_of(segment, app.config.extraction.max_attempts as i64, app.clock.now())
        .await?;
    report.n_requests_replanned = replan.n_replanned;
    // Requests the immediate lane found refused as they are were counted dead when it ran.
    report.n_requests_dead += replan.n_dead;
    Ok(())
}

/// Drops raw outputs past `[retention] raw_output_days` (0: keeps them); returns how many.
pub async fn apply_retention(app: &App) -> anyhow::Result<u64> {
    let days = app.config.retention.raw_output_days;
    if days == 0 {
        return Ok(0);
    }
    let before = app.clock.now() - Duration::days(i64::from(days));
    Ok(app.store.requests().purge_raw_outputs(before).await?)
}

/// Recalculates importance and archives the lowest memories under `[scoring]`.
pub async fn score(app: &App) -> anyhow::Result<memsift_store::ScoringReport> {
    let config = &app.config.scoring;
    let policy = memsift_store::ScoringPolicy {
        floor: config.floor,
        min_age_days: i64::from(config.min_age_days),
        max_share_per_run: config.max_share_per_run,
    };
    Ok(app.store.memories().score_memories(&policy, app.clock.now()).await?)
}

/// The safety-net sweep (every six hours under the daemon, or `memsift sweep`): one pass of every
/// stage, which between them find closed segments not yet extracted, answers not yet applied,
/// failed attempts due for another try, claims whose worker died, and batches left `submitting`,
/// and move each forward once. Nothing loops: every claim counts an attempt and attempts are capped.
pub async fn sweep(app: &App) -> anyhow::Result<StepReport> {
    run_once(app).await
}

/// Search indexing: embeds stored turns that have no vector yet, a page of
/// [`crate::embedding::TURN_PAGE`] at a time, until `limit` turns are done (`None`: no limit), none
/// is left, or the clock reaches `until`; returns how many.
///
/// It is never part of a step: a step moves extraction, and a backlog of turns to embed (every
/// turn of a big import) must not stand in front of a lane's first request, nor hide a setting
/// fault behind minutes of embedding. The daemon and `memsift run` call it after each pass with
/// `[embeddings] turns_per_pass`; [`run_until_idle`] fills its waits with it and finishes it
/// before it returns.
pub async fn index_turns(app: &App, limit: Option<u64>, until: Option<DateTime<Utc>>) -> anyhow::Result<u64> {
    let _indexing = timed(Phase::SearchTurns);
    let page = crate::embedding::TURN_PAGE as u64;
    let mut n_done = 0;
    loop {
        let want = limit.map_or(page, |limit| limit.saturating_sub(n_done).min(page));
        if want == 0 || until.is_some_and(|until| app.clock.now() >= until) {
            return Ok(n_done);
        }
        let n = app.vectors.index_turns(&app.store, want as i64).await?;
        n_done += n;
        if n < want {
            return Ok(n_done);
        }
    }
}

/// One pass of search indexing for the daemon and `memsift run`: at most `[embeddings]
/// turns_per_pass` turns.
pub async fn index_turns_pass(app: &App) -> anyhow::Result<u64> {
    index_turns(app, Some(u64::from(app.config.embeddings.turns_per_pass)), None).await
}

/// How long a process counts as using provider quotas after it last asked for a request.
const LIVE_WINDOW_SECS: i64 = 120;

/// Records this process as live and takes its share of every provider quota: the quota divided
/// between this process and the others that asked the provider for something on this database
/// in the last two minutes. A process with nothing to send (idle, or only serving reads) records
/// no demand and takes no part, so it leaves the whole quota to the ones working. On SQLite that
/// is usually one process; on PostgreSQL each daemon does the same, so together they stay under
/// the quota, but for a newcomer's first step, which the provider's 429s cover.
async fn share_quotas(app: &App, now: DateTime<Utc>) -> anyhow::Result<()> {
    let wanting = app.limiter.take_demand();
    app.store.lanes().heartbeat(&app.worker_id, now, wanting).await?;
    let others = app
        .store
        .lanes()
        .other_demanding_workers(&app.worker_id, now - Duration::seconds(LIVE_WINDOW_SECS))
        .await?;
    app.limiter
        .set_share(u32::try_from(others.saturating_add(1)).unwrap_or(u32::MAX));
    Ok(())
}

/// Runs steps until nothing is left to do. When the only work left is waiting (a batch whose next
/// poll is due later, a failed segment's retry time), it embeds stored turns for search until it
/// is due ([`index_turns`]), then waits for it through [`App::waiter`]; it returns once every
/// turn is embedded too.
///
/// Work that can still finish is waited for: batches already created are polled and applied
/// while their lane is paused, and a lane open after an outage gets its first probe. Once nothing
/// else can move, a lane paused by a setting fault (or whose probe failed) ends the run with an
/// error naming the lane, the provider's answer and the likely fix, with nothing spent and
/// whatever turns are left to embed left for the next run.
pub async fn run_until_idle(app: &App) -> anyhow::Result<StepReport> {
    let _run = timed(Phase::Run);
    let mut total = StepReport::default();
    loop {
        let step_started = app.clock.now();
        let step = run_once(app).await?;
        total.add(&step);
        // A results download left open reads on in the next step; each step waits for its bytes
        // at most the coordinator's slice, so this is no busy loop.
        if step.progressed() || downloads_in_flight(app) {
            continue;
        }
        // Claims of a process that is gone are taken over now; any other holder ends the run
        // with its name, as "idle" would be untrue.
        if let held::Held::Released = held::settle(app, app.clock.now()).await? {
            continue;
        }
        let next = next_work(app, step_started).await?;
        // The time until due work is search indexing's; work that cannot move leaves it all.
        let n_indexed = index_turns(app, None, next.waits_until()).await?;
        if n_indexed > 0 {
            total.n_turns_embedded += n_indexed;
            continue;
        }
        match next {
            NextWork::At(due) => {
                let _waits = timed(Phase::Waits);
                app.waiter.wait_until(due).await;
            }
            NextWork::Stuck(due) => {
                tracing::warn!(%due, "Work is due but no stage can move it; stopping.");
                return Ok(total);
            }
            NextWork::Idle => return Ok(total),
        }
    }
}

/// What a run that moved nothing this step waits for.
enum NextWork {
    /// Work becomes due then (a poll, a pack, a reconcile, a retry, a lane's first probe).
    At(DateTime<Utc>),
    /// Work was due when the step ran and still did not move: waiting would only spin (a bug, or
    /// a provider this build cannot reach).
    Stuck(DateTime<Utc>),
    /// Nothing is waiting.
    Idle,
}

impl NextWork {
    fn waits_until(&self) -> Option<DateTime<Utc>> {
        match self {
            NextWork::At(at) => Some(*at),
            NextWork::Stuck(_) | NextWork::Idle => None,
        }
    }
}

/// The next work of a run that moved nothing in the step started at `step_started`: due work,
/// without the requests that wait on a paused lane rather than for a time, or the first probe of
/// a lane open after an outage. With neither, a lane nothing will move during this run (a setting
/// fault, a failed probe) is an error saying so.
async fn next_work(app: &App, step_started: DateTime<Utc>) -> anyhow::Result<NextWork> {
    let paused = crate::health::paused_lanes(app).await?;
    let due = app
        .store
        .requests()
        .next_due_work(app.config.pack_max_wait(), app.config.reconcile_grace(), &paused.held)
        .await?;
    Ok(match (due, paused.next_probe_at) {
        (Some(due), probe) if due > step_started => NextWork::At(probe.map_or(due, |probe| probe.min(due))),
        (_, Some(probe)) => NextWork::At(probe),
        (Some(due), None) => {
            paused.stop_if_stuck()?;
            NextWork::Stuck(due)
        }
        (None, None) => {
            paused.stop_if_stuck()?;
            NextWork::Idle
        }
    })
}

/// Whether the batch coordinator holds a results download open for its next step.
pub fn downloads_in_flight(app: &App) -> bool {
    app.coordinator
        .as_ref()
        .is_some_and(|coordinator| coordinator.downloads_in_flight() > 0)
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
        .segments()
        .claim_segment(segment_id, &app.worker_id, app.clock.now())
        .await?;
    let mut total = StepReport::default();
    plan::plan_claimed(app, std::slice::from_ref(&claimed), &mut total).await?;
    loop {
        let step_started = app.clock.now();
        let mut step = StepReport::default();
        execute_and_drain(app, Some(segment_id), &mut step).await?;
        replan_failed(app, Some(segment_id), &mut step).await?;
        total.add(&step);
        if step.progressed() || downloads_in_flight(app) {
            continue;
        }
        let status = app.store.segments().segment_status(segment_id).await?;
        if !matches!(status.as_deref(), Some("extracting")) {
            return Ok(total);
        }
        match next_work(app, step_started).await? {
            NextWork::At(due) => app.waiter.wait_until(due).await,
            NextWork::Stuck(due) => {
                tracing::warn!(%segment_id, %due, "Work is due but no stage can move it; stopping.");
                return Ok(total);
            }
            NextWork::Idle => return Ok(total),
        }
    }
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
