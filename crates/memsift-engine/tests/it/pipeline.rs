//! The pipeline end to end on a real store: import → segments → heuristic lane → apply.

use chrono::Duration;
use memsift_engine::apply::apply_request_output;
use memsift_engine::pipeline::{run_once, run_until_idle};

use crate::helpers::{TestApp, line};

fn two_conversations() -> String {
    [
        line(
            "ana",
            "c1",
            0,
            "user",
            "I live in Lisbon and I have a dog named Rex.",
            false,
        ),
        line("ana", "c1", 1, "assistant", "Nice! Rex is a good name.", false),
        line("ana", "c1", 2, "user", "Thanks!", true),
        line("bo", "c2", 0, "user", "hello", false),
        line(
            "bo",
            "c2",
            1,
            "assistant",
            "You live in Oslo and work at Equinor, right?",
            false,
        ),
        line("bo", "c2", 2, "user", "I'm allergic to peanuts.", false),
    ]
    .concat()
}

#[tokio::test]
async fn imported_conversations_become_memories_once_segments_close() {
    let test = TestApp::sqlite().await;
    test.import("chat.jsonl", &two_conversations()).await.unwrap();
    // c1 closed by its boundary; c2 is still open (its last message is at minute 2).
    let first = run_until_idle(&test.app).await.unwrap();
    assert_eq!((first.n_segments_extracted, first.n_memories), (1, 2));
    let ana: Vec<String> = test.memory_texts("ana").await;
    assert_eq!(ana, vec!["The user lives in Lisbon.", "The user has a dog named Rex."]);
    // Nothing happens for bo until 60 minutes of silence have passed on the injected clock
    // (since the last arrival or the last message time, whichever comes first).
    test.advance(Duration::minutes(59));
    assert!(!run_once(&test.app).await.unwrap().progressed());
    test.advance(Duration::minutes(4));
    let later = run_until_idle(&test.app).await.unwrap();
    assert_eq!(
        (later.n_segments_closed, later.n_segments_extracted, later.n_memories),
        (1, 1, 1)
    );
    // The assistant's claims about bo (Oslo, Equinor) are context, never memories.
    let bo: Vec<String> = test.memory_texts("bo").await;
    assert_eq!(bo, vec!["The user is allergic to peanuts."]);
    let memories = test.app.store.listing().list_memories("bo", None).await.unwrap();
    assert_eq!(memories[0].evidence, ["t2"]);
    assert!(memories[0].sensitive);
    test.finish().await;
}

#[tokio::test]
async fn the_pipeline_runs_the_same_on_postgres() {
    let test = TestApp::postgres().await;
    test.import("chat.jsonl", &two_conversations()).await.unwrap();
    test.advance(Duration::minutes(63));
    let report = run_until_idle(&test.app).await.unwrap();
    assert_eq!((report.n_segments_extracted, report.n_memories), (2, 3));
    test.finish().await;
}

#[tokio::test]
async fn a_malformed_line_stores_nothing_from_that_file() {
    let test = TestApp::sqlite().await;
    test.import("good.jsonl", &line("ana", "c1", 0, "user", "I live in Lisbon.", true))
        .await
        .unwrap();
    let before = test.app.store.listing().counts().await.unwrap();
    let file = [
        line("bo", "c2", 0, "user", "I live in Oslo.", false),
        "{\"user\":\"bo\",\"conversation\":\"c2\",\"role\":\"user\",\"content\":\"x\",\"timestamp\":\"soon\"}\n"
            .to_owned(),
    ]
    .concat();
    let error = format!("{:#}", test.import("bad.jsonl", &file).await.unwrap_err());
    assert!(error.ends_with(
        "bad.jsonl:2: field `timestamp`: `soon` is not a time; use RFC 3339 such as 2026-03-01T10:00:00Z; nothing from this file was stored"
    ), "{error}");
    assert_eq!(test.app.store.listing().counts().await.unwrap(), before);
    test.finish().await;
}

