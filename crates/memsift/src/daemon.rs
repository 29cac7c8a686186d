//! `memsift daemon`: periodic jobs fired by cron triggers, claimed through the database, run one
//! at a time on the task that owns the [`App`], under systemd's notify protocol.
//!
//! tokio-cron-scheduler only wakes the main loop; what runs is decided by [`Daemon::tick`], a
//! plain function of the injected clock. For each job it takes the latest tick of the job's cron
//! expression at or before `now` and claims that tick with `Store::claim_schedule` (invariant 11).
//! That one rule gives:
//! - no duplicates: daemons sharing one PostgreSQL claim the same tick, exactly one wins;
//! - no overlap: a run in flight holds a lease that fails the next tick's claim;
//! - catch-up without backfill: a daemon that was down finds the latest missed tick unclaimed
//!   and runs it once, never once per missed tick (our stages drain queues, not per-tick work).
//!
//! `run_pipeline` is the exception: every daemon runs it on each of its own ticks, because its
//! work is claimed item by item (segments, requests, batches, answers; `FOR UPDATE SKIP LOCKED`
//! on PostgreSQL), so daemons sharing a database share the work instead of taking turns at it.
//! A daemon still never overlaps its own runs (one step at a time on the main task) and never
//! runs one tick twice (it remembers the last tick it ran).
//!
//! The jobs run on the main task rather than in the scheduler's spawned tasks because the
//! provider clients' futures are not `Send` (see ARCHITECTURE.md, "Send"), and because running
//! them inline lets SIGTERM find, and bound, the one step in flight.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::Context;
use chrono::{DateTime, Duration, Timelike, Utc};
use croner::Cron;
use croner::parser::{CronParser, Seconds};
use memsift_core::config::SchedulesConfig;
use serde::Serialize;
use tokio::sync::mpsc;

use memsift_engine::app::App;
use memsift_engine::pipeline;
use memsift_engine::stages::Stage;

use crate::signals::Signals;
use crate::token::ApiToken;

/// A periodic job of the daemon.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub enum JobName {
    /// One step of every pipeline stage.
    RunPipeline,
    /// Close segments whose conversation went quiet.
    CloseIdleSegments,
    /// The safety-net sweep.
    Sweep,
    /// Dropping raw model outputs past their retention.
    Retention,
    /// Recalculating importance and archiving the lowest.
    Scoring,
    /// Planning relationship classification of new memories.
    Relationships,
    /// Planning summaries of newly extracted segments.
    Summaries,
    /// Planning consolidation of near-duplicate clusters.
    Consolidation,
    /// Planning refinement of long, much-read memories.
    Refinement,
    /// Planning entity GC of dormant entities.
    EntityGc,
}

impl JobName {
    /// Every job, in the order a tick considers them.
    pub const ALL: [JobName; 10] = [
        JobName::RunPipeline,
        JobName::CloseIdleSegments,
        JobName::Sweep,
        JobName::Retention,
        JobName::Scoring,
        JobName::Relationships,
        JobName::Summaries,
        JobName::Consolidation,
        JobName::Refinement,
        JobName::EntityGc,
    ];

    /// The job's name in `schedules.name`, the config and the logs.
    pub fn as_str(self) -> &'static str {
        match self {
            JobName::RunPipeline => "run_pipeline",
            JobName::CloseIdleSegments => "close_idle_segments",
            JobName::Sweep => "sweep",
            JobName::Retention => "retention",
            JobName::Scoring => "scoring",
            JobName::Relationships => "relationships",
            JobName::Summaries => "summaries",
            JobName::Consolidation => "consolidation",
            JobName::Refinement => "refinement",
            JobName::EntityGc => "entity_gc",
        }
    }

    /// Whether a tick of this job is claimed in the database, so that one daemon runs it: every
    /// job but `run_pipeline`, whose work items are claimed one by one and which every daemon
    /// therefore runs on its own ticks.
    pub fn claimed_in_database(self) -> bool {
        self != JobName::RunPipeline
    }

    /// The post-processing stage a job plans, if it is one.
    pub fn stage(self) -> Option<Stage> {
        match self {
            JobName::Relationships => Some(Stage::Relationships),
            JobName::Summaries => Some(Stage::Summaries),
            JobName::Consolidation => Some(Stage::Consolidation),
            JobName::Refinement => Some(Stage::Refinement),
            JobName::EntityGc => Some(Stage::EntityGc),
            _ => None,
        }
    }
}

