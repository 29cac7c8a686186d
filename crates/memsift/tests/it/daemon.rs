//! The daemon's schedule logic driven tick by tick with a hand-moved clock (invariant 11): each
//! tick of a bookkeeping job runs once across daemons, a slow run is not overlapped, a daemon that
//! was down catches up once, every daemon runs `run_pipeline` on its own ticks (its work is claimed
//! item by item), and the jobs are the pipeline's.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use chrono::{DateTime, Duration, Utc};
use memsift::daemon::{Daemon, JobName, JobRun, JobRunner, PipelineRunner};
use memsift_core::config::Config;
use memsift_engine::app::App;

use crate::helpers::{TestApp, app_on, installed_model_dir, line, t0};

/// Counts runs per (job, tick) and counts a run that overlaps another run of the same job (of the
/// same daemon, for `run_pipeline`, which every daemon runs).
#[derive(Default)]
struct CountingRunner {
    // A std mutex: it is never held across an await.
    state: Mutex<CountingState>,
}

#[derive(Default)]
struct CountingState {
    runs: Vec<(String, JobName, DateTime<Utc>)>,
    in_flight: BTreeMap<(JobName, String), u32>,
    n_overlaps: u32,
}

#[async_trait::async_trait(?Send)]
impl JobRunner for CountingRunner {
    async fn run(&self, app: &App, job: JobName, _stopping: &AtomicBool) -> anyhow::Result<()> {
        let key = if job.claimed_in_database() {
            (job, String::new())
        } else {
            (job, app.worker_id.clone())
        };
        {
            let mut state = self.state.lock().unwrap();
            state.runs.push((app.worker_id.clone(), job, app.clock.now()));
            let n_running = state.in_flight.entry(key.clone()).or_default();
            *n_running += 1;
            if *n_running > 1 {
                state.n_overlaps += 1;
            }
        }
        // Give the other daemon's tick, polled on the same task, a chance to interleave mid-run.
        tokio::task::yield_now().await;
        *self.state.lock().unwrap().in_flight.get_mut(&key).unwrap() -= 1;
        Ok(())
    }
}

fn at(text: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(text).unwrap().with_timezone(&Utc)
}

fn ran(runs: &[JobRun]) -> Vec<(JobName, DateTime<Utc>)> {
    runs.iter().map(|run| (run.job, run.tick)).collect()
}

