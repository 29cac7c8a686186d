//! Embeddings in the pipeline: the vector dedupe stage (invariant 8) and the memory context a
//! segment's payload shows (referenced memories first, then the most similar ones).

use chrono::Duration;
use memsift_core::RequestId;
use memsift_embed::HASHING_MODEL_ID;
use memsift_engine::embedding::EmbedPurpose;
use memsift_engine::pipeline::run_until_idle;
use memsift_sim::{FaultConfig, ResponderReply, ScriptedResponder};
use memsift_store::testing::TestDb;
use serde_json::{Value, json};

use crate::helpers::{TestApp, line};

/// Answers by what the user said, so each segment gets a known response whatever order the
/// batch holds them in.
fn script() -> ScriptedResponder {
    ScriptedResponder::from_fn(|request| {
        let label = request.turns.first().map(|turn| turn.label.clone()).unwrap_or_default();
        let items: Vec<Value> = if request.user_text.contains("I moved to Lisbon") {
            vec![json!({"text": "The user lives in Lisbon with a cat.", "evidence_turns": [label]})]
        } else if request.user_text.contains("Lisbon is lovely") {
            vec![
                // The same words reordered: a fuzzy ratio far below 0.95, the same bag of words.
                json!({"text": "With a cat, the user lives in Lisbon.", "evidence_turns": [label]}),
                json!({"text": "The user plays the cello on Sundays.", "evidence_turns": [label]}),
            ]
        } else {
            Vec::new()
        };
        ResponderReply::Text(Value::Array(items).to_string())
    })
}

async fn applied_request_of(test: &TestApp, user: &str, conversation_marker: &str) -> memsift_store::StoredOutput {
    for row in test
        .app
        .store
        .listing()
        .list_requests(Some(user), None, None)
        .await
        .unwrap()
    {
        let stored = test
            .app
            .store
            .requests()
            .stored_output(row.id.parse::<RequestId>().unwrap())
            .await
            .unwrap();
        let body = test
            .app
            .store
            .listing()
            .request_detail(stored.request_id)
            .await
            .unwrap()
            .raw_output
            .unwrap_or_default();
        if body.contains(conversation_marker) {
            return stored;
        }
    }
    panic!("no request of {user} answered with {conversation_marker}")
}

async fn a_reworded_fact_is_dropped_by_the_vector_stage(db: TestDb) {
    let test = TestApp::with_scripted_batch_sim(db, script()).await;
    test.import(
        "first.jsonl",
        &line("ana", "c1", 0, "user", "I moved to Lisbon with my cat.", true),
    )
    .await
    .unwrap();
    run_until_idle(&test.app).await.unwrap();
    let first = test.app.store.listing().list_memories("ana", None).await.unwrap();
    assert_eq!(first.len(), 1);
    let lisbon_id = first[0].id.clone();

    test.advance(Duration::hours(2));
    test.import(
        "second.jsonl",
        &line("ana", "c2", 200, "user", "Lisbon is lovely in spring.", true),
    )
    .await
    .unwrap();
    let report = run_until_idle(&test.app).await.unwrap();
    assert_eq!(report.n_memories, 1, "only the cello is new");
    let texts: Vec<String> = test.memory_texts("ana").await;
    assert_eq!(
        texts,
        vec![
            "The user lives in Lisbon with a cat.",
            "The user plays the cello on Sundays."
        ]
    );

    // The drop names the memory it duplicated and the cosine that decided it.
    let second = applied_request_of(&test, "ana", "cello").await;
    let detail = test
        .app
        .store
        .listing()
        .request_detail(second.request_id)
        .await
        .unwrap();
    let drops = detail.drops.0.clone();
    assert_eq!(drops.len(), 1, "{drops:?}");
    assert_eq!(drops[0].reason, memsift_core::drops::DropReason::DuplicateByVector);
    assert_eq!(drops[0].duplicate_of.map(|id| id.to_string()), Some(lisbon_id.clone()));
    assert!(drops[0].score.unwrap() >= 0.92, "{drops:?}");

    // The second segment was shown the first memory as similar context, so the model could
    // have marked it instead of restating it.
    let shown: Vec<String> = second.context.memories.values().map(|(id, _)| id.to_string()).collect();
    assert_eq!(shown, vec![lisbon_id]);

    // Every memory carries a vector of the configured model.
    let user_id = second.user_id;
    let vectors = test.app.store.vectors().user_memory_vectors(user_id).await.unwrap();
    assert_eq!(vectors.rows.len(), 2);
    assert!(
        vectors
            .rows
            .iter()
            .all(|row| row.model_id.as_deref() == Some(HASHING_MODEL_ID) && row.vector.is_some())
    );
    test.finish().await;
}