#[tokio::test]
async fn a_message_over_the_size_limit_refuses_its_file_in_one_line_naming_file_line_and_setting() {
    let test = TestApp::sqlite().await;
    let limit = test.app.config.ingest.max_message_len();
    // Two-byte characters: exactly at the limit, and one byte over it.
    let at_limit = "é".repeat(limit / 2);
    let over_limit = format!("{at_limit}a");
    let file = [
        line("bo", "c2", 0, "user", "I live in Oslo.", false),
        line("bo", "c2", 1, "user", &at_limit, false),
        line("bo", "c2", 2, "user", &over_limit, true),
    ]
    .concat();
    let error = format!("{:#}", test.import("big.jsonl", &file).await.unwrap_err());
    assert!(
        error.ends_with(&format!(
            "big.jsonl:3: field `content` is {} bytes, over the limit of {limit} bytes ([ingest] max_message_bytes); split the message or raise the limit; nothing from this file was stored",
            limit + 1
        )),
        "{error}"
    );
    assert!(!error.contains('\n'), "one line: {error}");
    assert_eq!(test.app.store.count_rows("messages").await.unwrap(), 0);
    // Without the oversized line the same file is taken whole, the message at the limit included.
    let report = test
        .import("big.jsonl", &file[..file.rfind("{").unwrap()])
        .await
        .unwrap();
    assert_eq!(report.n_added, 2);
    test.finish().await;
}

#[tokio::test]
async fn reimporting_a_file_adds_nothing_and_extracts_nothing_twice() {
    let test = TestApp::sqlite().await;
    test.import("chat.jsonl", &two_conversations()).await.unwrap();
    test.advance(Duration::minutes(63));
    run_until_idle(&test.app).await.unwrap();
    let before = test.app.store.listing().counts().await.unwrap();
    let again = test.import("chat.jsonl", &two_conversations()).await.unwrap();
    assert_eq!((again.n_added, again.n_already_stored), (0, 6));
    assert!(!run_until_idle(&test.app).await.unwrap().progressed());
    assert_eq!(test.app.store.listing().counts().await.unwrap(), before);
    test.finish().await;
}

#[tokio::test]
async fn replaying_an_applied_output_writes_nothing_and_counts_nothing() {
    // A worker that applies an answer another worker applied first reports none of its counts:
    // two workers on one database once printed 389 drops between them for 4 stored.
    let test = TestApp::sqlite().await;
    test.import("first.jsonl", &line("ana", "c1", 0, "user", "I live in Lisbon.", true))
        .await
        .unwrap();
    run_until_idle(&test.app).await.unwrap();
    // Said again in a later conversation: a duplicate of the stored memory, dropped.
    let again = [
        line("ana", "c2", 60, "user", "I live in Lisbon.", false),
        line("ana", "c2", 61, "user", "I have a dog named Rex.", true),
    ]
    .concat();
    test.import("again.jsonl", &again).await.unwrap();
    let total = run_until_idle(&test.app).await.unwrap();
    let request = test
        .app
        .store
        .listing()
        .list_requests(Some("ana"), Some("applied"), None)
        .await
        .unwrap()
        .remove(0);
    assert!(request.n_dropped > 0, "the repeated fact is dropped: {request:?}");
    assert_eq!(total.n_items_dropped, request.n_dropped as u64, "{total:?}");
    let before = test.app.store.listing().counts().await.unwrap();
    let replay = apply_request_output(&test.app.apply_context(), request.id.parse().unwrap())
        .await
        .unwrap();
    assert_eq!(replay, memsift_engine::context::Applied::default());
    assert_eq!(test.app.store.listing().counts().await.unwrap(), before);
    test.finish().await;
}

