//! The server goes on when work is slow or fails: it answers while a megabyte is being planned,
//! and a panicking worker job is answered 500, logged once, and the worker takes the next job.

use reqwest::StatusCode;
use serde_json::{Value, json};

use super::client::{TOKEN, ingest_extract_list, message, with_api};
use crate::helpers::TestApp;

/// A one-word DNA sequence of `n_bytes`: one BPE piece, the input that made counting quadratic.
fn dna(n_bytes: usize) -> String {
    "GATTACA".chars().cycle().take(n_bytes).collect()
}

#[tokio::test]
async fn the_api_answers_while_a_one_megabyte_message_is_being_planned() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, Mutex};

    // Fail points are process-wide: the scenario lock keeps other fail point tests from clearing ours.
    let scenario = fail::FailScenario::setup();
    let test = TestApp::sqlite().await;
    // A worker id of its own, so the fail point below holds this app's planning only.
    let app = test.second_daemon("planning-worker");
    let (reached_tx, mut reached) = tokio::sync::mpsc::unbounded_channel::<()>();
    let (release, released) = std::sync::mpsc::channel::<()>();
    let released = Mutex::new(released);
    let held_while_the_api_answered = Arc::new(AtomicBool::new(false));
    let held = Arc::clone(&held_while_the_api_answered);
    fail::cfg_callback("pipeline::chunking::planning-worker", move || {
        let _ = reached_tx.send(());
        // Chunking holds here until the test has used the API. The bound only keeps a broken
        // build (chunking on the runtime's thread, where the test cannot run to release it) from
        // hanging: then the flag stays false and the test fails.
        let answered = released
            .lock()
            .unwrap()
            .recv_timeout(std::time::Duration::from_secs(30))
            .is_ok();
        held.store(answered, Ordering::SeqCst);
    })
    .unwrap();
    let limit = app.config.ingest.max_message_len();
    with_api(&app, |api| async move {
        let (status, report) = api
            .post(
                "/v1/users/ana/messages",
                json!([message("c1", 0, "user", &dna(limit), true)]),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "{report}");
        let extract = tokio::spawn(
            api.http
                .post(format!("{}/v1/users/ana/extract", api.base))
                .bearer_auth(TOKEN)
                .send(),
        );
        reached.recv().await.expect("planning reaches the chunking step");
        // Chunking the megabyte is in progress on its blocking thread: the API still answers.
        let (status, health) = api.get("/healthz").await;
        assert_eq!((status, health), (StatusCode::OK, json!({ "status": "ok" })));
        let (status, segments) = api.get("/v1/admin/segments?user=ana").await;
        assert_eq!(status, StatusCode::OK, "{segments}");
        assert_eq!(segments["segments"].as_array().map(Vec::len), Some(1), "{segments}");
        release.send(()).unwrap();
        let response = extract.await.unwrap().unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["report"]["n_segments_planned"], 1, "{body}");
        assert_eq!(body["report"]["n_segments_failed"], 0, "{body}");
    })
    .await;
    fail::remove("pipeline::chunking::planning-worker");
    scenario.teardown();
    assert!(
        held_while_the_api_answered.load(Ordering::SeqCst),
        "the API answered only after chunking gave the runtime back"
    );
    test.finish().await;
}

/// Log lines written while the guard lives, on this thread (where a `#[tokio::test]` runs every task).
struct CapturedLogs {
    lines: std::sync::Arc<std::sync::Mutex<Vec<u8>>>,
    _guard: tracing::subscriber::DefaultGuard,
}

impl CapturedLogs {
    fn start() -> CapturedLogs {
        let lines = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let sink = std::sync::Arc::clone(&lines);
        let subscriber = tracing_subscriber::fmt()
            .with_ansi(false)
            .with_writer(move || LogSink(std::sync::Arc::clone(&sink)))
            .finish();
        CapturedLogs {
            lines,
            _guard: tracing::subscriber::set_default(subscriber),
        }
    }

    fn count(&self, needle: &str) -> usize {
        String::from_utf8_lossy(&self.lines.lock().unwrap())
            .lines()
            .filter(|line| line.contains(needle))
            .count()
    }
}

struct LogSink(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for LogSink {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test]
async fn a_panicking_worker_job_is_answered_500_logged_once_and_the_server_goes_on() {
    let scenario = fail::FailScenario::setup();
    let test = TestApp::sqlite().await;
    let app = test.second_daemon("panicking-worker");
    let logs = CapturedLogs::start();
    fail::cfg("api::worker_job::panicking-worker", "panic(injected by the test)").unwrap();
    with_api(&app, |api| async move {
        let jobs = [
            ("extract", "POST", "/v1/users/ana/extract".to_owned()),
            ("erase", "DELETE", "/v1/users/ana?confirm=erase".to_owned()),
            (
                "cancel",
                "POST",
                "/v1/admin/batches/0190c0de-0000-7000-8000-000000000000/cancel".to_owned(),
            ),
        ];
        for (job, method, path) in &jobs {
            let (status, error) = api.call(method, path, Some(json!({}))).await;
            assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR, "{job}: {error}");
            assert!(
                error["error"]
                    .as_str()
                    .unwrap()
                    .starts_with(&format!("internal error: the {job} job panicked and was stopped;")),
                "{job}: {error}"
            );
            let (status, _) = api.get("/healthz").await;
            assert_eq!(status, StatusCode::OK, "after the {job} job panicked");
        }
        fail::remove("api::worker_job::panicking-worker");
        // The same worker takes the next jobs as if nothing had happened.
        ingest_extract_list(&api).await;
    })
    .await;
    scenario.teardown();
    assert_eq!(logs.count("An API job panicked"), 3, "one line per panic");
    assert_eq!(logs.count("API request failed"), 0, "the handler does not log it again");
    test.finish().await;
}