#[tokio::test]
async fn invariant_8_a_reworded_fact_is_dropped_by_the_vector_stage_on_sqlite() {
    a_reworded_fact_is_dropped_by_the_vector_stage(TestDb::sqlite().await).await;
}

#[tokio::test]
async fn invariant_8_a_reworded_fact_is_dropped_by_the_vector_stage_on_postgres() {
    a_reworded_fact_is_dropped_by_the_vector_stage(TestDb::postgres().await).await;
}

#[tokio::test]
async fn referenced_memories_come_first_in_the_context_then_the_nearest_by_stored_turn_vectors() {
    let (test, shown) = context_shown_for_a_new_segment(true).await;
    // Referenced first, then by cosine to what the user said (the dog before the city): every
    // memory has a cosine, so the city is shown too.
    assert!(
        shown.before("allergic to peanuts", "dog named Rex"),
        "{}",
        shown.message
    );
    assert!(shown.before("dog named Rex", "lives in Lisbon"), "{}", shown.message);
    test.finish().await;
}

#[tokio::test]
async fn before_its_turns_are_indexed_a_segment_is_shown_the_memories_that_share_its_words() {
    let (test, shown) = context_shown_for_a_new_segment(false).await;
    assert!(
        shown.before("allergic to peanuts", "dog named Rex"),
        "{}",
        shown.message
    );
    // No word of "My dog Rex loves the beach." is in the city's memory: not shown.
    assert!(!shown.message.contains("lives in Lisbon"), "{}", shown.message);
    test.finish().await;
}

/// What a planned request shows its model, in the prompt's order.
struct Shown {
    message: String,
}

impl Shown {
    fn before(&self, first: &str, second: &str) -> bool {
        let position = |needle: &str| {
            self.message
                .find(needle)
                .unwrap_or_else(|| panic!("`{needle}` is not shown:\n{}", self.message))
        };
        position(first) < position(second)
    }
}

/// Three memories for ana, then a new segment whose assistant turn referenced the peanut allergy
/// and whose user talks about the dog; planned with its turns indexed for search first (the
/// daemon's usual order) or not (a backlog just imported). Planning embeds nothing either way.
async fn context_shown_for_a_new_segment(index_first: bool) -> (TestApp, Shown) {
    let test = TestApp::with_batch_sim(TestDb::sqlite().await, FaultConfig::default()).await;
    // Three memories for ana through the heuristic responder.
    test.import(
        "facts.jsonl",
        &[
            line("ana", "c1", 0, "user", "I live in Lisbon.", false),
            line("ana", "c1", 1, "user", "I have a dog named Rex.", false),
            line("ana", "c1", 2, "user", "I'm allergic to peanuts.", true),
        ]
        .concat(),
    )
    .await
    .unwrap();
    run_until_idle(&test.app).await.unwrap();
    let memories = test.app.store.listing().list_memories("ana", None).await.unwrap();
    let id_of = |needle: &str| {
        memories
            .iter()
            .find(|memory| memory.text.contains(needle))
            .unwrap_or_else(|| panic!("no memory about {needle} in {memories:?}"))
            .id
            .clone()
    };
    let (peanuts, rex) = (id_of("peanuts"), id_of("Rex"));

    // The assistant was shown the peanut allergy; the user talks about the dog.
    let mut answer: Value = serde_json::from_str(&line(
        "ana",
        "c2",
        100,
        "assistant",
        "Remember to avoid satay, then.",
        true,
    ))
    .unwrap();
    answer["referenced_memory_ids"] = json!([peanuts]);
    test.advance(Duration::hours(2));
    test.import(
        "later.jsonl",
        &[
            line("ana", "c2", 99, "user", "My dog Rex loves the beach.", false),
            format!("{answer}\n"),
        ]
        .concat(),
    )
    .await
    .unwrap();
    if index_first {
        let n = memsift_engine::pipeline::index_turns(&test.app, None, None)
            .await
            .unwrap();
        assert_eq!(n, 2, "the new segment's two turns");
    }
    let config = &test.app.config;
    assert!(config.extraction.similar_memories > 0);
    let embedded = || {
        EmbedPurpose::ALL
            .into_iter()
            .map(|purpose| test.app.vectors.n_embedded(purpose))
            .sum::<u64>()
    };
    let before = embedded();
    let step = memsift_engine::pipeline::run_once(&test.app).await.unwrap();
    assert_eq!((step.n_requests_planned, step.n_memories), (1, 0), "{step:?}");
    assert_eq!(embedded(), before, "planning embeds nothing");
    let planned = test
        .app
        .store
        .listing()
        .list_requests(Some("ana"), None, None)
        .await
        .unwrap();
    let newest = planned.iter().max_by_key(|row| row.created_at).unwrap();
    let stored = test
        .app
        .store
        .requests()
        .stored_output(newest.id.parse::<RequestId>().unwrap())
        .await
        .unwrap();
    // The context map is keyed by short id; the prompt's line order is the order of relevance.
    let body = test.app.store.request_body(stored.request_id).await.unwrap();
    let message = body["user_message"].as_str().unwrap().to_owned();
    let shown: Vec<String> = stored.context.memories.values().map(|(id, _)| id.to_string()).collect();
    assert!(shown.contains(&peanuts) && shown.contains(&rex), "{shown:?}");
    (test, Shown { message })
}