#[tokio::test]
async fn two_daemons_on_postgres_run_each_tick_exactly_once_through_a_simulated_day() {
    let test = TestApp::postgres().await;
    let runner = Arc::new(CountingRunner::default());
    let a = Daemon::new(test.app.clone(), runner.clone()).unwrap();
    let b = Daemon::new(test.second_daemon("daemon-b"), runner.clone()).unwrap();
    let mut claimed: Vec<(JobName, DateTime<Utc>)> = Vec::new();
    // run_pipeline is every daemon's own: each runs it for each tick it wakes for.
    let mut pipeline_ticks: BTreeMap<&str, Vec<DateTime<Utc>>> = BTreeMap::new();
    let mut want_pipeline_ticks: BTreeMap<&str, Vec<DateTime<Utc>>> = BTreeMap::new();
    let n_steps = 24 * 60 * 2;
    for step_idx in 0..=n_steps {
        let now = t0() + Duration::seconds(30 * step_idx);
        test.clock.set(now);
        // Mostly both daemons race for every tick; now and then one of them is busy elsewhere
        // and the other must cover the tick alone.
        let (runs_a, runs_b) = match (step_idx % 7, step_idx % 13) {
            (0, _) => (None, Some(b.tick(now).await.unwrap())),
            (_, 0) => (Some(a.tick(now).await.unwrap()), None),
            _ => {
                let (runs_a, runs_b) = tokio::join!(a.tick(now), b.tick(now));
                (Some(runs_a.unwrap()), Some(runs_b.unwrap()))
            }
        };
        for (worker, runs) in [("test-worker", runs_a), ("daemon-b", runs_b)] {
            let Some(runs) = runs else { continue };
            want_pipeline_ticks.entry(worker).or_default().push(now);
            for (job, tick) in ran(&runs) {
                match job {
                    JobName::RunPipeline => pipeline_ticks.entry(worker).or_default().push(tick),
                    _ => claimed.push((job, tick)),
                }
            }
        }
    }
    assert_eq!(
        pipeline_ticks, want_pipeline_ticks,
        "each daemon runs run_pipeline once for every tick it wakes for, whatever the other does"
    );
    let n_claimed = claimed.len();
    claimed.sort();
    claimed.dedup();
    assert_eq!(claimed.len(), n_claimed, "a tick ran twice");

    let expected = |job: JobName, ticks: Vec<DateTime<Utc>>| ticks.into_iter().map(move |tick| (job, tick));
    let mut want: Vec<(JobName, DateTime<Utc>)> = expected(
        JobName::CloseIdleSegments,
        (0..=24 * 12).map(|idx| t0() + Duration::minutes(5 * idx)).collect(),
    )
    // t0 is 10:00: the start-up catch-up runs the 06:00 sweep, then every six hours.
    .chain(expected(
        JobName::Sweep,
        [
            "2026-03-01T06:00:00Z",
            "2026-03-01T12:00:00Z",
            "2026-03-01T18:00:00Z",
            "2026-03-02T00:00:00Z",
            "2026-03-02T06:00:00Z",
        ]
        .into_iter()
        .map(at)
        .collect(),
    ))
    // Retention runs daily at 03:30: the catch-up runs that morning's, then the next one.
    .chain(expected(
        JobName::Retention,
        ["2026-03-01T03:30:00Z", "2026-03-02T03:30:00Z"]
            .into_iter()
            .map(at)
            .collect(),
    ))
    // Scoring runs daily at 04:15, likewise.
    .chain(expected(
        JobName::Scoring,
        ["2026-03-01T04:15:00Z", "2026-03-02T04:15:00Z"]
            .into_iter()
            .map(at)
            .collect(),
    ))
    // Relationship classification daily at 04:30, likewise.
    .chain(expected(
        JobName::Relationships,
        ["2026-03-01T04:30:00Z", "2026-03-02T04:30:00Z"]
            .into_iter()
            .map(at)
            .collect(),
    ))
    // Summaries hourly at :10: the catch-up runs 09:10, then 10:10 to 09:10 the next day.
    .chain(expected(
        JobName::Summaries,
        (0..=24)
            .map(|hour| at("2026-03-01T09:10:00Z") + Duration::hours(hour))
            .collect(),
    ))
    // 2026-03-01 is a Sunday: the weekly stages catch up that morning's run and are not due again
    // within the day, and entity GC (monthly, on the 1st) catches up the same way.
    .chain(expected(JobName::Consolidation, vec![at("2026-03-01T05:00:00Z")]))
    .chain(expected(JobName::Refinement, vec![at("2026-03-01T05:30:00Z")]))
    .chain(expected(JobName::EntityGc, vec![at("2026-03-01T06:00:00Z")]))
    .collect();
    want.sort();
    assert_eq!(claimed.len(), want.len());
    assert_eq!(claimed, want);

    {
        let state = runner.state.lock().unwrap();
        let n_pipeline_runs: usize = want_pipeline_ticks.values().map(Vec::len).sum();
        assert_eq!(
            state.runs.len(),
            want.len() + n_pipeline_runs,
            "every claimed tick ran, and nothing else did"
        );
        assert_eq!(state.n_overlaps, 0);
        for worker in ["test-worker", "daemon-b"] {
            assert!(
                state
                    .runs
                    .iter()
                    .any(|(owner, job, _)| owner == worker && job.claimed_in_database()),
                "{worker} never won a tick"
            );
        }
    }
    let rows = test.app.store.schedule_rows().await.unwrap();
    let last: Vec<(String, Option<DateTime<Utc>>, Option<String>)> = rows
        .into_iter()
        .map(|row| (row.name, row.last_fired_at, row.lease_owner))
        .collect();
    let end = t0() + Duration::hours(24);
    assert_eq!(
        last,
        vec![
            ("close_idle_segments".to_owned(), Some(end), None),
            ("consolidation".to_owned(), Some(at("2026-03-01T05:00:00Z")), None),
            ("entity_gc".to_owned(), Some(at("2026-03-01T06:00:00Z")), None),
            ("refinement".to_owned(), Some(at("2026-03-01T05:30:00Z")), None),
            ("relationships".to_owned(), Some(at("2026-03-02T04:30:00Z")), None),
            ("retention".to_owned(), Some(at("2026-03-02T03:30:00Z")), None),
            ("scoring".to_owned(), Some(at("2026-03-02T04:15:00Z")), None),
            ("summaries".to_owned(), Some(at("2026-03-02T09:10:00Z")), None),
            ("sweep".to_owned(), Some(at("2026-03-02T06:00:00Z")), None),
        ]
    );
    test.finish().await;
}

