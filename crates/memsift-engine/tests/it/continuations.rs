//! Answers cut off before their JSON closed, whatever their stop reason: the closed items are kept
//! and the rest of the chunk is asked for again, a bounded number of times.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use memsift_core::RequestId;
use memsift_core::drops::DropReason;
use memsift_engine::pipeline::run_until_idle;
use memsift_sim::{FaultConfig, ResponderReply, ResponderRequest, ScriptedResponder, SimConfig};
use memsift_store::testing::TestDb;
use serde_json::{Value, json};

use crate::helpers::{TestApp, batch_config, line};

const FACTS: [&str; 4] = [
    "I adopted a dog named Rex last spring.",
    "I work as a nurse at the county hospital.",
    "My sister Lena lives in Porto.",
    "I am training for the Berlin marathon.",
];

/// One segment of four user turns, each stating a fact, each answered by the assistant.
fn conversation() -> String {
    let mut jsonl = String::new();
    for (position, fact) in FACTS.iter().enumerate() {
        let minute = 2 * position as i64;
        jsonl += &line("ana", "c1", minute, "user", fact, false);
        jsonl += &line(
            "ana",
            "c1",
            minute + 1,
            "assistant",
            "Noted.",
            position + 1 == FACTS.len(),
        );
    }
    jsonl
}

/// The memory a model writes for a turn: the fact in the third person.
fn memory_of(content: &str) -> String {
    format!("Ana said: {}", content.trim_end_matches('.'))
}

/// A complete answer: one item per user turn of the request, citing it.
fn full_answer(request: &ResponderRequest<'_>) -> String {
    let items: Vec<Value> = request
        .turns
        .iter()
        .filter(|turn| turn.role == memsift_core::status::Role::User)
        .map(|turn| json!({"text": memory_of(&turn.content), "evidence_turns": [turn.label]}))
        .collect();
    Value::Array(items).to_string()
}

/// `answer` cut inside its third element, as a model that stops early writes it.
fn cut_inside_third_item(answer: &str) -> String {
    let third = answer
        .match_indices("{\"")
        .nth(2)
        .map_or(answer.len() / 2, |(at, _)| at);
    answer[..third + 12].to_owned()
}

async fn requests_of(test: &TestApp) -> Vec<memsift_store::RequestDetail> {
    let mut details = Vec::new();
    for row in test
        .app
        .store
        .listing()
        .list_requests(Some("ana"), None, None)
        .await
        .unwrap()
    {
        let id: RequestId = row.id.parse().unwrap();
        details.push(test.app.store.listing().request_detail(id).await.unwrap());
    }
    details.sort_by_key(|detail| detail.attempt);
    details
}

async fn segment_status(test: &TestApp) -> (String, Option<String>) {
    let segments = test
        .app
        .store
        .listing()
        .list_segments(Some("ana"), None, None)
        .await
        .unwrap();
    assert_eq!(segments.len(), 1, "{segments:?}");
    (segments[0].status.clone(), segments[0].last_error.clone())
}

async fn an_answer_cut_with_end_turn_is_continued_until_every_item_is_stored(db: TestDb) {
    let answers = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&answers);
    let script = ScriptedResponder::from_fn(move |request| {
        let full = full_answer(request);
        // Only the first answer stops early; the simulator reports it finished (`end_turn`).
        let text = if counted.fetch_add(1, Ordering::SeqCst) == 0 {
            cut_inside_third_item(&full)
        } else {
            full
        };
        ResponderReply::Text(text)
    });
    let test = TestApp::with_scripted_batch_sim(db, script).await;
    extract_and_expect_every_fact_once(&test, "every fact once, the cut part included").await;
    assert_eq!(answers.load(Ordering::SeqCst), 2, "one continuation");

    let requests = requests_of(&test).await;
    assert_eq!(requests.len(), 2, "{requests:?}");
    let (cut, continuation) = (&requests[0], &requests[1]);
    assert_eq!(cut.stop_reason.as_deref(), Some("end_turn"));
    assert_eq!((cut.status.as_str(), cut.n_items), ("applied", 2));
    let truncated: Vec<_> = cut
        .drops
        .0
        .iter()
        .filter(|drop| drop.reason == DropReason::Truncated)
        .collect();
    assert_eq!(truncated.len(), 1, "{:?}", cut.drops.0);
    let detail = truncated[0].detail.as_deref().unwrap_or_default();
    assert!(
        detail.contains(&format!("goes to request {}", continuation.id)),
        "{detail}"
    );
    // The continuation reads the whole chunk again, with the two kept items first among the known
    // memories; the two facts this model writes again are duplicates of stored memories.
    let body = test
        .app
        .store
        .request_body(continuation.id.parse().unwrap())
        .await
        .unwrap()
        .to_string();
    assert!(FACTS.iter().all(|fact| body.contains(fact)), "{body}");
    assert!(
        body.contains(&memory_of(FACTS[0])) && body.contains(&memory_of(FACTS[1])),
        "{body}"
    );
    let depth = test
        .app
        .store
        .requests()
        .stored_output(continuation.id.parse().unwrap())
        .await
        .unwrap()
        .context
        .continuation;
    assert_eq!(depth, 1);
    assert_eq!((continuation.chunk_index, continuation.status.as_str()), (0, "applied"));
    assert_eq!(continuation.n_items, 2);
    assert_eq!(
        continuation.drops.0.iter().map(|drop| drop.reason).collect::<Vec<_>>(),
        vec![DropReason::DuplicateOfExisting; 2]
    );
    test.finish().await;
}

