//! The batch lane end to end against `memsift-sim` over HTTP, one test per invariant it owns.
//!
//! The simulator shares the test's `ManualClock`, so batch processing time, poll intervals and the
//! reconciler's grace period pass only when the test moves the clock: no sleeps.

use chrono::Duration;
use memsift_engine::pipeline::{run_once, run_until_idle};
use memsift_sim::FaultConfig;
use memsift_store::testing::TestDb;

use crate::helpers::{TestApp, line};

/// Three users, four closed segments, each with facts the heuristic responder extracts.
fn conversations() -> String {
    [
        line(
            "ana",
            "c1",
            0,
            "user",
            "I live in Lisbon and I have a dog named Rex.",
            false,
        ),
        line("ana", "c1", 1, "assistant", "Lovely.", true),
        line("ana", "c2", 200, "user", "I'm allergic to peanuts.", true),
        line("bo", "c3", 0, "user", "I work at Fernwood Labs.", true),
        line("cy", "c4", 0, "user", "I love jazz and I hate cilantro.", true),
    ]
    .concat()
}

async fn segment_statuses(test: &TestApp) -> Vec<String> {
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

async fn n_memories(test: &TestApp) -> usize {
    let mut total = 0;
    for user in ["ana", "bo", "cy"] {
        total += test.app.store.listing().list_memories(user, None).await.unwrap().len();
    }
    total
}

#[tokio::test]
async fn invariant_1_a_segment_is_extracted_only_after_its_results_are_applied() {
    let test = TestApp::with_batch_sim(
        TestDb::sqlite().await,
        FaultConfig {
            processing_latency_ms: 600_000,
            ..FaultConfig::default()
        },
    )
    .await;
    test.import("chat.jsonl", &conversations()).await.unwrap();
    let first = run_once(&test.app).await.unwrap();
    assert_eq!((first.n_segments_planned, first.batch.n_batches_created), (4, 1));
    // Submitted is not extracted: the segments wait while the provider works.
    assert_eq!(segment_statuses(&test).await, vec!["extracting"; 4]);
    assert_eq!(n_memories(&test).await, 0);
    let total = run_until_idle(&test.app).await.unwrap();
    assert_eq!(total.n_segments_extracted, 4);
    assert_eq!(segment_statuses(&test).await, vec!["extracted"; 4]);
    assert_eq!(n_memories(&test).await, 6);
    test.finish().await;
}

#[tokio::test]
async fn invariant_2_a_result_is_applied_once_even_by_two_daemons_on_postgres() {
    let test = TestApp::with_batch_sim(
        TestDb::postgres().await,
        FaultConfig {
            processing_latency_ms: 60_000,
            ..FaultConfig::default()
        },
    )
    .await;
    test.import("chat.jsonl", &conversations()).await.unwrap();
    let second = test.second_daemon("daemon-b");
    // Both daemons step concurrently until neither has anything left to do.
    loop {
        let (a, b) = tokio::join!(run_once(&test.app), run_once(&second));
        if !a.unwrap().progressed() && !b.unwrap().progressed() {
            match test
                .app
                .store
                .requests()
                .next_due_work(Duration::zero(), Duration::minutes(5), &[])
                .await
                .unwrap()
            {
                Some(due) => test.clock.set(due),
                None => break,
            }
        }
    }
    assert_eq!(segment_statuses(&test).await, vec!["extracted"; 4]);
    assert_eq!(n_memories(&test).await, 6);
    let batches = test.app.store.batches().list_batches(None, None).await.unwrap();
    assert_eq!(
        test.sim().counters().creates,
        batches.len() as u64,
        "no provider batch was created twice"
    );
    let applied = test
        .app
        .store
        .listing()
        .list_requests(None, Some("applied"), None)
        .await
        .unwrap();
    assert_eq!(applied.len(), 4);
    test.finish().await;
}

#[tokio::test]
async fn invariant_3_a_lost_create_reply_is_reconciled_not_resubmitted() {
    let faults: FaultConfig = serde_json::from_value(serde_json::json!({
        "lost_create": { "first": 1, "mode": "server_error" }
    }))
    .unwrap();
    let test = TestApp::with_batch_sim(TestDb::sqlite().await, faults).await;
    test.import("chat.jsonl", &conversations()).await.unwrap();
    // The create's outcome is unknown, so the same step looks for the batch and adopts it.
    let first = run_once(&test.app).await.unwrap();
    assert_eq!((first.batch.n_creates_unknown, first.batch.n_batches_adopted), (1, 1));
    let batch = test
        .app
        .store
        .batches()
        .list_batches(None, None)
        .await
        .unwrap()
        .remove(0);
    assert_eq!(batch.status.as_str(), "submitted");
    assert!(batch.provider_batch_id.is_some(), "{batch:?}");
    run_until_idle(&test.app).await.unwrap();
    assert_eq!(test.sim().counters().creates, 1, "the provider saw exactly one create");
    assert_eq!(segment_statuses(&test).await, vec!["extracted"; 4]);
    assert_eq!(n_memories(&test).await, 6);
    test.finish().await;
}

#[tokio::test]
async fn a_create_without_an_outcome_is_looked_for_at_once_and_the_run_finishes_every_batch() {
    // One 5xx on a create once paused a single-provider batch lane at once: `run --until-idle`
    // gave up with segments still extracting and batches already created never polled, and its
    // requests waited two full reconcile graces (10 minutes). Now a create is an outage like any
    // other (five open the lane), its batch is looked for at once and again after a short
    // recheck, and the run waits for every batch that can still finish.
    let cases = [
        (
            "the reply is lost after the batch was made",
            r#"{"lost_create": {"first": 1, "mode": "server_error"}}"#,
        ),
        (
            "the connection drops after the batch was made",
            r#"{"lost_create": {"first": 1}}"#,
        ),
        (
            "one create fails and makes no batch",
            r#"{"server_error": {"first": 1, "endpoints": ["anthropic.batches.create"]}}"#,
        ),
        (
            "four creates in a row fail",
            r#"{"server_error": {"first": 4, "endpoints": ["anthropic.batches.create"]}}"#,
        ),
    ];
    for (case, faults) in cases {
        let faults: FaultConfig = serde_json::from_str(faults).unwrap();
        let test = TestApp::with_batch_sim(TestDb::sqlite().await, faults).await;
        let mut config = test.app.config.clone();
        config.batch.max_requests_per_batch = 1;
        let app = crate::helpers::app_on(&test.app.store, &test.clock, config, "one-per-batch");
        test.import("chat.jsonl", &conversations()).await.unwrap();
        let started = test.clock_now();
        let total = run_until_idle(&app)
            .await
            .unwrap_or_else(|error| panic!("{case}: {error:#}"));
        let elapsed = test.clock_now() - started;
        assert_eq!(segment_statuses(&test).await, vec!["extracted"; 4], "{case}");
        assert_eq!(n_memories(&test).await, 6, "{case}");
        let batches = test.app.store.batches().list_batches(None, None).await.unwrap();
        let made: Vec<_> = batches
            .iter()
            .filter(|batch| batch.provider_batch_id.is_some())
            .collect();
        assert_eq!(made.len(), 4, "{case}: one provider batch per request: {batches:?}");
        assert!(
            made.iter().all(|batch| batch.status == "ingested"),
            "{case}: {batches:?}"
        );
        let counters = test.sim().counters();
        let failed = counters.faults.values().sum::<u64>();
        assert_eq!(
            counters.per_endpoint["anthropic.batches.create"],
            4 + failed - total.batch.n_batches_adopted,
            "{case}: a batch that was made is adopted, never made twice"
        );
        for request in test.app.store.listing().list_requests(None, None, None).await.unwrap() {
            assert_eq!(
                request.attempt, 1,
                "{case}: a provider's fault costs no attempt: {request:?}"
            );
        }
        let grace = test.app.config.reconcile_grace();
        assert!(
            elapsed < grace,
            "{case}: finished in {}s, within one reconcile grace ({}s)",
            elapsed.num_seconds(),
            grace.num_seconds()
        );
        test.finish().await;
    }
}

#[tokio::test]
async fn invariant_4_results_are_downloaded_once_per_batch() {
    let test = TestApp::with_batch_sim(TestDb::sqlite().await, FaultConfig::default()).await;
    test.import("chat.jsonl", &conversations()).await.unwrap();
    run_until_idle(&test.app).await.unwrap();
    let batches = test.app.store.batches().list_batches(None, None).await.unwrap();
    assert_eq!(batches.len(), 1);
    assert_eq!((batches[0].status.as_str(), batches[0].ingest_cursor), ("ingested", 4));
    assert_eq!(test.sim().counters().result_downloads, 1);
    test.finish().await;
}

#[tokio::test]
async fn a_retried_ingest_resumes_after_the_lines_its_cursor_says_were_recorded() {
    let test = TestApp::with_batch_sim(TestDb::sqlite().await, FaultConfig::default()).await;
    test.import("chat.jsonl", &conversations()).await.unwrap();
    run_until_idle(&test.app).await.unwrap();
    let batch = test
        .app
        .store
        .batches()
        .list_batches(None, None)
        .await
        .unwrap()
        .remove(0);
    let batch_id = memsift_core::BatchId::parse(&batch.id).unwrap();
    // An ingest that stopped after its second line: the batch is `ended`, its cursor at 2.
    test.app.store.reopen_test_ingest(batch_id, 2).await.unwrap();
    let step = run_once(&test.app).await.unwrap();
    assert_eq!(
        (
            step.batch.n_lines_skipped,
            step.batch.n_batches_ingested,
            step.batch.n_answers
        ),
        (2, 1, 0)
    );
    let batch = test
        .app
        .store
        .batches()
        .list_batches(None, None)
        .await
        .unwrap()
        .remove(0);
    assert_eq!((batch.status.as_str(), batch.ingest_cursor), ("ingested", 4));
    assert_eq!(test.sim().counters().result_downloads, 2);
    let applied = test
        .app
        .store
        .listing()
        .list_requests(None, Some("applied"), None)
        .await
        .unwrap();
    assert_eq!(applied.len(), 4, "no request was touched again");
    test.finish().await;
}

#[tokio::test]
async fn invariant_5_errored_requests_are_retried_then_the_segment_goes_dead_with_the_reason() {
    let always_errored = FaultConfig {
        request_errored_share: 1.0,
        ..FaultConfig::default()
    };
    let test = TestApp::with_batch_sim(TestDb::sqlite().await, always_errored).await;
    test.import("chat.jsonl", &line("ana", "c1", 0, "user", "I live in Lisbon.", true))
        .await
        .unwrap();
    let total = run_until_idle(&test.app).await.unwrap();
    let max_attempts = test.app.config.extraction.max_attempts as u64;
    assert_eq!(
        (
            total.batch.n_batches_created,
            total.n_requests_replanned,
            total.n_requests_dead
        ),
        (max_attempts, max_attempts - 1, 1)
    );
    let segment = test
        .app
        .store
        .listing()
        .list_segments(Some("ana"), None, None)
        .await
        .unwrap()
        .remove(0);
    assert_eq!(segment.status, "dead");
    let reason = segment.last_error.unwrap();
    assert!(
        reason.contains(&format!("errored on attempt {max_attempts} of {max_attempts}")),
        "{reason}"
    );
    assert_eq!(test.sim().counters().creates, max_attempts);
    test.finish().await;
}

#[tokio::test]
async fn invariant_6_polling_is_a_snooze_with_growing_intervals() {
    let slow = FaultConfig {
        processing_latency_ms: 3_600_000,
        ..FaultConfig::default()
    };
    let test = TestApp::with_batch_sim(TestDb::sqlite().await, slow).await;
    test.import("chat.jsonl", &conversations()).await.unwrap();
    run_once(&test.app).await.unwrap();
    let mut gaps = Vec::new();
    let mut previous = test
        .app
        .store
        .batches()
        .list_batches(None, None)
        .await
        .unwrap()
        .remove(0)
        .next_poll_at
        .unwrap();
    for _ in 0..5 {
        test.clock.set(previous);
        run_once(&test.app).await.unwrap();
        let batch = test
            .app
            .store
            .batches()
            .list_batches(None, None)
            .await
            .unwrap()
            .remove(0);
        let next = batch.next_poll_at.unwrap();
        gaps.push((next - previous).num_seconds());
        previous = next;
    }
    // Five polls, each further out than the last (1.5x ± 10 % jitter), no attempt spent.
    assert!(gaps.windows(2).all(|pair| pair[1] > pair[0]), "{gaps:?}");
    let batch = test
        .app
        .store
        .batches()
        .list_batches(None, None)
        .await
        .unwrap()
        .remove(0);
    assert_eq!((batch.status.as_str(), batch.n_polls), ("submitted", 5));
    let requests = test.app.store.listing().list_requests(None, None, None).await.unwrap();
    assert!(
        requests
            .iter()
            .all(|request| request.attempt == 1 && request.status == "submitted")
    );
    test.finish().await;
}

#[tokio::test]
async fn the_openai_batch_lane_uploads_a_file_tags_the_batch_and_reads_its_output_file() {
    let test = TestApp::with_openai_batch_sim(TestDb::sqlite().await).await;
    test.import("chat.jsonl", &conversations()).await.unwrap();
    let total = run_until_idle(&test.app).await.unwrap();
    assert_eq!((total.n_segments_extracted, total.batch.n_batches_created), (4, 1));
    assert_eq!(n_memories(&test).await, 6);
    let counters = test.sim().counters();
    assert_eq!((counters.uploads, counters.creates), (1, 1));
    let batch = test
        .app
        .store
        .batches()
        .list_batches(None, None)
        .await
        .unwrap()
        .remove(0);
    assert_eq!((batch.provider.as_str(), batch.status.as_str()), ("openai", "ingested"));
    assert!(batch.provider_batch_id.unwrap().starts_with("batch_"));
    test.finish().await;
}

#[tokio::test]
async fn erasure_deletes_the_ingested_provider_batch_that_held_the_users_text() {
    let test = TestApp::with_batch_sim(TestDb::sqlite().await, FaultConfig::default()).await;
    test.import(
        "chat.jsonl",
        &[
            line("ana", "c1", 0, "user", "I live in Lisbon.", true),
            line("bo", "c2", 0, "user", "I live in Oslo.", true),
        ]
        .concat(),
    )
    .await
    .unwrap();
    memsift_engine::pipeline::run_until_idle(&test.app).await.unwrap();
    let batches = test
        .app
        .store
        .batches()
        .list_batches(Some("ingested"), None)
        .await
        .unwrap();
    assert_eq!(batches.len(), 1, "both users' requests shared one batch");

    let receipt = memsift_engine::erase::erase_user(&test.app, "ana").await.unwrap();
    assert_eq!(
        (receipt.n_provider_batches_deleted, receipt.n_provider_batches_left),
        (1, 0)
    );
    let counters = test.sim().counters();
    assert_eq!(
        counters.per_endpoint.get("anthropic.batches.delete"),
        Some(&1),
        "{counters:?}"
    );
    // bo's memories were applied before; deleting the provider copy costs him nothing.
    assert_eq!(
        test.app.store.listing().list_memories("bo", None).await.unwrap().len(),
        1
    );
    // A second erasure of the same person finds nothing left, and says so without an error.
    let again = memsift_engine::erase::erase_user(&test.app, "ana").await.unwrap();
    assert_eq!((again.n_memories, again.n_provider_batches_left), (0, 0));
    assert_eq!(
        test.sim().counters().per_endpoint.get("anthropic.batches.delete"),
        Some(&1)
    );
    test.finish().await;
}

#[tokio::test]
async fn provider_quotas_are_shared_between_the_processes_that_use_them() {
    // Before: every process that stepped in the last two minutes took a part, so a second daemon
    // with nothing to do halved the quota of the one working (24 requests took 7 minutes at 6
    // rpm). Now a process takes a part only while it asks a provider for something.
    let test = TestApp::with_batch_sim(TestDb::postgres().await, FaultConfig::default()).await;
    let second = crate::helpers::app_on(&test.app.store, &test.clock, test.app.config.clone(), "second");
    run_once(&second).await.unwrap();
    test.import("ana.jsonl", &line("ana", "c1", 0, "user", "I live in Lisbon.", true))
        .await
        .unwrap();
    let report = run_until_idle(&test.app).await.unwrap();
    assert_eq!(report.batch.n_batches_created, 1);
    run_once(&second).await.unwrap();
    run_once(&test.app).await.unwrap();
    assert_eq!(test.app.limiter.share(), 1, "the idle process takes no part");
    assert_eq!(
        second.limiter.share(),
        2,
        "were it to send, it would share with the working one"
    );

    test.import(
        "bo.jsonl",
        &line("bo", "c1", 10, "user", "I have a dog named Rex.", true),
    )
    .await
    .unwrap();
    let report = run_until_idle(&second).await.unwrap();
    assert_eq!(report.batch.n_batches_created, 1);
    run_once(&test.app).await.unwrap();
    assert_eq!(test.app.limiter.share(), 2, "both have asked within two minutes");
    test.finish().await;
}