#[tokio::test]
async fn a_daemon_that_was_down_catches_up_once_at_start_up() {
    let test = TestApp::postgres().await;
    let runner = Arc::new(CountingRunner::default());
    let first = Daemon::new(test.app.clone(), runner.clone()).unwrap();
    assert_eq!(
        first.tick(t0()).await.unwrap().len(),
        JobName::ALL.len(),
        "a new database runs each job once at start-up"
    );
    // Every daemon is down for seven hours (ticks at 10:00:30 … 16:59:30, and the 12:00 sweep,
    // are missed). Two daemons start together at 17:00:10.
    let restart = t0() + Duration::hours(7) + Duration::seconds(10);
    test.clock.set(restart);
    let b = Daemon::new(test.second_daemon("daemon-b"), runner.clone()).unwrap();
    let c = Daemon::new(test.second_daemon("daemon-c"), runner.clone()).unwrap();
    let (runs_b, runs_c) = tokio::join!(b.tick(restart), c.tick(restart));
    let mut caught_up = [ran(&runs_b.unwrap()), ran(&runs_c.unwrap())].concat();
    caught_up.sort();
    assert_eq!(
        caught_up,
        vec![
            (JobName::RunPipeline, at("2026-03-01T17:00:00Z")),
            (JobName::RunPipeline, at("2026-03-01T17:00:00Z")),
            (JobName::CloseIdleSegments, at("2026-03-01T17:00:00Z")),
            (JobName::Sweep, at("2026-03-01T12:00:00Z")),
            (JobName::Summaries, at("2026-03-01T16:10:00Z")),
        ],
        "each overdue job runs once, for its latest tick, not once per missed tick (run_pipeline once on each daemon)"
    );
    // The catch-up is not repeated by the next wake-up of either daemon before the next tick.
    let a_bit_later = restart + Duration::seconds(15);
    test.clock.set(a_bit_later);
    assert!(b.tick(a_bit_later).await.unwrap().is_empty());
    assert!(c.tick(a_bit_later).await.unwrap().is_empty());
    // The daily, weekly and monthly jobs' latest ticks were run at start-up, so only four jobs
    // were overdue (one of them run_pipeline, run by both daemons).
    assert_eq!(runner.state.lock().unwrap().runs.len(), JobName::ALL.len() + 5);
    test.finish().await;
}