#[tokio::test]
async fn a_claim_of_an_unrecorded_worker_stops_the_run_with_its_name_until_its_lease_ends() {
    let test = TestApp::sqlite().await;
    test.import("chat.jsonl", &line("ana", "c1", 0, "user", "I live in Lisbon.", true))
        .await
        .unwrap();
    // A worker that never recorded itself claims the segment and dies before doing anything.
    let lease = test.app.config.claim_lease();
    let dead_claim = test
        .app
        .store
        .segments()
        .claim_segments("dead-worker", test.clock_now(), lease, 10)
        .await
        .unwrap();
    assert_eq!(dead_claim.len(), 1);
    // Its liveness is unknown: the run says who holds what instead of claiming to be idle.
    let error = run_until_idle(&test.app).await.unwrap_err().to_string();
    assert!(
        error.starts_with("not idle: worker dead-worker (not recorded) holds 1 segments and 0 requests until"),
        "{error}"
    );
    test.advance(lease + Duration::seconds(1));
    let report = run_until_idle(&test.app).await.unwrap();
    assert_eq!((report.n_segments_extracted, report.n_memories), (1, 1));
    let segment = test
        .app
        .store
        .listing()
        .list_segments(Some("ana"), None, None)
        .await
        .unwrap()
        .remove(0);
    assert_eq!((segment.status.as_str(), segment.attempts), ("extracted", 2));
    test.finish().await;
}

/// A worker recorded as a process of this boot with `pid`, holding every closed segment.
async fn claim_as_process(test: &TestApp, worker: &str, pid: u32) -> usize {
    let mut identity = memsift_engine::process::this_process(worker);
    identity.pid = i64::from(pid);
    test.app
        .store
        .workers()
        .register_worker(&identity, test.clock_now())
        .await
        .unwrap();
    test.app
        .store
        .segments()
        .claim_segments(worker, test.clock_now(), test.app.config.claim_lease(), 10)
        .await
        .unwrap()
        .len()
}

#[tokio::test]
async fn the_claims_of_a_killed_process_on_this_host_are_taken_over_at_once() {
    for backend in ["sqlite", "postgres"] {
        let test = if backend == "sqlite" {
            TestApp::sqlite().await
        } else {
            TestApp::postgres().await
        };
        test.import("chat.jsonl", &line("ana", "c1", 0, "user", "I live in Lisbon.", true))
            .await
            .unwrap();
        // A process of this boot that ran and is gone (as after `kill -9`).
        let mut gone = std::process::Command::new("true").spawn().unwrap();
        let pid = gone.id();
        gone.wait().unwrap();
        assert_eq!(claim_as_process(&test, "killed-run", pid).await, 1);
        // No clock moves: the claim's 900 s lease is not waited out.
        let before = test.clock_now();
        let report = run_until_idle(&test.app).await.unwrap();
        assert_eq!((report.n_segments_extracted, report.n_memories), (1, 1), "{backend}");
        assert_eq!(test.clock_now(), before, "{backend}");
        test.finish().await;
    }
}

#[tokio::test]
async fn the_claims_of_a_running_process_are_not_taken_and_the_run_names_it() {
    for backend in ["sqlite", "postgres"] {
        let test = if backend == "sqlite" {
            TestApp::sqlite().await
        } else {
            TestApp::postgres().await
        };
        test.import("chat.jsonl", &line("ana", "c1", 0, "user", "I live in Lisbon.", true))
            .await
            .unwrap();
        let mut running = std::process::Command::new("sleep").arg("60").spawn().unwrap();
        assert_eq!(claim_as_process(&test, "other-run", running.id()).await, 1);
        let error = run_until_idle(&test.app).await.unwrap_err().to_string();
        running.kill().unwrap();
        running.wait().unwrap();
        assert!(
            error.starts_with(&format!(
                "not idle: worker other-run (pid {} on this host, running) holds 1 segments and 0 requests until",
                running.id()
            )),
            "{backend}: {error}"
        );
        let segment = test
            .app
            .store
            .listing()
            .list_segments(Some("ana"), None, None)
            .await
            .unwrap()
            .remove(0);
        assert_eq!(segment.status, "extracting", "{backend}");
        // Once it is gone, the next run takes its claim over at once.
        let report = run_until_idle(&test.app).await.unwrap();
        assert_eq!(report.n_segments_extracted, 1, "{backend}");
        test.finish().await;
    }
}

