//! The admin pages against a running server, read by headless Chromium as an admin would.

use std::path::{Path, PathBuf};
use std::process::Command;

use memsift_sim::FaultConfig;
use memsift_store::testing::TestDb;

use crate::helpers::{TestApp, line};

const TOKEN: &str = "admin-test-token";

/// Debian's Chromium: `MEMSIFT_CHROMIUM`, else `chromium` on PATH, installed with apt-get when
/// missing (as `.ci/run` does), so the test fails for a real reason, never skips.
fn chromium() -> PathBuf {
    if let Some(path) = std::env::var_os("MEMSIFT_CHROMIUM") {
        return PathBuf::from(path);
    }
    let installed = Path::new("/usr/bin/chromium");
    if !installed.exists() {
        let status = Command::new("apt-get")
            .args(["install", "-y", "-q", "chromium"])
            .env("DEBIAN_FRONTEND", "noninteractive")
            .status();
        assert!(
            matches!(status, Ok(status) if status.success()) && installed.exists(),
            "the admin test needs Debian's chromium: apt-get install chromium, or set MEMSIFT_CHROMIUM"
        );
    }
    installed.to_owned()
}

fn headless(url: &str, extra: &[&str]) -> std::process::Output {
    let profile = tempfile::tempdir().unwrap();
    Command::new(chromium())
        .args(["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .args(extra)
        .arg(url)
        .output()
        .expect("chromium runs")
}

#[tokio::test]
async fn the_batches_page_shows_the_ingested_batch_to_chromium_and_refuses_without_the_token() {
    let test = TestApp::with_batch_sim(TestDb::sqlite().await, FaultConfig::default()).await;
    test.import(
        "chat.jsonl",
        &[
            line("ana", "c1", 0, "user", "I live in Lisbon.", true),
            line("bo", "c2", 0, "user", "I <b>love</b> chess.", true),
        ]
        .concat(),
    )
    .await
    .unwrap();
    memsift::pipeline::run_until_idle(&test.app).await.unwrap();
    let batch = test.app.store.list_batches(None, None).await.unwrap().remove(0);
    // The ended batch is measured for /metrics (the simulator ended it within the test's clock).
    let snapshot = test.app.store.metrics_snapshot().await.unwrap();
    assert_eq!(snapshot.batch_latencies_secs.len(), 1, "{snapshot:?}");
    assert!(snapshot.batch_latencies_secs[0] >= 0.0);
    let provider_batch_id = batch.provider_batch_id.clone().unwrap();

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let router = memsift::admin::router(test.app.clone(), Some(memsift::api::ApiToken::new(TOKEN)));
    let server = tokio::spawn(async move { axum::serve(listener, router).await });

    // The app's provider client installed the TLS crypto provider reqwest needs even for http.
    let refused = reqwest::get(format!("{base}/admin/batches")).await.unwrap();
    assert_eq!(refused.status(), 401);
    let wrong = reqwest::get(format!("{base}/admin/batches?token=nope")).await.unwrap();
    assert_eq!(wrong.status(), 401);

    // Chromium runs as a separate process; the server keeps answering on this runtime meanwhile.
    let url = format!("{base}/admin/batches?token={TOKEN}");
    let dom = tokio::task::spawn_blocking(move || headless(&url, &["--dump-dom"]))
        .await
        .unwrap();
    let dom = String::from_utf8_lossy(&dom.stdout).into_owned();
    assert!(dom.contains(&provider_batch_id), "{dom}");
    assert!(dom.contains("<td>ingested</td>"), "{dom}");
    assert!(dom.contains("http-equiv=\"refresh\""), "the page reloads itself: {dom}");
    assert!(dom.contains("/admin/segments?token="), "links keep the token: {dom}");

    // Text from conversations is escaped, never markup.
    let segments = reqwest::get(format!("{base}/admin/requests?token={TOKEN}"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(!segments.contains("<b>love</b>"), "{segments}");
    let costs = reqwest::get(format!("{base}/admin/costs?token={TOKEN}"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        costs.contains("<td>ana</td>") && costs.contains("<td>bo</td>"),
        "{costs}"
    );

    let shot_dir = tempfile::tempdir().unwrap();
    let shot = shot_dir.path().join("batches.png");
    let url = format!("{base}/admin/batches?token={TOKEN}");
    let shot_arg = format!("--screenshot={}", shot.display());
    tokio::task::spawn_blocking(move || headless(&url, &[&shot_arg, "--window-size=1400,420"]))
        .await
        .unwrap();
    let png = std::fs::read(&shot).expect("chromium wrote the screenshot");
    assert!(png.starts_with(b"\x89PNG") && png.len() > 5_000, "{} bytes", png.len());
    if let Some(keep) = std::env::var_os("MEMSIFT_SCREENSHOT_TO") {
        std::fs::write(keep, &png).unwrap();
    }
    server.abort();
    test.finish().await;
}