#[tokio::test]
async fn a_slow_run_holds_its_job_against_the_next_tick_of_another_daemon() {
    let test = TestApp::postgres().await;
    let runner = Arc::new(CountingRunner::default());
    let a = Daemon::new(test.app.clone(), runner.clone()).unwrap();
    let b = Daemon::new(test.second_daemon("daemon-b"), runner.clone()).unwrap();
    let job = JobName::CloseIdleSegments;
    let runs_of = |runs: &[JobRun]| -> Vec<(JobName, DateTime<Utc>)> {
        ran(runs).into_iter().filter(|(ran_job, _)| *ran_job == job).collect()
    };
    // Start-up: a runs everything once.
    assert_eq!(a.tick(t0()).await.unwrap().len(), JobName::ALL.len());
    // At 10:05 a claims close_idle_segments and its run takes minutes.
    let next = t0() + Duration::minutes(5);
    test.clock.set(next);
    assert_eq!(a.claim(job, next).await.unwrap(), Some(next));
    // The 10:10 tick arrives while a's run is in flight: b must not start a second run.
    let during = t0() + Duration::minutes(10);
    test.clock.set(during);
    assert!(
        runs_of(&b.tick(during).await.unwrap()).is_empty(),
        "b overlapped a's run"
    );
    // a's run ends; b's next wake-up runs the tick it could not run before.
    test.clock.set(during + Duration::seconds(20));
    a.run_claimed(job, next).await.unwrap();
    assert_eq!(
        ran(&b.tick(during + Duration::seconds(20)).await.unwrap()),
        vec![(job, during)],
        "only the tick b could not run (b ran its own run_pipeline tick already)"
    );
    // A daemon that dies mid-run blocks its job only until the lease (15 minutes) runs out.
    let stuck = during + Duration::minutes(5);
    test.clock.set(stuck);
    assert_eq!(a.claim(job, stuck).await.unwrap(), Some(stuck));
    let before_expiry = stuck + Duration::minutes(15) - Duration::seconds(10);
    test.clock.set(before_expiry);
    assert!(runs_of(&b.tick(before_expiry).await.unwrap()).is_empty());
    let after_expiry = stuck + Duration::minutes(15);
    test.clock.set(after_expiry);
    assert_eq!(runs_of(&b.tick(after_expiry).await.unwrap()), vec![(job, after_expiry)]);
    assert_eq!(runner.state.lock().unwrap().n_overlaps, 0);
    test.finish().await;
}

#[tokio::test]
async fn daemons_waking_at_different_instants_of_one_second_name_the_same_tick() {
    let test = TestApp::postgres().await;
    let runner = Arc::new(CountingRunner::default());
    let a = Daemon::new(test.app.clone(), runner.clone()).unwrap();
    let b = Daemon::new(test.second_daemon("daemon-b"), runner.clone()).unwrap();
    // Real triggers fire a little after the tick, each daemon at its own instant.
    let early = t0() + Duration::milliseconds(300_120);
    let late = t0() + Duration::milliseconds(300_870);
    test.clock.set(early);
    let runs_a = a.tick(early).await.unwrap();
    test.clock.set(late);
    let runs_b = b.tick(late).await.unwrap();
    let tick = t0() + Duration::minutes(5);
    assert!(ran(&runs_a).contains(&(JobName::CloseIdleSegments, tick)), "{runs_a:?}");
    assert!(
        !ran(&runs_b).iter().any(|(job, _)| *job == JobName::CloseIdleSegments),
        "the 10:05:00 tick ran twice: {runs_b:?}"
    );
    // Each daemon ran its own run_pipeline for that tick, once.
    for runs in [&runs_a, &runs_b] {
        let pipeline: Vec<_> = ran(runs)
            .into_iter()
            .filter(|(job, _)| *job == JobName::RunPipeline)
            .collect();
        assert_eq!(pipeline, vec![(JobName::RunPipeline, tick)]);
    }
    test.finish().await;
}

/// Fails or panics on the job it is told to, and counts the rest.
struct FailingRunner {
    job: JobName,
    panic: bool,
    n_runs: Mutex<u32>,
}

#[async_trait::async_trait(?Send)]
impl JobRunner for FailingRunner {
    async fn run(&self, _app: &App, job: JobName, _stopping: &AtomicBool) -> anyhow::Result<()> {
        *self.n_runs.lock().unwrap() += 1;
        if job == self.job {
            if self.panic {
                panic!("a bug in {}", job.as_str());
            }
            anyhow::bail!("the provider is down");
        }
        Ok(())
    }
}