#[tokio::test]
async fn extract_by_id_closes_an_open_segment_and_refuses_a_finished_one() {
    let test = TestApp::sqlite().await;
    test.import("chat.jsonl", &line("ana", "c1", 0, "user", "I live in Lisbon.", false))
        .await
        .unwrap();
    let segment = test
        .app
        .store
        .listing()
        .list_segments(Some("ana"), None, None)
        .await
        .unwrap()
        .remove(0);
    assert_eq!(segment.status, "open");
    let id = segment.id.parse().unwrap();
    // Claimed by the app that plans it: a plan is written only by the claim's holder.
    let claimed = test
        .app
        .store
        .segments()
        .claim_segment(id, &test.app.worker_id, test.clock_now())
        .await
        .unwrap();
    memsift_engine::pipeline::plan_segment(&test.app, &claimed)
        .await
        .unwrap();
    run_until_idle(&test.app).await.unwrap();
    let error = test
        .app
        .store
        .segments()
        .claim_segment(id, "cli", test.clock_now())
        .await
        .unwrap_err()
        .to_string();
    assert_eq!(
        error,
        format!("segment {id} is `extracted`; there is nothing to extract")
    );
    test.finish().await;
}

#[tokio::test]
async fn invariant_11_the_sweep_moves_a_failing_segment_forward_once_per_pass_and_stops_at_dead() {
    let test = TestApp::sqlite().await;
    test.import("chat.jsonl", &line("ana", "c1", 0, "user", "I live in Lisbon.", true))
        .await
        .unwrap();
    // Ana's tier has no configuration: every planning attempt fails.
    assert!(test.app.store.set_user_billing_tier("ana", Some("gold")).await.unwrap());
    let max_attempts = test.app.config.extraction.max_attempts as i64;
    for attempt in 1..=max_attempts {
        let report = memsift_engine::pipeline::sweep(&test.app).await.unwrap();
        assert_eq!(report.n_segments_failed, 1, "attempt {attempt}");
        // A second pass before the retry is due does nothing.
        assert!(!memsift_engine::pipeline::sweep(&test.app).await.unwrap().progressed());
        test.advance(Duration::minutes(5 * attempt));
    }
    let segment = test
        .app
        .store
        .listing()
        .list_segments(Some("ana"), None, None)
        .await
        .unwrap()
        .remove(0);
    assert_eq!((segment.status.as_str(), segment.attempts), ("dead", max_attempts));
    let reason = segment.last_error.unwrap();
    assert!(reason.contains("`gold`"), "{reason}");
    test.advance(Duration::days(1));
    assert!(
        !memsift_engine::pipeline::sweep(&test.app).await.unwrap().progressed(),
        "a dead segment is not retried by itself"
    );
    test.finish().await;
}

#[tokio::test]
async fn invariant_15_a_tier_that_cannot_resolve_stops_start_up() {
    // Refused as the configuration loads, before anything is assembled: the same check runs for
    // `check-config` and at start.
    let error = memsift_core::config::Config::from_layers(Some((
        "test.toml",
        "[billing]\ntiers = [\"standard\"]\n[llm.extraction_standard]\nprovider = \"anthropic\"\nmodel = \"claude-haiku-4-5\"\nthinking_budget_tokens = 8192\nmax_tokens = 4096\n",
    )))
    .expect_err("an invalid thinking budget is refused at start-up")
    .to_string();
    assert!(error.contains("extraction_standard"), "{error}");
    assert!(error.contains("thinking"), "{error}");
}

