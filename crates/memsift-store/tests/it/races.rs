//! Races between erasure and everything else that writes a user's data (ingest, extraction
//! planning, answers, applies, post-processing planning and verdicts), parallel appends to one
//! conversation, and message times far from the clock.
//!
//! The interleavings are generated (proptest's runner, a fixed case count, no shrinking since the
//! store is shared) and driven step by step: the erasure runs before, after or at once with a
//! chosen step (both futures polled together, so on PostgreSQL their transactions truly overlap),
//! never after a sleep.

use chrono::Duration;
use memsift_core::request::RequestBody;
use memsift_core::status::{Purpose, Role};
use memsift_core::{RequestId, SegmentId, UserId};
use memsift_store::{Covered, NewRequest, Store, StoreError};
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};

use crate::helpers::{apply_input, idle, item, message, no_progress, request, t0};

/// The facts of a raw output as the tests write them: a JSON list of `{"text": …}`.
pub fn json_fact_keys(_purpose: &str, raw: &str) -> Vec<String> {
    serde_json::from_str::<Vec<serde_json::Value>>(raw)
        .unwrap_or_default()
        .iter()
        .filter_map(|element| element["text"].as_str().map(memsift_core::text::dedupe_key))
        .collect()
}

/// Cases of the erasure race, per backend.
pub const ERASE_RACE_CASES: u32 = 24;

const MARKER: &str = "Quokkaville";

/// What the steps before a given one left for it.
#[derive(Default)]
struct Progress {
    user: Option<UserId>,
    segment: Option<SegmentId>,
    extraction: Option<NewRequest>,
    stage: Option<NewRequest>,
}

/// The steps every case runs in order; the erasure is placed among them.
const N_STEPS: usize = 8;