#[tokio::test]
async fn a_failing_or_panicking_job_releases_its_lease_and_the_daemon_goes_on() {
    for panic in [false, true] {
        let test = TestApp::sqlite().await;
        let runner = Arc::new(FailingRunner {
            job: JobName::CloseIdleSegments,
            panic,
            n_runs: Mutex::new(0),
        });
        let daemon = Daemon::new(test.app.clone(), runner.clone()).unwrap();
        let runs = daemon.tick(t0()).await.unwrap();
        assert_eq!(runs.len(), JobName::ALL.len(), "the other jobs still ran");
        let error = runs[1].error.as_deref().unwrap();
        let want = if panic {
            "panicked: a bug in close_idle_segments"
        } else {
            "the provider is down"
        };
        assert_eq!(error, want);
        assert_eq!(runs.iter().filter(|run| run.error.is_some()).count(), 1);
        let rows = test.app.store.schedule_rows().await.unwrap();
        assert!(rows.iter().all(|row| row.lease_owner.is_none()), "{rows:?}");
        // The failed tick is spent; the next one runs again.
        let next = t0() + Duration::minutes(5);
        test.clock.set(next);
        assert_eq!(
            ran(&daemon.tick(next).await.unwrap()),
            vec![(JobName::RunPipeline, next), (JobName::CloseIdleSegments, next)]
        );
        // Every job once at start-up, then run_pipeline and close_idle_segments once more.
        assert_eq!(*runner.n_runs.lock().unwrap() as usize, JobName::ALL.len() + 2);
        test.finish().await;
    }
}

/// Sets the daemon's stop flag while running its first job, as SIGTERM would arrive mid-run.
struct StopMidRun {
    ran: Mutex<Vec<JobName>>,
}

#[async_trait::async_trait(?Send)]
impl JobRunner for StopMidRun {
    async fn run(&self, _app: &App, job: JobName, stopping: &AtomicBool) -> anyhow::Result<()> {
        self.ran.lock().unwrap().push(job);
        stopping.store(true, Ordering::SeqCst);
        Ok(())
    }
}

#[tokio::test]
async fn a_stop_during_a_tick_lets_the_running_job_finish_and_starts_no_other() {
    let test = TestApp::sqlite().await;
    let runner = Arc::new(StopMidRun {
        ran: Mutex::new(Vec::new()),
    });
    let daemon = Daemon::new(test.app.clone(), runner.clone()).unwrap();
    let runs = daemon.tick(t0()).await.unwrap();
    assert_eq!(ran(&runs), vec![(JobName::RunPipeline, t0())]);
    assert_eq!(*runner.ran.lock().unwrap(), vec![JobName::RunPipeline]);
    // run_pipeline is never claimed in the database, and the jobs after it were never claimed.
    let rows = test.app.store.schedule_rows().await.unwrap();
    assert!(rows.is_empty(), "{rows:?}");
    assert!(daemon.stop_flag().load(Ordering::SeqCst));
    // A later tick claims nothing either.
    let later = t0() + Duration::minutes(5);
    test.clock.set(later);
    assert!(daemon.tick(later).await.unwrap().is_empty());
    test.finish().await;
}

