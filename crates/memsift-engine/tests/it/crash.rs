//! Crash-restart: trip a fail point at each step of the batch protocol, drop the daemon, start a
//! new one on the same database, run to idle, and check the simulator's counters.
//!
//! Fail points are process-wide: each is armed for this test's own worker id
//! (`{point}::{worker_id}`), so the tests running beside it never trip it, and the scenarios run
//! in turn inside this one test.

use chrono::Duration;
use memsift_engine::pipeline::{run_once, run_until_idle};
use memsift_sim::FaultConfig;
use memsift_store::testing::TestDb;

use crate::helpers::{TestApp, app_on, line};

const FAIL_POINTS: &[&str] = &[
    "batch::after_intent",
    "batch::after_create",
    "batch::after_record",
    "batch::before_poll",
    "batch::mid_ingest",
];

/// The worker id of the daemon that crashes; no other test's daemon has it.
const CRASHING_WORKER: &str = "daemon-crashing";

fn conversations() -> String {
    [
        line(
            "ana",
            "c1",
            0,
            "user",
            "I live in Lisbon and I have a dog named Rex.",
            true,
        ),
        line("bo", "c2", 0, "user", "I work at Fernwood Labs.", true),
        line("cy", "c3", 0, "user", "I love jazz and I hate cilantro.", true),
    ]
    .concat()
}

#[tokio::test]
async fn every_batch_protocol_crash_point_recovers_without_loss_or_duplicates() {
    let scenario = fail::FailScenario::setup();
    for fail_point in FAIL_POINTS {
        eprintln!("crash scenario: {fail_point}");
        let test = TestApp::with_batch_sim(TestDb::sqlite().await, FaultConfig::default()).await;
        test.import("chat.jsonl", &conversations()).await.unwrap();
        let crashing = test.second_daemon(CRASHING_WORKER);
        let armed = format!("{fail_point}::{CRASHING_WORKER}");
        fail::cfg(&armed, "1*return").unwrap();
        // The first daemon runs until the fail point kills its step.
        let mut crashed = false;
        for _ in 0..20 {
            match run_once(&crashing).await {
                Err(_) => {
                    crashed = true;
                    break;
                }
                Ok(step) if !step.progressed() => {
                    let due = test
                        .app
                        .store
                        .requests()
                        .next_due_work(Duration::zero(), Duration::minutes(5), &[])
                        .await
                        .unwrap();
                    test.clock.set(due.expect("work is waiting until the fail point trips"));
                }
                Ok(_) => {}
            }
        }
        fail::remove(&armed);
        assert!(crashed, "{fail_point} never tripped");
        // A new daemon on the same database finishes the work.
        let restarted = app_on(
            &test.app.store,
            &test.clock,
            test.app.config.clone(),
            "daemon-restarted",
        );
        run_until_idle(&restarted).await.unwrap();

        let segments = test.app.store.listing().list_segments(None, None, None).await.unwrap();
        assert!(
            segments.iter().all(|segment| segment.status == "extracted"),
            "{fail_point}: {segments:?}"
        );
        let mut n_memories = 0;
        for user in ["ana", "bo", "cy"] {
            n_memories += test.app.store.listing().list_memories(user, None).await.unwrap().len();
        }
        assert_eq!(n_memories, 5, "{fail_point}: every fact stored exactly once");
        let applied = test
            .app
            .store
            .listing()
            .list_requests(None, Some("applied"), None)
            .await
            .unwrap();
        assert_eq!(applied.len(), 3, "{fail_point}: one applied request per segment");
        let batches = test.app.store.batches().list_batches(None, None).await.unwrap();
        let with_provider_id = batches.iter().filter(|batch| batch.provider_batch_id.is_some()).count() as u64;
        assert_eq!(
            test.sim().counters().creates,
            with_provider_id,
            "{fail_point}: a provider batch nobody tracks"
        );
        assert_eq!(
            with_provider_id, 1,
            "{fail_point}: the requests went out in exactly one provider batch"
        );
        test.finish().await;
    }
    scenario.teardown();
}