/// A configured cron expression that does not parse, or never fires.
#[derive(Debug, thiserror::Error)]
#[error(
    "config: schedules.{job} = {expression:?} is not a usable cron expression: {reason}; use six fields `sec min hour day-of-month month day-of-week` in UTC, e.g. \"0 */5 * * * *\""
)]
pub struct ScheduleError {
    /// The job.
    pub job: &'static str,
    /// The expression as configured.
    pub expression: String,
    /// The parser's message.
    pub reason: String,
}

/// A job with its parsed cron expression.
#[derive(Clone, Debug)]
pub struct Schedule {
    /// The job.
    pub job: JobName,
    /// The expression as configured (the trigger parses the same text).
    pub expression: String,
    cron: Cron,
}

impl Schedule {
    /// The latest tick at or before `now`: the run a trigger firing at `now` stands for.
    pub fn tick_at_or_before(&self, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        // croner keeps the sub-second part of its start time in what it returns; two daemons
        // waking a few milliseconds apart would then name one tick differently and both win it.
        let whole_second = now.with_nanosecond(0)?;
        self.cron.find_previous_occurrence(&whole_second, true).ok()
    }
}

/// Parses every job's expression the way tokio-cron-scheduler does (seconds field required).
pub fn parse_schedules(config: &SchedulesConfig) -> Result<Vec<Schedule>, ScheduleError> {
    let parser = CronParser::builder()
        .seconds(Seconds::Required)
        .dom_and_dow(true)
        .build();
    JobName::ALL
        .into_iter()
        .map(|job| {
            let expression = match job {
                JobName::RunPipeline => &config.run_pipeline,
                JobName::CloseIdleSegments => &config.close_idle_segments,
                JobName::Sweep => &config.sweep,
                JobName::Retention => &config.retention,
                JobName::Scoring => &config.scoring,
                JobName::Relationships => &config.relationships,
                JobName::Summaries => &config.summaries,
                JobName::Consolidation => &config.consolidation,
                JobName::Refinement => &config.refinement,
                JobName::EntityGc => &config.entity_gc,
            };
            let refused = |reason: String| ScheduleError {
                job: job.as_str(),
                expression: expression.clone(),
                reason,
            };
            let cron = parser.parse(expression).map_err(|error| refused(error.to_string()))?;
            // An expression can parse and never fire (`0 0 0 30 2 *`: 30 February): the job
            // would silently never run. It must fire within the parser's search from now.
            cron.find_next_occurrence(&Utc::now(), false)
                .map_err(|_| refused("it never fires (no date matches all its fields)".to_owned()))?;
            Ok(Schedule {
                job,
                expression: expression.clone(),
                cron,
            })
        })
        .collect()
}

/// Runs one job once. The daemon uses [`PipelineRunner`]; tests count runs with their own.
#[async_trait::async_trait(?Send)]
pub trait JobRunner {
    /// Runs `job` against `app`; a run that repeats work should stop repeating once `stopping`
    /// is set (SIGTERM arrived).
    async fn run(&self, app: &App, job: JobName, stopping: &AtomicBool) -> anyhow::Result<()>;
}

/// How long one `run_pipeline` run keeps stepping while each step moves work. A backlog drains at
/// the pipeline's own speed rather than one step (up to a claim batch of segments) per tick, and
/// the bound lets the other jobs due and a stop request in between runs.
pub const PIPELINE_BURST: std::time::Duration = std::time::Duration::from_secs(30);

/// The production jobs: the pipeline's own functions.
pub struct PipelineRunner;

