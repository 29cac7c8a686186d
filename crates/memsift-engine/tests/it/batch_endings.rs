//! Whatever a provider or a proxy sends back, reads are bounded and batches end: broken results
//! downloads (a line without end, an HTML page, a clean end halfway, a stalled stream, a repeated
//! line, foreign lines), batches the provider no longer finds, and batches that outlive their
//! expiry, each driven by a fault mode of `memsift-sim` over HTTP.

use chrono::Duration;
use memsift_engine::pipeline::{run_once, run_until_idle};
use memsift_engine::testing::batch_config;
use memsift_sim::{FaultConfig, ResultsFault, ResultsFaultKind, SimConfig};
use memsift_store::testing::TestDb;

use crate::helpers::{TestApp, line};

/// Four users, one closed segment each, each with a fact the heuristic responder extracts.
fn four_segments() -> String {
    [
        line("ana", "c1", 0, "user", "I live in Lisbon.", true),
        line("bo", "c2", 0, "user", "I work at Fernwood Labs.", true),
        line("cy", "c3", 0, "user", "I have a dog named Rex.", true),
        line("di", "c4", 0, "user", "I'm allergic to peanuts.", true),
    ]
    .concat()
}

/// A batch-lane app on a simulator with `faults`, reading with small bounds so a stalled or
/// endless body ends within a second.
async fn app_with(db: TestDb, faults: FaultConfig) -> TestApp {
    let sim_config = SimConfig::from_cli("heuristic", None).unwrap().with_faults(faults);
    TestApp::on_sim(db, sim_config, |sim, key_file| {
        let mut config = batch_config(&sim.base_url, key_file);
        config.batch.download_idle_secs = 1;
        config.batch.max_result_line_bytes = 1 << 20;
        config
    })
    .await
}

async fn statuses(test: &TestApp) -> Vec<String> {
    let mut statuses: Vec<String> = test
        .app
        .store
        .listing()
        .list_segments(None, None, None)
        .await
        .unwrap()
        .into_iter()
        .map(|row| row.status)
        .collect();
    statuses.sort();
    statuses
}

/// Every request's attempt number: a fault of the provider spends none.
async fn attempts(test: &TestApp) -> Vec<i64> {
    let requests = test.app.store.listing().list_requests(None, None, None).await.unwrap();
    requests.iter().map(|request| request.attempt).collect()
}

const BROKEN_BODIES: [ResultsFaultKind; 5] = [
    ResultsFaultKind::EndlessLine,
    ResultsFaultKind::Html,
    ResultsFaultKind::CutHalfway,
    ResultsFaultKind::Stall,
    ResultsFaultKind::DuplicateLine,
];

#[tokio::test]
async fn a_broken_results_download_is_the_batchs_fault_and_is_downloaded_again() {
    let cases = BROKEN_BODIES
        .iter()
        .map(|kind| (*kind, false))
        .chain([(ResultsFaultKind::CutHalfway, true)]);
    for (kind, postgres) in cases {
        let faults = FaultConfig {
            results_fault: Some(ResultsFault { kind, first: 1 }),
            ..FaultConfig::default()
        };
        let db = if postgres {
            TestDb::postgres().await
        } else {
            TestDb::sqlite().await
        };
        let test = app_with(db, faults).await;
        test.import("chat.jsonl", &four_segments()).await.unwrap();
        let total = run_until_idle(&test.app).await.unwrap();
        assert_eq!(statuses(&test).await, vec!["extracted"; 4], "{kind:?}");
        assert_eq!(
            attempts(&test).await,
            vec![1; 4],
            "{kind:?}: no request spent an attempt"
        );
        assert_eq!(total.batch.n_download_failures, 1, "{kind:?}");
        let batch = test
            .app
            .store
            .batches()
            .list_batches(None, None)
            .await
            .unwrap()
            .remove(0);
        assert_eq!(
            (batch.status.as_str(), batch.download_failures, batch.ingest_cursor),
            ("ingested", 1, 4),
            "{kind:?}"
        );
        assert_eq!(test.sim().counters().result_downloads, 2, "{kind:?}");
        test.finish().await;
    }
}