#[tokio::test]
async fn the_daemon_jobs_extract_closed_segments_and_close_idle_ones() {
    let test = TestApp::sqlite().await;
    // The pipeline step closes idle segments too; running it only once a year (the start-up
    // catch-up) shows what close_idle_segments does on its own.
    let config = Config::from_layers(Some(("test.toml", "[schedules]\nrun_pipeline = \"0 0 0 1 1 *\"\n"))).unwrap();
    let daemon = Daemon::new(
        app_on(&test.app.store, &test.clock, config, "daemon-a"),
        Arc::new(PipelineRunner),
    )
    .unwrap();
    let chat = [
        line(
            "ana",
            "c1",
            0,
            "user",
            "I live in Lisbon and I have a dog named Rex.",
            false,
        ),
        line("ana", "c1", 1, "assistant", "Nice! Rex is a good name.", true),
        line("bo", "c2", 0, "user", "I'm allergic to peanuts.", false),
    ]
    .concat();
    test.import("chat.jsonl", &chat).await.unwrap();
    // The start-up tick runs the pipeline: ana's closed segment is extracted; bo's is still open.
    let runs = daemon.tick(t0()).await.unwrap();
    assert!(runs.iter().all(|run| run.error.is_none()), "{runs:?}");
    assert_eq!(
        test.app.store.listing().list_memories("ana", None).await.unwrap().len(),
        2
    );
    let bo_status = || async {
        let rows = test
            .app
            .store
            .listing()
            .list_segments(Some("bo"), None, None)
            .await
            .unwrap();
        rows.into_iter().map(|row| row.status).collect::<Vec<_>>()
    };
    assert_eq!(bo_status().await, vec!["open"]);
    // At the 10:55 tick bo's conversation has been quiet for 55 minutes: not yet idle.
    let quiet = t0() + Duration::minutes(55);
    test.clock.set(quiet);
    // (The hourly summaries job's 10:10 tick falls in between.)
    assert_eq!(
        ran(&daemon.tick(quiet).await.unwrap()),
        vec![
            (JobName::CloseIdleSegments, quiet),
            (JobName::Summaries, t0() + Duration::minutes(10))
        ]
    );
    assert_eq!(bo_status().await, vec!["open"]);
    // At the 11:00 tick it is (60 minutes), and close_idle_segments closes it for the next
    // pipeline step.
    let idle = t0() + Duration::minutes(60);
    test.clock.set(idle);
    assert_eq!(
        ran(&daemon.tick(idle).await.unwrap()),
        vec![(JobName::CloseIdleSegments, idle)]
    );
    assert_eq!(bo_status().await, vec!["closed"]);
    test.finish().await;
}

#[tokio::test]
async fn a_cron_expression_that_does_not_parse_stops_start_up() {
    let test = TestApp::sqlite().await;
    let config = Config::from_layers(Some(("test.toml", "[schedules]\nsweep = \"every six hours\"\n"))).unwrap();
    let app = app_on(&test.app.store, &test.clock, config, "daemon-x");
    let error = Daemon::new(app, Arc::new(PipelineRunner)).err().unwrap().to_string();
    assert!(
        error.starts_with("config: schedules.sweep = \"every six hours\" is not a usable cron expression"),
        "{error}"
    );
    test.finish().await;
}

#[test]
fn a_cron_expression_that_never_fires_is_refused() {
    // 30 February and 31 April parse, and never come.
    for never in ["0 0 0 30 2 *", "0 0 12 31 4 *"] {
        let overlay = format!("[schedules]\nentity_gc = \"{never}\"\n");
        let config = Config::from_layers(Some(("test.toml", &overlay))).unwrap();
        let error = memsift::daemon::parse_schedules(&config.schedules)
            .unwrap_err()
            .to_string();
        assert!(
            error.starts_with(&format!(
                "config: schedules.entity_gc = \"{never}\" is not a usable cron expression: it never fires"
            )),
            "{error}"
        );
    }
    // Once every four years still fires.
    let leap = Config::from_layers(Some(("test.toml", "[schedules]\nentity_gc = \"0 0 0 29 2 *\"\n"))).unwrap();
    assert!(memsift::daemon::parse_schedules(&leap.schedules).is_ok());
}