async fn step(store: &Store, index: usize, progress: &mut Progress) -> Result<(), StoreError> {
    let now = t0() + Duration::minutes(10);
    match index {
        0 | 7 => {
            let base = if index == 0 { 0 } else { 3 };
            let mut messages: Vec<_> = (0..3)
                .map(|n| {
                    let text = format!("I moved to {MARKER} in year {}.", base + n);
                    message("ana", "c1", base + n, Role::User, &text)
                })
                .collect();
            messages[2].boundary_after = true;
            store.messages().ingest(&messages, idle(), now, &no_progress).await?;
        }
        1 => {
            let claimed = store
                .segments()
                .claim_segments("worker-a", now, Duration::minutes(15), 10)
                .await?;
            if let Some(segment) = claimed.first() {
                progress.user = Some(segment.user_id);
                progress.segment = Some(segment.id);
                let mut planned = request(segment.id, segment.user_id, 0);
                planned.request_body = RequestBody {
                    system: "extract".to_owned(),
                    user_message: format!("<turn>I moved to {MARKER}.</turn>"),
                };
                store
                    .requests()
                    .plan_segment_requests(segment.id, std::slice::from_ref(&planned), now)
                    .await?;
                progress.extraction = Some(planned);
            }
        }
        2 => {
            if let Some(planned) = &progress.extraction {
                let raw =
                    format!(r#"[{{"text": "Ana moved to {MARKER}."}}, {{"text": "Ana has moved to {MARKER} now."}}]"#);
                store.record_output(planned.id, &raw, Some("end_turn"), now).await?;
            }
        }
        3 => {
            if let Some(planned) = &progress.extraction {
                let input = apply_input(planned, vec![item(&format!("Ana moved to {MARKER}."), vec![])]);
                store.memories().apply(&input).await?;
            }
        }
        4 => {
            if let Some(user_id) = progress.user {
                let planned = NewRequest {
                    id: RequestId::new_v7(),
                    purpose: Purpose::Relationship,
                    segment_id: None,
                    config_key: "relationship_standard".to_owned(),
                    request_body: RequestBody {
                        system: "relate".to_owned(),
                        user_message: format!("{{\"task\": \"relate\", \"m1\": \"Ana moved to {MARKER}.\"}}"),
                    },
                    ..request(SegmentId::new_v7(), user_id, 0)
                };
                let covered = Covered {
                    related: &[],
                    reviewed: &[],
                };
                store
                    .stages()
                    .plan_stage_requests(std::slice::from_ref(&planned), &covered, now)
                    .await?;
                progress.stage = Some(planned);
            }
        }
        5 => {
            if let Some(planned) = &progress.stage {
                let raw = format!(r#"{{"verdicts": [], "note": "{MARKER}"}}"#);
                store.record_output(planned.id, &raw, Some("end_turn"), now).await?;
            }
        }
        6 => {
            if let Some(planned) = &progress.stage {
                store
                    .stages()
                    .apply_without_change(planned.id, 0, Some("nothing to link"), now)
                    .await?;
            }
        }
        _ => unreachable!("{N_STEPS} steps"),
    }
    Ok(())
}

/// Erasure races ingest, extraction and post-processing: wherever it lands (before, after or
/// overlapping any step), the erased user keeps nothing, whatever it received; a later ingest is
/// a new user, whom the second erasure removes, after which no text of either is anywhere.
pub async fn an_erasure_racing_any_write_of_the_user_leaves_nothing_of_them(store: &Store) {
    let mut runner = TestRunner::new_with_rng(
        Config::with_cases(ERASE_RACE_CASES),
        TestRng::deterministic_rng(RngAlgorithm::ChaCha),
    );
    let strategy = (0..=N_STEPS, any::<bool>(), any::<bool>());
    for case in 0..ERASE_RACE_CASES {
        let (erase_at, overlap, erase_first) = strategy.new_tree(&mut runner).unwrap().current();
        let mut progress = Progress::default();
        let mut receipt = None;
        for index in 0..N_STEPS {
            if index == erase_at && overlap {
                let erase = store.erasure().erase_user("ana", t0(), &json_fact_keys);
                let (erased, _) = if erase_first {
                    tokio::join!(erase, step(store, index, &mut progress))
                } else {
                    let (stepped, erased) = tokio::join!(step(store, index, &mut progress), erase);
                    (erased, stepped)
                };
                receipt = Some(erased);
            } else {
                if index == erase_at {
                    receipt = Some(store.erasure().erase_user("ana", t0(), &json_fact_keys).await);
                }
                // A step after the erasure may find its rows gone; what it must not do is write.
                let _ = step(store, index, &mut progress).await;
            }
        }
        if erase_at == N_STEPS {
            receipt = Some(store.erasure().erase_user("ana", t0(), &json_fact_keys).await);
        }
        let label = format!("case {case}: erase at step {erase_at}, overlapping {overlap}, first {erase_first}");
        match receipt.expect("the erasure ran") {
            Ok(_) | Err(StoreError::NotFound(_)) => {}
            Err(error) => panic!("{label}: the erasure failed: {error}"),
        }
        if let Some(user_id) = progress.user {
            let rows = store.user_rows(user_id).await.unwrap();
            assert!(
                rows.memories.is_empty() && rows.entities.is_empty() && rows.evidence.is_empty(),
                "{label}: {rows:?}"
            );
        }
        // What an ingest after the erasure stored belongs to a new user; erase them too.
        let _ = store.erasure().erase_user("ana", t0(), &json_fact_keys).await;
        let found = store.find_text_anywhere(MARKER).await.unwrap();
        assert!(found.is_empty(), "{label}: the erased text is still in {found:?}");
        let segments = store.listing().list_segments(Some("ana"), None, None).await.unwrap();
        assert!(segments.is_empty(), "{label}: {segments:?}");
    }
}

/// Twenty appends to one conversation at once, each its own transaction with its own message
/// id, all succeed and number the conversation's messages 0..20 without a gap or a twin.
pub async fn parallel_appends_to_one_conversation_all_succeed_with_distinct_sequence_numbers(store: &Store) {
    store
        .messages()
        .ingest(
            &[message("ana", "c1", 0, Role::User, "first")],
            idle(),
            t0(),
            &no_progress,
        )
        .await
        .unwrap();
    let mut appends = tokio::task::JoinSet::new();
    for n in 1..=20 {
        let mut one = message("ana", "c1", 1, Role::User, &format!("append {n}"));
        one.external_id = Some(format!("m{n}"));
        let store = store.clone();
        appends.spawn(async move { store.messages().ingest(&[one], idle(), t0(), &no_progress).await });
    }
    let results = appends.join_all().await;
    let failed: Vec<String> = results
        .iter()
        .filter_map(|result| result.as_ref().err().map(ToString::to_string))
        .collect();
    assert!(failed.is_empty(), "{} of 20 appends failed: {failed:?}", failed.len());
    let segments = store.listing().list_segments(Some("ana"), None, None).await.unwrap();
    assert_eq!(segments.len(), 1, "{segments:?}");
    assert_eq!(segments[0].n_messages, 21);
}

/// Message times from far in the past to far in the future: a time more than the allowed skew
/// after arrival is stored at arrival and counted, and no time keeps a conversation open once
/// its last arrival is idle.
pub async fn no_message_time_keeps_a_conversation_open_past_its_idle_timeout(store: &Store) {
    let mut runner = TestRunner::new_with_rng(Config::with_cases(16), TestRng::deterministic_rng(RngAlgorithm::ChaCha));
    // Minutes from the arrival time: up to ±80 years, with the skew's edge in reach.
    let offsets = prop_oneof![-42_000_000_i64..42_000_000, 1430_i64..1450];
    for case in 0..16 {
        let offset = offsets.new_tree(&mut runner).unwrap().current();
        let user = format!("user-{case}");
        let arrived = t0() + Duration::days(case);
        let mut dated = message(&user, "c1", 0, Role::User, "hello");
        dated.at = arrived + Duration::minutes(offset);
        let report = store
            .messages()
            .ingest(&[dated.clone()], idle(), arrived, &no_progress)
            .await
            .unwrap();
        let clamped = Duration::minutes(offset) > memsift_store::MAX_FUTURE_SKEW;
        assert_eq!(report.n_times_clamped, u64::from(clamped), "offset {offset} min");
        let listed = store.listing().list_segments(Some(&user), None, None).await.unwrap();
        let expected = memsift_store::stored_message_time(dated.at, arrived);
        assert_eq!(listed[0].last_message_at, expected, "offset {offset} min");
        assert!(listed[0].last_message_at <= arrived + memsift_store::MAX_FUTURE_SKEW);
        // Once the arrival is idle, the segment closes, whatever the message said.
        store
            .messages()
            .close_idle_segments(arrived + idle(), idle())
            .await
            .unwrap();
        let status = store.listing().list_segments(Some(&user), None, None).await.unwrap()[0]
            .status
            .clone();
        assert_eq!(status, "closed", "offset {offset} min");
    }
}