#[async_trait::async_trait(?Send)]
impl JobRunner for PipelineRunner {
    async fn run(&self, app: &App, job: JobName, stopping: &AtomicBool) -> anyhow::Result<()> {
        match job {
            JobName::RunPipeline => {
                let started = std::time::Instant::now();
                loop {
                    let report = pipeline::run_once(app).await?;
                    if report.progressed() {
                        tracing::info!(report = %serde_json::to_string(&report)?, "Pipeline step moved work.");
                    }
                    // A step that moved work is followed at once by another (a results download
                    // still open reads on, a backlog of closed segments keeps being planned), each
                    // step bounded, so every lane keeps moving beside the others.
                    let again = (report.progressed() || pipeline::downloads_in_flight(app))
                        && !stopping.load(Ordering::SeqCst)
                        && started.elapsed() < PIPELINE_BURST;
                    if !again {
                        // Search indexing after the pass, never in front of it: a backlog is caught
                        // up a pass at a time in the daemon's idle time.
                        let n_indexed = pipeline::index_turns_pass(app).await?;
                        if n_indexed > 0 {
                            tracing::info!(n_indexed, "Embedded stored turns for search.");
                        }
                        break;
                    }
                }
            }
            JobName::CloseIdleSegments => {
                let n_closed = app
                    .store
                    .messages()
                    .close_idle_segments(app.clock.now(), app.config.idle_timeout())
                    .await?;
                if n_closed > 0 {
                    tracing::info!(n_closed, "Closed idle segments.");
                }
            }
            JobName::Sweep => {
                let report = pipeline::sweep(app).await?;
                tracing::info!(report = %serde_json::to_string(&report)?, "Sweep finished.");
            }
            JobName::Retention => {
                let n_dropped = pipeline::apply_retention(app).await?;
                tracing::info!(n_dropped, "Retention dropped raw outputs past their days.");
            }
            JobName::Scoring => {
                let report = pipeline::score(app).await?;
                tracing::info!(report = %serde_json::to_string(&report)?, "Scoring finished.");
            }
            JobName::Relationships
            | JobName::Summaries
            | JobName::Consolidation
            | JobName::Refinement
            | JobName::EntityGc => {
                let stage = job.stage().expect("these jobs are stages");
                if !app.config.postprocess.enabled {
                    tracing::info!(
                        stage = stage.as_str(),
                        "Post-processing is disabled ([postprocess] enabled = false); skipped."
                    );
                    return Ok(());
                }
                // The job only plans; `run_pipeline` executes and applies, like any request.
                let plan = memsift_engine::stages::plan_stage(app, stage, None, false).await?;
                tracing::info!(plan = %serde_json::to_string(&plan)?, "Post-processing stage planned.");
            }
        }
        Ok(())
    }
}

/// One run of one job.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct JobRun {
    /// The job.
    pub job: JobName,
    /// The tick it ran for.
    pub tick: DateTime<Utc>,
    /// `None` when it succeeded, else why not (the tick is spent either way: the next tick retries).
    pub error: Option<String>,
}

/// The daemon's decision logic, driven by whatever calls [`Daemon::tick`].
pub struct Daemon {
    app: App,
    schedules: Vec<Schedule>,
    runner: Arc<dyn JobRunner>,
    lease: Duration,
    /// Set on SIGTERM: a tick in flight finishes its current job but claims no further one.
    stopping: Arc<AtomicBool>,
    /// The last tick this daemon ran of each job not claimed in the database (`run_pipeline`).
    own_ticks: std::sync::Mutex<std::collections::HashMap<JobName, DateTime<Utc>>>,
}

impl Daemon {
    /// A daemon over `app`; fails if a configured cron expression does not parse.
    pub fn new(app: App, runner: Arc<dyn JobRunner>) -> Result<Daemon, ScheduleError> {
        let schedules = parse_schedules(&app.config.schedules)?;
        let lease = app.config.schedule_lease();
        Ok(Daemon {
            app,
            schedules,
            runner,
            lease,
            stopping: Arc::new(AtomicBool::new(false)),
            own_ticks: std::sync::Mutex::default(),
        })
    }

    /// Stops claiming: the job running now may finish, no other job of any tick starts.
    pub fn stop_claiming(&self) {
        self.stopping.store(true, Ordering::SeqCst);
    }