async fn ana_with_two_memories() -> TestApp {
    let test = TestApp::sqlite().await;
    test.import(
        "chat.jsonl",
        &line(
            "ana",
            "c1",
            0,
            "user",
            "I live in Lisbon and I have a dog named Rex.",
            true,
        ),
    )
    .await
    .unwrap();
    run_until_idle(&test.app).await.unwrap();
    assert_eq!(
        test.app.store.listing().list_memories("ana", None).await.unwrap().len(),
        2
    );
    test
}

#[tokio::test]
async fn replay_restores_what_todays_rules_accept_once_and_journals_it() {
    let test = ana_with_two_memories().await;
    let memories = test.app.store.listing().list_memories("ana", None).await.unwrap();
    let rex = memories.iter().find(|memory| memory.text.contains("Rex")).unwrap();
    let request = test
        .app
        .store
        .listing()
        .list_requests(Some("ana"), Some("applied"), None)
        .await
        .unwrap()
        .remove(0);
    let request_id: RequestId = request.id.parse().unwrap();
    let stored = test.app.store.requests().stored_output(request_id).await.unwrap();
    // A fault lost one memory; the raw output that produced it is still stored.
    test.app
        .store
        .delete_test_memory(stored.user_id, rex.id.parse().unwrap())
        .await
        .unwrap();
    let context = test.app.apply_context();

    let before = test.app.store.listing().counts().await.unwrap();
    let dry = memsift_engine::apply::replay_request(&context, request_id, true)
        .await
        .unwrap();
    assert_eq!(dry.new_memories, vec![rex.text.clone()]);
    assert_eq!(dry.operation_id, None);
    assert_eq!(
        test.app.store.listing().counts().await.unwrap(),
        before,
        "a dry run writes nothing"
    );

    let replayed = memsift_engine::apply::replay_request(&context, request_id, false)
        .await
        .unwrap();
    assert_eq!(replayed.new_memories, vec![rex.text.clone()]);
    assert_eq!(replayed.dropped_by_reason.get("duplicate_of_existing"), Some(&1));
    assert!(replayed.operation_id.is_some());
    assert_eq!(test.app.store.count_rows("operations").await.unwrap(), 1);
    let texts: Vec<String> = test.memory_texts("ana").await;
    assert!(texts.contains(&rex.text), "{texts:?}");

    // Replaying again finds everything stored: nothing written, nothing journaled.
    let again = memsift_engine::apply::replay_request(&context, request_id, false)
        .await
        .unwrap();
    assert!(again.new_memories.is_empty());
    assert_eq!(test.app.store.count_rows("operations").await.unwrap(), 1);

    // A retired memory stays retired: replay does not bring it back.
    let lisbon = memories.iter().find(|memory| memory.text.contains("Lisbon")).unwrap();
    test.app
        .store
        .archive_test_memory(stored.user_id, lisbon.id.parse().unwrap())
        .await
        .unwrap();
    let after_archive = memsift_engine::apply::replay_request(&context, request_id, false)
        .await
        .unwrap();
    assert!(after_archive.new_memories.is_empty(), "{after_archive:?}");
    test.finish().await;
}

/// A tiny embedder standing in for "the model the operator switched to".
struct EightDimensions;