#[tokio::test]
async fn after_erasure_a_reimport_of_the_same_conversations_stores_none_of_the_erased_facts() {
    let test = TestApp::postgres().await;
    test.import("chat.jsonl", &two_conversations()).await.unwrap();
    test.advance(Duration::minutes(63));
    run_until_idle(&test.app).await.unwrap();
    let bo_before = test.app.store.listing().list_memories("bo", None).await.unwrap();
    assert_eq!(
        test.app.store.listing().list_memories("ana", None).await.unwrap().len(),
        2
    );

    let receipt = test
        .app
        .store
        .erasure()
        .erase_user("ana", test.app.clock.now(), &memsift_engine::erase::fact_keys)
        .await
        .unwrap();
    assert_eq!(
        (receipt.n_memories, receipt.n_messages, receipt.n_tombstones),
        (2, 3, 2)
    );

    // The host sends the same conversations again: ana's messages are new to the store now.
    let again = test.import("chat.jsonl", &two_conversations()).await.unwrap();
    assert_eq!((again.n_added, again.n_already_stored), (3, 3));
    test.advance(Duration::minutes(63));
    let report = run_until_idle(&test.app).await.unwrap();
    assert_eq!(report.n_segments_extracted, 1, "ana's segment is extracted again");
    assert_eq!(report.n_memories, 0, "but none of the erased facts is stored");
    assert_eq!(report.n_items_dropped, 2);
    assert!(
        test.app
            .store
            .listing()
            .list_memories("ana", None)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        test.app.store.listing().list_memories("bo", None).await.unwrap(),
        bo_before
    );
    test.finish().await;
}

#[tokio::test]
async fn retention_drops_raw_outputs_only_after_the_configured_days() {
    let test = TestApp::sqlite().await;
    test.import("chat.jsonl", &two_conversations()).await.unwrap();
    run_until_idle(&test.app).await.unwrap();
    let applied = test
        .app
        .store
        .listing()
        .list_requests(Some("ana"), Some("applied"), None)
        .await
        .unwrap();
    let request_id = applied[0].id.parse().unwrap();
    let days = i64::from(test.app.config.retention.raw_output_days);
    test.advance(Duration::days(days) - Duration::minutes(1));
    assert_eq!(memsift_engine::pipeline::apply_retention(&test.app).await.unwrap(), 0);
    assert!(
        test.app
            .store
            .listing()
            .request_detail(request_id)
            .await
            .unwrap()
            .raw_output
            .is_some()
    );
    test.advance(Duration::minutes(2));
    assert_eq!(memsift_engine::pipeline::apply_retention(&test.app).await.unwrap(), 1);
    let detail = test.app.store.listing().request_detail(request_id).await.unwrap();
    assert_eq!((detail.raw_output, detail.status.as_str()), (None, "applied"));
    // The memories stay; only the model's text is gone.
    assert_eq!(
        test.app.store.listing().list_memories("ana", None).await.unwrap().len(),
        2
    );
    test.finish().await;
}

mod apply_isolation {
    //! Answers whose apply fails, in any number and any order among good ones.

    use memsift_core::status::{Lane, Purpose, Role};
    use memsift_core::{RequestId, SegmentId};
    use memsift_engine::pipeline::{StepReport, drain_answers};
    use memsift_store::{NewMessage, NewRequest};
    use proptest::prelude::*;

    use crate::helpers::{TestApp, t0};