    /// The flag [`Daemon::stop_claiming`] sets, for whoever must stop the daemon from elsewhere
    /// (a test stopping it from inside a running job, the way SIGTERM arrives mid-run).
    pub fn stop_flag(&self) -> Arc<AtomicBool> {
        Arc::clone(&self.stopping)
    }

    /// The application the jobs run against.
    pub fn app(&self) -> &App {
        &self.app
    }

    /// The parsed schedules.
    pub fn schedules(&self) -> &[Schedule] {
        &self.schedules
    }

    /// Runs every job whose latest tick at or before `now` this daemon can claim, one after the
    /// other; returns what ran. Calling it again for the same `now` runs nothing. Then releases
    /// the embedder if it went unused for `[embeddings] idle_unload_secs`: every tick looks, so
    /// an idle daemon gives the model's memory back within a tick of the setting.
    pub async fn tick(&self, now: DateTime<Utc>) -> anyhow::Result<Vec<JobRun>> {
        let mut runs = Vec::new();
        for schedule in &self.schedules {
            if self.stopping.load(Ordering::SeqCst) {
                break;
            }
            if let Some(tick) = self.claim(schedule.job, now).await? {
                runs.push(self.run_claimed(schedule.job, tick).await?);
            }
        }
        self.app.vectors.unload_if_idle(self.app.clock.now());
        Ok(runs)
    }

    /// Claims `job`'s latest tick at or before `now`; `Some(tick)` if this daemon must run it.
    ///
    /// The lease is measured from the clock at claim time, not from `now`, so a tick handled late
    /// still holds its job for the full lease. After [`Daemon::stop_claiming`] it claims nothing.
    /// A job not claimed in the database is this daemon's to run once per tick.
    pub async fn claim(&self, job: JobName, now: DateTime<Utc>) -> anyhow::Result<Option<DateTime<Utc>>> {
        if self.stopping.load(Ordering::SeqCst) {
            return Ok(None);
        }
        let Some(schedule) = self.schedules.iter().find(|schedule| schedule.job == job) else {
            return Ok(None);
        };
        let Some(tick) = schedule.tick_at_or_before(now) else {
            return Ok(None);
        };
        if !job.claimed_in_database() {
            // A std mutex: never held across an await.
            let mut own_ticks = self.own_ticks.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            let fresh = own_ticks.get(&job).is_none_or(|last| tick > *last);
            if fresh {
                own_ticks.insert(job, tick);
            }
            return Ok(fresh.then_some(tick));
        }
        let won = self
            .app
            .store
            .schedules()
            .claim_schedule(
                job.as_str(),
                &self.app.worker_id,
                tick,
                self.app.clock.now(),
                self.lease,
            )
            .await
            .with_context(|| format!("cannot claim job {}", job.as_str()))?;
        Ok(won.then_some(tick))
    }

    /// Runs a job this daemon claimed, then releases its lease. A failure or a panic in the job
    /// is recorded on the run and logged; it does not stop the daemon.
    pub async fn run_claimed(&self, job: JobName, tick: DateTime<Utc>) -> anyhow::Result<JobRun> {
        let started = std::time::Instant::now();
        let error = match crate::panics::catch_panic(self.runner.run(&self.app, job, &self.stopping)).await {
            Ok(Ok(())) => None,
            Ok(Err(error)) => Some(format!("{error:#}")),
            Err(panic) => Some(format!("panicked: {panic}")),
        };
        let elapsed_ms = started.elapsed().as_millis() as u64;
        match &error {
            // run_pipeline runs every 30 s: its runs are debug noise unless they move work.
            None => tracing::debug!(job = job.as_str(), %tick, elapsed_ms, "Job ran."),
            Some(error) => {
                tracing::warn!(job = job.as_str(), %tick, elapsed_ms, error = %error, "Job failed; the next tick retries.")
            }
        }
        self.release(job).await?;
        Ok(JobRun { job, tick, error })
    }

    /// Releases this daemon's lease on `job` (after a run, or when a run is abandoned at shutdown).
    pub async fn release(&self, job: JobName) -> anyhow::Result<()> {
        if !job.claimed_in_database() {
            return Ok(());
        }
        self.app
            .store
            .schedules()
            .finish_schedule(job.as_str(), &self.app.worker_id)
            .await
            .with_context(|| format!("cannot release job {}", job.as_str()))?;
        Ok(())
    }
}