impl memsift_embed::Embedder for EightDimensions {
    fn model_id(&self) -> &str {
        "test-eight-dimensions"
    }

    fn dimension(&self) -> usize {
        8
    }

    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, memsift_embed::EmbedError> {
        Ok(texts
            .iter()
            .map(|text| {
                let mut vector = vec![0.0_f32; 8];
                for (position, byte) in text.bytes().enumerate() {
                    vector[position % 8] += f32::from(byte);
                }
                memsift_embed::l2_normalize(&mut vector);
                vector
            })
            .collect())
    }
}

#[tokio::test]
async fn reembed_moves_every_vector_to_the_new_model_once() {
    let test = ana_with_two_memories().await;
    let user_id = test
        .app
        .store
        .requests()
        .stored_output(
            test.app
                .store
                .listing()
                .list_requests(Some("ana"), None, None)
                .await
                .unwrap()[0]
                .id
                .parse()
                .unwrap(),
        )
        .await
        .unwrap()
        .user_id;
    let before = test.app.store.vectors().user_memory_vectors(user_id).await.unwrap();
    assert!(
        before
            .rows
            .iter()
            .all(|row| row.model_id.as_deref() == Some(HASHING_MODEL_ID))
    );

    let switched = test.second_daemon("after-the-switch");
    switched
        .vectors
        .use_embedder(std::sync::Arc::new(EightDimensions))
        .unwrap();
    let report = memsift_engine::embedding::reembed(&switched.store, &switched.vectors, 1, &|_| {})
        .await
        .unwrap();
    assert_eq!((report.n_memories, report.n_replaced, report.n_users), (2, 2, 1));
    let after = test.app.store.vectors().user_memory_vectors(user_id).await.unwrap();
    assert!(
        after
            .rows
            .iter()
            .all(|row| row.model_id.as_deref() == Some("test-eight-dimensions") && row.dimension == Some(8))
    );
    let again = memsift_engine::embedding::reembed(&switched.store, &switched.vectors, 100, &|_| {})
        .await
        .unwrap();
    assert_eq!(again.n_memories, 0, "a finished migration has nothing left to do");
    test.finish().await;
}

/// The hashing double, recording every text it is asked to embed.
#[derive(Default)]
struct CountingEmbedder {
    inner: memsift_embed::HashingEmbedder,
    asked: std::sync::Mutex<Vec<String>>,
}

impl memsift_embed::Embedder for CountingEmbedder {
    fn model_id(&self) -> &str {
        self.inner.model_id()
    }

    fn dimension(&self) -> usize {
        self.inner.dimension()
    }

    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, memsift_embed::EmbedError> {
        self.asked
            .lock()
            .unwrap()
            .extend(texts.iter().map(|text| (*text).to_owned()));
        self.inner.embed(texts)
    }
}

#[tokio::test]
async fn no_text_is_embedded_twice_and_every_caller_gets_its_own_vectors_in_order() {
    use memsift_embed::Embedder;

    let test = TestApp::sqlite().await;
    let counting = std::sync::Arc::new(CountingEmbedder::default());
    test.app.vectors.use_embedder(counting.clone()).unwrap();
    let expected = |texts: &[&str]| counting.inner.embed(texts).unwrap();
    let owned = |texts: &[&str]| texts.iter().map(|text| (*text).to_owned()).collect::<Vec<_>>();

    // Repeats within one call are embedded once and answered at every position.
    let first = [
        "a dog named Rex",
        "lives in Lisbon",
        "a dog named Rex",
        "plays the cello",
    ];
    let vectors = test.app.vectors.embed(owned(&first), EmbedPurpose::Item).await.unwrap();
    assert_eq!(vectors, expected(&first));
    // Two callers at once, each mixing texts seen before with their own new ones.
    let left = ["plays the cello", "works as a nurse", "a dog named Rex"];
    let right = [
        "has two sisters",
        "lives in Lisbon",
        "has two sisters",
        "plays the cello",
    ];
    let (left_vectors, right_vectors) = tokio::join!(
        test.app.vectors.embed(owned(&left), EmbedPurpose::Query),
        test.app.vectors.embed(owned(&right), EmbedPurpose::Turn)
    );
    assert_eq!(left_vectors.unwrap(), expected(&left));
    assert_eq!(right_vectors.unwrap(), expected(&right));

    let mut asked = counting.asked.lock().unwrap().clone();
    asked.sort();
    assert_eq!(
        asked,
        [
            "a dog named Rex",
            "has two sisters",
            "lives in Lisbon",
            "plays the cello",
            "works as a nurse"
        ]
    );
    // Each purpose counts what it handed to the embedder, not what it found made.
    let counted: Vec<u64> = EmbedPurpose::ALL
        .into_iter()
        .map(|purpose| test.app.vectors.n_embedded(purpose))
        .collect();
    assert_eq!(counted, [1, 3, 1, 0], "turn, item, query, memory");
    test.finish().await;
}