#[tokio::test]
async fn an_answer_cut_with_end_turn_is_continued_until_every_item_is_stored_on_sqlite() {
    an_answer_cut_with_end_turn_is_continued_until_every_item_is_stored(TestDb::sqlite().await).await;
}

#[tokio::test]
async fn an_answer_cut_with_end_turn_is_continued_until_every_item_is_stored_on_postgres() {
    an_answer_cut_with_end_turn_is_continued_until_every_item_is_stored(TestDb::postgres().await).await;
}

async fn a_model_that_always_stops_early_is_continued_a_bounded_number_of_times(db: TestDb) {
    let answers = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&answers);
    // Nothing closes, so nothing is salvaged and each continuation asks for the whole chunk again.
    let script = ScriptedResponder::from_fn(move |_| {
        counted.fetch_add(1, Ordering::SeqCst);
        ResponderReply::Text(r#"[{"text": "Ana adopted a dog na"#.to_owned())
    });
    let test = TestApp::with_scripted_batch_sim(db, script).await;
    let max = test.app.config.extraction.max_continuations;
    assert!(max > 0);
    test.import("c1.jsonl", &conversation()).await.unwrap();
    run_until_idle(&test.app).await.unwrap();

    assert_eq!(answers.load(Ordering::SeqCst), 1 + max as usize);
    assert_eq!(segment_status(&test).await, ("extracted".to_owned(), None));
    assert!(test.memory_texts("ana").await.is_empty());
    let requests = requests_of(&test).await;
    assert_eq!(requests.len(), 1 + max as usize, "{requests:?}");
    assert!(requests.iter().all(|request| request.status == "applied"));
    let last = requests.last().unwrap();
    let reason = last.error.as_deref().unwrap_or_default();
    assert!(reason.contains("max_continuations"), "{reason}");
    assert!(
        last.drops.0.iter().any(|drop| drop.reason == DropReason::Truncated
            && drop
                .detail
                .as_deref()
                .is_some_and(|detail| detail.contains("not extracted"))),
        "{:?}",
        last.drops.0
    );
    test.finish().await;
}

#[tokio::test]
async fn a_model_that_always_stops_early_is_continued_a_bounded_number_of_times_on_sqlite() {
    a_model_that_always_stops_early_is_continued_a_bounded_number_of_times(TestDb::sqlite().await).await;
}

#[tokio::test]
async fn a_model_that_always_stops_early_is_continued_a_bounded_number_of_times_on_postgres() {
    a_model_that_always_stops_early_is_continued_a_bounded_number_of_times(TestDb::postgres().await).await;
}