    /// One user's closed, claimed segment with one planned request; returns the request.
    async fn planned(test: &TestApp, user: &str) -> RequestId {
        let store = &test.app.store;
        let message = NewMessage {
            user_external_id: user.to_owned(),
            conversation_key: "c".to_owned(),
            segment_name: None,
            role: Role::User,
            speaker: None,
            content: format!("I am {user}."),
            at: t0(),
            external_id: None,
            boundary_after: true,
            referenced_memory_ids: Vec::new(),
        };
        store
            .messages()
            .ingest(&[message], chrono::Duration::minutes(60), t0(), &|_| {})
            .await
            .unwrap();
        let segment = &store.listing().list_segments(Some(user), None, None).await.unwrap()[0];
        let claimed = store
            .segments()
            .claim_segment(SegmentId::parse(&segment.id).unwrap(), "test", t0())
            .await
            .unwrap();
        let request = NewRequest {
            id: RequestId::new_v7(),
            purpose: Purpose::Extraction,
            user_id: claimed.user_id,
            segment_id: Some(claimed.id),
            chunk_index: 0,
            lane: Lane::Heuristic,
            config_key: "extraction_standard".to_owned(),
            provider: "heuristic".to_owned(),
            model: None,
            prompt_version: "heuristic@test".to_owned(),
            context: Default::default(),
            request_body: Default::default(),
            subject: Default::default(),
            parent_request_id: None,
            reserved_usd: 0.0,
            max_output_tokens: None,
        };
        store
            .requests()
            .plan_segment_requests(claimed.id, std::slice::from_ref(&request), t0())
            .await
            .unwrap();
        request.id
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 16, ..ProptestConfig::default() })]

        /// Any number of unappliable answers, recorded before, after or among the good ones, hold
        /// up none of them: every good answer is applied on the first step, each bad one is tried
        /// once per step and quarantined after `max_apply_attempts`, and nothing stays `succeeded`.
        #[test]
        fn answers_that_cannot_be_applied_never_hold_up_the_others(
            n_good in 1_usize..6,
            n_bad in 0_usize..70,
            order in proptest::collection::vec(any::<u16>(), 76),
        ) {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            runtime.block_on(async {
                let test = TestApp::sqlite().await;
                let store = test.app.store.clone();
                let mut answers = Vec::new();
                for index in 0..n_good + n_bad {
                    let bad = index >= n_good;
                    answers.push((planned(&test, &format!("user-{index}")).await, bad));
                }
                // Record in the generated order: each answer's completion time is its rank.
                let mut ranked: Vec<(u16, RequestId, bool)> =
                    answers.iter().zip(&order).map(|((id, bad), rank)| (*rank, *id, *bad)).collect();
                ranked.sort_by_key(|(rank, id, _)| (*rank, *id));
                for (position, (_, id, bad)) in ranked.iter().enumerate() {
                    let raw = format!(r#"[{{"text": "User {position} likes tea.", "confidence": 0.9}}]"#);
                    let at = t0() + chrono::Duration::seconds(position as i64);
                    store.record_output(*id, &raw, Some("end_turn"), at).await.unwrap();
                    if *bad {
                        store.corrupt_test_request(*id).await.unwrap();
                    }
                }
                let max_apply_attempts = test.app.config.extraction.max_apply_attempts as usize;
                let mut steps = Vec::new();
                for _ in 0..max_apply_attempts {
                    let mut report = StepReport::default();
                    drain_answers(&test.app, &mut report).await.unwrap();
                    steps.push(report);
                }
                assert_eq!(steps[0].n_memories, n_good as u64, "every good answer applies on the first step");
                assert!(steps.iter().all(|step| step.n_apply_failures == n_bad as u64), "each bad answer is tried once per step");
                assert_eq!(steps.iter().map(|step| step.n_requests_quarantined).sum::<u64>(), n_bad as u64);
                for (id, bad) in &answers {
                    let status = store.listing().request_detail(*id).await.unwrap().status;
                    assert_eq!(status, if *bad { "failed" } else { "applied" });
                }
                assert!(store.requests().unapplied_answers(1000).await.unwrap().is_empty());
                let dead = store.listing().list_segments(None, Some("dead"), None).await.unwrap();
                assert_eq!(dead.len(), n_bad, "each quarantined answer's segment is dead with the reason");
                assert!(dead.iter().all(|segment| segment.last_error.as_deref().unwrap_or_default().contains("quarantined")));
                test.finish().await;
            });
        }
    }
}