/// The bill's guard: a run through the batch lane embeds each stored turn once (for search
/// indexing, which planning reads), each item of an answer at most once (at apply), and nothing
/// else; a later feature that embeds a text again, or for a new reason, fails here.
#[tokio::test]
async fn a_batch_run_embeds_each_turn_once_each_item_at_most_once_and_nothing_else() {
    let test = TestApp::with_batch_sim(TestDb::sqlite().await, FaultConfig::default()).await;
    let counting = std::sync::Arc::new(CountingEmbedder::default());
    test.app.vectors.use_embedder(counting.clone()).unwrap();
    let said = |user: &str, conversation: &str, minute: i64, texts: &[&str]| -> String {
        texts
            .iter()
            .enumerate()
            .map(|(index, text)| {
                let last = index + 1 == texts.len();
                line(user, conversation, minute + index as i64, "user", text, last)
            })
            .collect()
    };
    // Two users, two conversations each; the second import is planned while both already hold
    // memories, and one sentence is said by both (one text, one embedding).
    let first = [
        said(
            "ana",
            "a1",
            0,
            &["I live in Lisbon.", "I have a dog named Rex.", "I work as a nurse."],
        ),
        said("bo", "b1", 0, &["I play the cello.", "I have a dog named Rex."]),
    ]
    .concat();
    let second = [
        said(
            "ana",
            "a2",
            200,
            &["I'm allergic to peanuts.", "My dog Rex loves the beach."],
        ),
        said(
            "bo",
            "b2",
            200,
            &["I moved to Porto last week.", "I am learning Japanese."],
        ),
    ]
    .concat();
    let mut total = memsift_engine::pipeline::StepReport::default();
    test.import("first.jsonl", &first).await.unwrap();
    total.add(&run_until_idle(&test.app).await.unwrap());
    test.advance(Duration::hours(3));
    test.import("second.jsonl", &second).await.unwrap();
    total.add(&run_until_idle(&test.app).await.unwrap());
    assert!(total.n_memories >= 8, "{total:?}");

    let n = |purpose| test.app.vectors.n_embedded(purpose);
    let turns: std::collections::BTreeSet<String> = format!("{first}{second}")
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap()["content"].to_string())
        .collect();
    assert_eq!(n(EmbedPurpose::Turn), turns.len() as u64, "each distinct turn once");
    assert_eq!(
        total.n_turns_embedded, 9,
        "every stored turn indexed, one text said twice"
    );
    // Every memory's text was embedded (once, whoever said it), and no more items than answered.
    let mut written = test.memory_texts("ana").await;
    written.extend(test.memory_texts("bo").await);
    written.sort();
    written.dedup();
    let items = n(EmbedPurpose::Item);
    assert!(
        items >= written.len() as u64 && items <= total.n_memories + total.n_items_dropped,
        "each item at most once: {items} embedded for {written:?}, {total:?}"
    );
    assert_eq!((n(EmbedPurpose::Query), n(EmbedPurpose::Memory)), (0, 0));
    let mut asked = counting.asked.lock().unwrap().clone();
    let n_asked = asked.len();
    asked.sort();
    asked.dedup();
    assert_eq!(asked.len(), n_asked, "no text was handed to the embedder twice");

    // Once idle, another run embeds nothing; a search embeds its query and nothing else.
    run_until_idle(&test.app).await.unwrap();
    assert_eq!(counting.asked.lock().unwrap().len(), n_asked);
    let request = memsift_engine::search::SearchRequest {
        include_turns: true,
        ..memsift_engine::search::SearchRequest::new("ana", "Where does she live?")
    };
    memsift_engine::search::search(&test.app, &request).await.unwrap();
    assert_eq!(n(EmbedPurpose::Query), 1);
    assert_eq!(counting.asked.lock().unwrap().len(), n_asked + 1);
    test.finish().await;
}