/// Sends a state to systemd when started with `NOTIFY_SOCKET` (a no-op otherwise).
fn notify(state: &[sd_notify::NotifyState<'_>]) {
    if let Err(error) = sd_notify::notify(state) {
        tracing::warn!(error = %error, "Cannot notify systemd.");
    }
}

type Step<'a> = Pin<Box<dyn Future<Output = anyhow::Result<Vec<JobRun>>> + 'a>>;

/// Waits for the step in flight; pends forever when there is none, so `select!` can poll it always.
async fn in_flight(step: &mut Option<Step<'_>>) -> anyhow::Result<Vec<JobRun>> {
    match step {
        Some(step) => step.await,
        None => std::future::pending().await,
    }
}

/// `memsift daemon` end to end: the jobs and, with an API token, the HTTP API and admin pages
/// beside them, until `signals` asks to stop; the API stops once the jobs have drained. The app's
/// store is closed before it returns, which checkpoints SQLite's WAL.
pub async fn run(app: App, token: Option<ApiToken>, mut signals: Signals) -> anyhow::Result<()> {
    // Opening the app migrated the store and checked every tier's route; the schedules are
    // checked here, before READY=1 tells systemd the daemon is up.
    let daemon = Daemon::new(app.clone(), Arc::new(PipelineRunner))?;
    // Checked, not loaded: the model is loaded when work first needs it and released when idle.
    app.vectors.check()?;
    let api = match token {
        Some(token) => {
            let listen = &app.config.api.listen;
            let listener = tokio::net::TcpListener::bind(listen)
                .await
                .with_context(|| format!("daemon: cannot listen on {listen}; set [api] listen"))?;
            tracing::info!(address = %listener.local_addr()?, "HTTP API and admin pages listening.");
            Some((token, listener))
        }
        None => None,
    };
    let (stop_api, api_stopped) = tokio::sync::oneshot::channel::<()>();
    let jobs = async {
        let result = serve(&daemon, &mut signals).await;
        let _ = stop_api.send(());
        result
    };
    let http = async {
        match api {
            Some((token, listener)) => crate::api::serve(app.clone(), token, listener, async {
                let _ = api_stopped.await;
            })
            .await
            .context("daemon: the HTTP server failed"),
            None => Ok(()),
        }
    };
    let (result, http_result) = tokio::join!(jobs, http);
    app.store.close().await;
    result.and(http_result)
}

/// Runs the jobs until `signals` asks to stop (SIGTERM or SIGINT in the binary), then drains and
/// returns.
///
/// Order of events: cron triggers registered, signal handlers installed, `READY=1` (the store is
/// open and migrated and the configuration checked before this is called), one catch-up tick,
/// then a tick per trigger. On a signal: `STOPPING=1`, the scheduler stops firing, and the step in
/// flight gets `daemon.drain_timeout_secs` to finish before it is dropped (safe: every step is a
/// committed state machine, and its claims expire) and its leases released.
pub async fn serve(daemon: &Daemon, signals: &mut Signals) -> anyhow::Result<()> {
    let app = daemon.app();
    let (wake_tx, mut wake_rx) = mpsc::unbounded_channel::<JobName>();
    let mut scheduler = tokio_cron_scheduler::JobScheduler::new()
        .await
        .context("cannot start the cron scheduler")?;
    for schedule in daemon.schedules() {
        let job = schedule.job;
        let wake_tx = wake_tx.clone();
        let trigger = tokio_cron_scheduler::Job::new_async(schedule.expression.as_str(), move |_id, _scheduler| {
            // The trigger only wakes the main loop; a closed channel means the daemon is stopping.
            let _ = wake_tx.send(job);
            Box::pin(async {})
        })
        .with_context(|| format!("cannot schedule job {}", job.as_str()))?;
        scheduler
            .add(trigger)
            .await
            .with_context(|| format!("cannot schedule job {}", job.as_str()))?;
    }
    drop(wake_tx);
    scheduler.start().await.context("cannot start the cron scheduler")?;
    // systemd sets WATCHDOG_USEC when the unit has WatchdogSec; pinging at half the interval
    // leaves a whole half for one slow wake-up of this loop.
    let watchdog = sd_notify::watchdog_enabled()
        .map(|interval| interval / 2)
        .filter(|half| !half.is_zero());
    let mut watchdog_timer = tokio::time::interval(watchdog.unwrap_or(std::time::Duration::from_secs(3600)));
    notify(&[sd_notify::NotifyState::Ready, sd_notify::NotifyState::Status("running")]);
    tracing::info!(
        worker_id = %app.worker_id,
        watchdog_ms = watchdog.map(|interval| interval.as_millis() as u64),
        "Daemon ready."
    );

    // The first tick is the start-up catch-up: any job whose latest tick is unclaimed runs now.
    let mut step: Option<Step<'_>> = Some(Box::pin(daemon.tick(app.clock.now())));
    let mut step_started = std::time::Instant::now();
    // A step running past its lease is taken to be hung (another daemon may already be taking
    // its job over): the pings stop, so systemd's watchdog restarts this process.
    let hung_after = std::time::Duration::from_secs(app.config.schedules.lease_secs);
    // A trigger that fires while a step runs is remembered, not queued: one later tick covers it.
    let mut woken = false;
    let signal_name = loop {
        tokio::select! {
            _ = watchdog_timer.tick(), if watchdog.is_some() => {
                if step.is_some() && step_started.elapsed() > hung_after {
                    tracing::error!(
                        running_secs = step_started.elapsed().as_secs(),
                        "A step has run past its lease; withholding the watchdog ping so systemd restarts the daemon."
                    );
                } else {
                    notify(&[sd_notify::NotifyState::Watchdog]);
                }
            }
            name = signals.next() => break name,
            Some(_) = wake_rx.recv() => {
                if step.is_none() {
                    step = Some(Box::pin(daemon.tick(app.clock.now())));
                    step_started = std::time::Instant::now();
                } else {
                    woken = true;
                }
            }
            result = in_flight(&mut step) => {
                step = None;
                log_step(result);
                if std::mem::take(&mut woken) {
                    step = Some(Box::pin(daemon.tick(app.clock.now())));
                    step_started = std::time::Instant::now();
                }
            }
        }
    };

    let stop_started = std::time::Instant::now();
    daemon.stop_claiming();
    notify(&[
        sd_notify::NotifyState::Stopping,
        sd_notify::NotifyState::Status("draining"),
    ]);
    tracing::info!(
        signal = signal_name,
        in_flight = step.is_some(),
        "Stopping: no new runs; draining the step in flight."
    );
    if let Err(error) = scheduler.shutdown().await {
        tracing::warn!(error = %error, "Cannot stop the cron scheduler; stopping anyway.");
    }
    wake_rx.close();
    let drain = app.config.drain_timeout();
    let deadline = tokio::time::sleep(drain);
    tokio::pin!(deadline);
    let abandoned = step.is_some()
        && loop {
            tokio::select! {
                _ = watchdog_timer.tick(), if watchdog.is_some() => notify(&[sd_notify::NotifyState::Watchdog]),
                result = in_flight(&mut step) => {
                    log_step(result);
                    break false;
                }
                _ = &mut deadline => break true,
                // A second signal is the operator insisting: abandon now.
                _ = signals.next() => break true,
            }
        };
    if abandoned {
        // Dropping the step cancels it at its current await point; everything it committed stays.
        drop(step.take());
        for job in JobName::ALL {
            if let Err(error) = daemon.release(job).await {
                tracing::warn!(error = %format!("{error:#}"), "Cannot release a lease; it expires on its own.");
            }
        }
    }
    tracing::info!(
        abandoned,
        elapsed_ms = stop_started.elapsed().as_millis() as u64,
        "Daemon stopped."
    );
    Ok(())
}

fn log_step(result: anyhow::Result<Vec<JobRun>>) {
    // Each run logged itself; only a tick that could not claim is left to report.
    if let Err(error) = result {
        // The store was unreachable for a claim; the next trigger tries again.
        tracing::warn!(error = %format!("{error:#}"), "A tick could not claim its jobs.");
    }
}