#[tokio::test]
async fn results_that_stay_broken_are_given_up_and_their_requests_go_again_unspent() {
    for kind in [ResultsFaultKind::Html, ResultsFaultKind::CutHalfway] {
        // Every download of the first batch is broken; the second batch's are not.
        let faults = FaultConfig {
            results_fault: Some(ResultsFault {
                kind,
                first: memsift_batch::MAX_DOWNLOADS as u32,
            }),
            ..FaultConfig::default()
        };
        let test = app_with(TestDb::sqlite().await, faults).await;
        test.import("chat.jsonl", &four_segments()).await.unwrap();
        let total = run_until_idle(&test.app).await.unwrap();
        assert_eq!(statuses(&test).await, vec!["extracted"; 4], "{kind:?}");
        assert_eq!(attempts(&test).await, vec![1; 4], "{kind:?}");
        assert_eq!(
            (total.batch.n_batches_given_up, total.batch.n_batches_created),
            (1, 2),
            "{kind:?}"
        );
        let mut batches = test.app.store.batches().list_batches(None, None).await.unwrap();
        batches.sort_by_key(|batch| batch.created_at);
        assert_eq!(batches[0].status, "failed");
        assert!(
            batches[0].last_error.as_deref().unwrap().contains("3 downloads failed"),
            "{:?}",
            batches[0].last_error
        );
        test.finish().await;
    }
}

#[tokio::test]
async fn foreign_lines_are_ignored_not_counted_and_logged_once() {
    let faults = FaultConfig {
        foreign_lines: 3,
        ..FaultConfig::default()
    };
    let test = app_with(TestDb::sqlite().await, faults).await;
    test.import("chat.jsonl", &four_segments()).await.unwrap();
    run_until_idle(&test.app).await.unwrap();
    let batch = test
        .app
        .store
        .batches()
        .list_batches(None, None)
        .await
        .unwrap()
        .remove(0);
    assert_eq!((batch.status.as_str(), batch.ingest_cursor), ("ingested", 4));
    assert_eq!(statuses(&test).await, vec!["extracted"; 4]);
    test.finish().await;
}

#[tokio::test]
async fn a_batch_the_provider_no_longer_finds_is_given_up_after_the_grace() {
    // 404 on every poll: the provider lost the batch.
    let faults = FaultConfig {
        not_found_after_create: u32::MAX,
        ..FaultConfig::default()
    };
    let test = app_with(TestDb::sqlite().await, faults).await;
    let app = memsift_engine::testing::with_virtual_batch_retries(&test.app);
    test.import("chat.jsonl", &four_segments()).await.unwrap();
    run_once(&app).await.unwrap();
    // The next batch is the same requests on a provider that finds it; the sim's 404s are per
    // batch, so the second create would 404 too: give the run a bounded number of steps.
    let mut given_up = 0;
    for _ in 0..40 {
        let step = run_once(&app).await.unwrap();
        given_up += step.batch.n_batches_given_up;
        if given_up > 0 {
            break;
        }
        let due = test
            .app
            .store
            .requests()
            .next_due_work(Duration::zero(), Duration::minutes(5), &[])
            .await
            .unwrap()
            .unwrap();
        test.clock.set(due);
    }
    assert_eq!(given_up, 1);
    let batch = test
        .app
        .store
        .batches()
        .list_batches(Some("failed"), None)
        .await
        .unwrap()
        .remove(0);
    let reason = batch.last_error.unwrap();
    assert!(reason.contains("does not find this batch"), "{reason}");
    let gone_for = batch.ended_at.unwrap() - batch.missing_since.unwrap();
    assert!(gone_for >= Duration::seconds(300), "{gone_for}");
    assert_eq!(attempts(&test).await, vec![1; 4]);
    test.finish().await;
}

#[tokio::test]
async fn purged_results_and_a_batch_past_its_expiry_end_and_run_until_idle_returns() {
    for faults in [
        FaultConfig {
            results_purged: true,
            ..FaultConfig::default()
        },
        FaultConfig {
            never_end: true,
            ..FaultConfig::default()
        },
    ] {
        let test = app_with(TestDb::sqlite().await, faults.clone()).await;
        let app = memsift_engine::testing::with_virtual_batch_retries(&test.app);
        test.import("chat.jsonl", &four_segments()).await.unwrap();
        run_once(&app).await.unwrap();
        // Whatever the provider does, each batch ends and its requests go again unspent; the
        // requests wait in a new batch that fails the same way, so step until the first ends.
        let mut given_up = 0;
        for _ in 0..200 {
            given_up += run_once(&app).await.unwrap().batch.n_batches_given_up;
            if given_up > 0 {
                break;
            }
            let due = test
                .app
                .store
                .requests()
                .next_due_work(Duration::zero(), Duration::minutes(5), &[])
                .await
                .unwrap()
                .unwrap();
            test.clock.set(due);
        }
        assert_eq!(given_up, 1, "{faults:?}");
        assert_eq!(attempts(&test).await, vec![1; 4], "{faults:?}");
        test.finish().await;
    }
}