/// Memories stored from a LoCoMo file (`MEMSIFT_LOCOMO`, else the small fixture) on the batch
/// lane of the heuristic simulator cutting `cut_share` of its answers with `end_turn`, with at
/// most `max_continuations` per chunk; and how many requests that took.
async fn memories_with_cuts(cut_share: f64, max_continuations: u32) -> (i64, i64) {
    let path = std::env::var("MEMSIFT_LOCOMO")
        .unwrap_or_else(|_| concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/locomo-format.json").to_owned());
    let faults = FaultConfig {
        seed: 27,
        cut_share,
        ..FaultConfig::default()
    };
    let sim_config = SimConfig::from_cli("heuristic", None).unwrap().with_faults(faults);
    let test = TestApp::on_sim(TestDb::sqlite().await, sim_config, |sim, key_file| {
        let mut config = batch_config(&sim.base_url, key_file);
        config.extraction.max_continuations = max_continuations;
        config
    })
    .await;
    memsift_engine::ingest::import_file(
        &test.app,
        std::path::Path::new(&path),
        memsift_import::ImportFormat::Locomo,
        &|_, _| {},
    )
    .await
    .unwrap();
    run_until_idle(&test.app).await.unwrap();
    let counts = (
        test.app.store.count_rows("memories").await.unwrap(),
        test.app.store.count_rows("llm_requests").await.unwrap(),
    );
    test.finish().await;
    counts
}

/// Also the figure in BENCHMARKS.md: `MEMSIFT_LOCOMO=PATH cargo test -p memsift-engine --features
/// testing --test it continuations::cut_answers -- --nocapture` prints the memories each fault share
/// and bound stores.
#[tokio::test]
async fn cut_answers_lose_nothing_the_uncut_run_stores() {
    let (baseline, baseline_requests) = memories_with_cuts(0.0, 0).await;
    println!("no cuts: {baseline} memories, {baseline_requests} requests");
    for share in [0.1, 0.3] {
        for max_continuations in [0, 2, 5] {
            let (stored, requests) = memories_with_cuts(share, max_continuations).await;
            println!(
                "cut_share {share}, max_continuations {max_continuations}: {stored} memories ({} lost), {requests} requests",
                baseline - stored
            );
        }
    }
    // Every answer cut in half: without continuations each loses its second half.
    let (before, _) = memories_with_cuts(1.0, 0).await;
    // Half the answers cut, continuations included: a chunk is lost only after 21 cuts in a row.
    let (after, _) = memories_with_cuts(0.5, 20).await;
    assert!(
        before < baseline,
        "the fault must cut something: {before} of {baseline}"
    );
    assert_eq!(after, baseline, "continuations bring back what the cuts lost");
}

/// Imports the conversation, runs to idle, and checks every fact is stored once and the segment
/// extracted; `context` names the case in a failure.
async fn extract_and_expect_every_fact_once(test: &TestApp, context: &str) {
    test.import("c1.jsonl", &conversation()).await.unwrap();
    run_until_idle(&test.app).await.unwrap();
    let mut stored = test.memory_texts("ana").await;
    stored.sort();
    let mut expected: Vec<String> = FACTS.iter().map(|fact| memory_of(fact)).collect();
    expected.sort();
    assert_eq!(stored, expected, "{context}");
    assert_eq!(segment_status(test).await, ("extracted".to_owned(), None));
}

/// Every order of four items over four turns (a model groups by speaker or topic, not by turn),
/// each cut once at a point that varies with the order: the continuation reads the whole chunk,
/// this model writes only what its known memories do not hold, and every fact is stored once.
#[tokio::test]
async fn items_in_any_order_are_all_stored_once_whatever_the_cut() {
    let mut orders: Vec<Vec<usize>> = vec![Vec::new()];
    for _ in 0..FACTS.len() {
        let mut longer = Vec::new();
        for order in &orders {
            for turn in (0..FACTS.len()).filter(|turn| !order.contains(turn)) {
                longer.push([order.clone(), vec![turn]].concat());
            }
        }
        orders = longer;
    }
    assert_eq!(orders.len(), 24);
    for (case, order) in orders.into_iter().enumerate() {
        let cut_fraction = [0.3, 0.5, 0.8][case % 3];
        let answers = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&answers);
        let script = ScriptedResponder::from_fn(move |request| {
            let user_turns: Vec<_> = request
                .turns
                .iter()
                .filter(|turn| turn.role == memsift_core::status::Role::User)
                .collect();
            let items: Vec<Value> = order
                .iter()
                .filter_map(|&position| user_turns.get(position))
                .map(|turn| (memory_of(&turn.content), &turn.label))
                .filter(|(text, _)| !request.user_text.contains(&format!("] {text}\n")))
                .map(|(text, label)| json!({"text": text, "evidence_turns": [label]}))
                .collect();
            let full = Value::Array(items).to_string();
            let text = if counted.fetch_add(1, Ordering::SeqCst) == 0 {
                let mut at = (full.len() as f64 * cut_fraction) as usize;
                while !full.is_char_boundary(at) {
                    at -= 1;
                }
                full[..at].to_owned()
            } else {
                full
            };
            ResponderReply::Text(text)
        });
        let test = TestApp::with_scripted_batch_sim(TestDb::sqlite().await, script).await;
        extract_and_expect_every_fact_once(&test, &format!("case {case} (cut at {cut_fraction})")).await;
        test.finish().await;
    }
}