/// Receives notify messages until one contains `want`; the socket's read timeout bounds the wait.
fn await_notify(socket: &std::os::unix::net::UnixDatagram, want: &str, seen: &mut Vec<String>) {
    let mut buffer = [0u8; 4096];
    loop {
        let n_bytes = socket
            .recv(&mut buffer)
            .unwrap_or_else(|error| panic!("no {want} from the daemon ({error}); seen {seen:?}"));
        let message = String::from_utf8_lossy(&buffer[..n_bytes]).into_owned();
        let found = message.lines().any(|line| line == want);
        seen.push(message);
        if found {
            return;
        }
    }
}

#[test]
fn the_daemon_speaks_systemds_notify_protocol_and_drains_on_sigterm() {
    drains_on_signal("TERM");
}

#[test]
fn sighup_drains_like_sigterm_with_a_log_line() {
    // SIGHUP once ended the daemon at once: no drain, no STOPPING=1, no log line.
    drains_on_signal("HUP");
}

/// Starts the binary's daemon under a fake systemd, sends `SIG{signal}` once it is ready, and
/// checks it drains: STOPPING=1, a log line naming the signal, "Daemon stopped." last, exit 0.
fn drains_on_signal(signal: &str) {
    use std::os::unix::net::UnixDatagram;

    let home = tempfile::tempdir().unwrap();
    let socket_path = home.path().join("notify.sock");
    let socket = UnixDatagram::bind(&socket_path).unwrap();
    socket
        .set_read_timeout(Some(std::time::Duration::from_secs(60)))
        .unwrap();
    let database = format!("sqlite://{}", home.path().join("memsift.db").display());
    let daemon = std::process::Command::new(env!("CARGO_BIN_EXE_memsift"))
        .env_clear()
        .env("HOME", home.path())
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("NOTIFY_SOCKET", &socket_path)
        // 200 ms: the daemon pings every 100 ms, so the test sees one quickly.
        .env("WATCHDOG_USEC", "200000")
        .env("JOURNAL_STREAM", "8:1234")
        .env("MEMSIFT_LOG", "info")
        // The daemon never installs the model; it checks the installed one.
        .env("MEMSIFT_MODEL_DIR", installed_model_dir())
        .args(["--database", &database, "daemon"])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut seen = Vec::new();
    await_notify(&socket, "READY=1", &mut seen);
    await_notify(&socket, "WATCHDOG=1", &mut seen);
    let term_sent = std::time::Instant::now();
    let kill = std::process::Command::new("kill")
        .args([&format!("-{signal}"), &daemon.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    await_notify(&socket, "STOPPING=1", &mut seen);
    let output = daemon.wait_with_output().unwrap();
    let stop_secs = term_sent.elapsed().as_secs_f64();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "exit {:?}; stderr:\n{stderr}", output.status);
    assert!(stop_secs < 30.0, "took {stop_secs} s to stop: past TimeoutStopSec");
    // Under systemd every log line is one JSON object.
    let lines: Vec<serde_json::Value> = stderr
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|error| panic!("not JSON ({error}): {line}")))
        .collect();
    let messages: Vec<&str> = lines
        .iter()
        .filter_map(|line| line["fields"]["message"].as_str())
        .collect();
    assert!(messages.contains(&"Daemon ready."), "{messages:?}");
    assert_eq!(messages.last(), Some(&"Daemon stopped."), "{messages:?}");
    let stopping = lines
        .iter()
        .find(|line| {
            line["fields"]["message"]
                .as_str()
                .is_some_and(|m| m.starts_with("Stopping"))
        })
        .unwrap_or_else(|| panic!("no Stopping line: {messages:?}"));
    assert_eq!(stopping["fields"]["signal"], format!("SIG{signal}"), "{stopping}");
}

/// The `/metrics` lines of the daemon's embedder, as its API would serve them.
async fn embedder_metrics(app: &App) -> Vec<String> {
    let snapshot = app.store.listing().metrics_snapshot().await.unwrap();
    let state = memsift::metrics::ProcessState::of(app);
    memsift::metrics::render(&snapshot, &[], state)
        .unwrap()
        .lines()
        .filter(|line| line.starts_with("memsift_embedder_"))
        .map(str::to_owned)
        .collect()
}