/// The status of `user`'s one segment.
async fn status_of(test: &TestApp, user: &str) -> String {
    let segments = test
        .app
        .store
        .listing()
        .list_segments(Some(user), None, None)
        .await
        .unwrap();
    segments[0].status.clone()
}

#[tokio::test]
async fn a_results_download_that_never_ends_is_read_beside_the_other_users_work() {
    // Before: a step read a download to its end, so one body that stalls held every lane and
    // user behind it for the idle limit (here an hour). Now a step reads for a slice and leaves
    // the download open: bo's batch is created, polled, downloaded and applied while ana's is
    // still being read.
    let faults = FaultConfig {
        results_fault: Some(ResultsFault {
            kind: ResultsFaultKind::Stall,
            first: 1,
        }),
        ..FaultConfig::default()
    };
    let sim_config = SimConfig::from_cli("heuristic", None).unwrap().with_faults(faults);
    let test = TestApp::on_sim(TestDb::sqlite().await, sim_config, |sim, key_file| {
        let mut config = batch_config(&sim.base_url, key_file);
        config.batch.download_idle_secs = 3600;
        config
    })
    .await;
    let in_flight = |test: &TestApp| memsift_engine::pipeline::downloads_in_flight(&test.app);
    test.import("ana.jsonl", &line("ana", "c1", 0, "user", "I live in Lisbon.", true))
        .await
        .unwrap();
    for _ in 0..10 {
        run_once(&test.app).await.unwrap();
        if in_flight(&test) {
            break;
        }
        test.advance(Duration::seconds(60));
    }
    assert!(in_flight(&test), "ana's results are being read");
    test.import(
        "bo.jsonl",
        &line("bo", "c2", 10, "user", "I have a dog named Rex.", true),
    )
    .await
    .unwrap();
    for _ in 0..10 {
        run_once(&test.app).await.unwrap();
        if status_of(&test, "bo").await == "extracted" {
            break;
        }
        test.advance(Duration::seconds(60));
    }
    assert_eq!(
        status_of(&test, "bo").await,
        "extracted",
        "bo's work went on beside the download"
    );
    assert_eq!(status_of(&test, "ana").await, "extracting");
    assert!(in_flight(&test), "ana's download is still open, read a slice per step");
    assert_eq!(
        test.sim().counters().result_downloads,
        2,
        "one download each, none started again"
    );
    test.finish().await;
}

/// A cause that lasts (the provider loses every batch, purges every result, a proxy answers every
/// download with HTML) must not create a new billed batch of the same requests forever: after
/// `[batch] max_batch_losses` (2) batches lost, the lane is paused with the cause, `run
/// --until-idle` ends with that line within two graces and a minute, and no request spends an
/// attempt or dies. (A batch that never ends takes the same path, a grace past its 24 h expiry.)
#[tokio::test]
async fn a_batch_lost_for_a_lasting_cause_is_created_again_a_bounded_number_of_times() {
    let html_forever = ResultsFault {
        kind: ResultsFaultKind::Html,
        first: 0,
    };
    let lasting = [
        (
            "not found",
            FaultConfig {
                not_found_after_create: u32::MAX,
                ..FaultConfig::default()
            },
        ),
        (
            "purged",
            FaultConfig {
                results_purged: true,
                ..FaultConfig::default()
            },
        ),
        (
            "html",
            FaultConfig {
                results_fault: Some(html_forever),
                ..FaultConfig::default()
            },
        ),
    ];
    for (name, faults) in lasting {
        let test = app_with(TestDb::sqlite().await, faults).await;
        test.import("chat.jsonl", &four_segments()).await.unwrap();
        let started = test.clock_now();
        // A poll's 404 is retried a few times before it counts: on the test's clock, not in seconds.
        let app = memsift_engine::testing::with_virtual_batch_retries(&test.app);
        let error = format!("{:#}", run_until_idle(&app).await.unwrap_err());
        assert!(
            error.contains("is paused by a setting fault") && error.contains("lost 2 batches in a row"),
            "{name}: {error}"
        );
        let grace = Duration::seconds(i64::try_from(test.app.config.batch.reconcile_grace_secs).unwrap());
        let took = test.clock_now() - started;
        assert!(took <= grace * 2 + Duration::minutes(1), "{name}: ended after {took}");
        assert_eq!(test.sim().counters().creates, 2, "{name}: one batch, then one more");
        assert_eq!(attempts(&test).await, vec![1; 4], "{name}: nothing spent");
        assert_eq!(statuses(&test).await, vec!["extracting"; 4], "{name}: nothing dead");
        if let Some(coordinator) = &app.coordinator {
            coordinator.close_downloads();
        }
        test.finish().await;
    }
}