fn embedder_lines(loaded: u8, n_loads: u64) -> Vec<String> {
    vec![
        format!("memsift_embedder_loaded {loaded}"),
        format!("memsift_embedder_loads_total {n_loads}"),
    ]
}

fn chat(user: &str, minute: i64) -> String {
    [
        line(
            user,
            &format!("{user}-{minute}"),
            minute,
            "user",
            "I live in Lisbon and I have a dog named Rex.",
            false,
        ),
        line(
            user,
            &format!("{user}-{minute}"),
            minute + 1,
            "assistant",
            "Nice!",
            true,
        ),
    ]
    .concat()
}

#[tokio::test]
async fn the_daemon_releases_an_idle_embedder_and_loads_it_again_when_work_arrives() {
    let test = TestApp::sqlite().await;
    let overlay = "[embeddings]\nbackend = \"hashing\"\nidle_unload_secs = 300\n";
    let config = Config::from_layers(Some(("test.toml", overlay))).unwrap();
    let daemon = Daemon::new(
        app_on(&test.app.store, &test.clock, config, "daemon-a"),
        Arc::new(PipelineRunner),
    )
    .unwrap();
    let app = daemon.app();
    // Nothing is loaded at start: the first work loads the embedder.
    assert_eq!(embedder_metrics(app).await, embedder_lines(0, 0));
    test.import("ana.jsonl", &chat("ana", 0)).await.unwrap();
    let runs = daemon.tick(t0()).await.unwrap();
    assert!(runs.iter().all(|run| run.error.is_none()), "{runs:?}");
    assert_eq!(
        test.app.store.listing().list_memories("ana", None).await.unwrap().len(),
        2
    );
    assert_eq!(embedder_metrics(app).await, embedder_lines(1, 1));

    // run_pipeline ticks every 30 s with nothing to do; the embedder goes at 300 s unused.
    for step_idx in 1..=10 {
        let now = t0() + Duration::seconds(30 * step_idx);
        test.clock.set(now);
        daemon.tick(now).await.unwrap();
        let loaded = u8::from(30 * step_idx < 300);
        assert_eq!(
            embedder_metrics(app).await,
            embedder_lines(loaded, 1),
            "at {step_idx} ticks"
        );
    }

    // New work loads it again, and the work is done as before.
    test.import("bo.jsonl", &chat("bo", 4)).await.unwrap();
    let now = t0() + Duration::seconds(330);
    test.clock.set(now);
    let runs = daemon.tick(now).await.unwrap();
    assert!(runs.iter().all(|run| run.error.is_none()), "{runs:?}");
    assert_eq!(
        test.app.store.listing().list_memories("bo", None).await.unwrap().len(),
        2
    );
    assert_eq!(embedder_metrics(app).await, embedder_lines(1, 2));
    test.finish().await;
}

#[tokio::test]
async fn with_idle_unload_secs_zero_the_embedder_stays_loaded() {
    let test = TestApp::sqlite().await;
    let overlay = "[embeddings]\nbackend = \"hashing\"\nidle_unload_secs = 0\n";
    let config = Config::from_layers(Some(("test.toml", overlay))).unwrap();
    let daemon = Daemon::new(
        app_on(&test.app.store, &test.clock, config, "daemon-a"),
        Arc::new(PipelineRunner),
    )
    .unwrap();
    test.import("ana.jsonl", &chat("ana", 0)).await.unwrap();
    daemon.tick(t0()).await.unwrap();
    assert_eq!(embedder_metrics(daemon.app()).await, embedder_lines(1, 1));
    // A day of idle ticks, every 10 minutes.
    for step_idx in 1..=144 {
        let now = t0() + Duration::minutes(10 * step_idx);
        test.clock.set(now);
        daemon.tick(now).await.unwrap();
    }
    assert_eq!(embedder_metrics(daemon.app()).await, embedder_lines(1, 1));
    test.finish().await;
}
