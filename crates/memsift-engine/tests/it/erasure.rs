//! The erasure audit: after `memsift erase`, none of the user's words is left anywhere an auditor
//! can look (every text column through SQL; on SQLite the raw database files, write-ahead log
//! included), and no write path can store an erased fact again.

use memsift_core::status::{Lane, Purpose};
use memsift_core::{MemoryId, RequestId};
use memsift_engine::apply::replay_request;
use memsift_engine::pipeline::run_until_idle;
use memsift_store::{Covered, NewRequest, Replacement, RequestUsage, Revision, RunCap, StageOutcome, Store};

use crate::helpers::{TestApp, line, t0};

/// Words that appear nowhere but in the erased user's conversation (and so in what memsift
/// derived from it), each from a different place it must be gone from.
const WORDS: [&str; 6] = [
    "quetzalburg",   // a message, a memory, an entity, a summary
    "xylophonist",   // a message, a memory
    "zorblax",       // a message, a memory (a pet's name)
    "vandermolen",   // a provider's error text stored on a request
    "oskarvik",      // a consolidated memory and its journal row
    "plimsollvania", // a superseding memory and its journal row
];

fn conversation(user: &str) -> String {
    [
        line(user, "c1", 0, "user", "I live in Quetzalburg.", false),
        line(user, "c1", 1, "assistant", "Quetzalburg sounds lovely!", false),
        line(user, "c1", 2, "user", "I work as a xylophonist.", false),
        line(user, "c1", 3, "user", "I have a dog named Zorblax.", false),
        line(user, "c1", 4, "user", "I love hiking.", true),
    ]
    .concat()
}

/// An answered post-processing request of `user_id`, ready to apply (or to fail).
async fn stage_request(store: &Store, user_id: memsift_core::UserId, purpose: Purpose) -> RequestId {
    let request = NewRequest {
        id: RequestId::new_v7(),
        purpose,
        user_id,
        segment_id: None,
        chunk_index: 0,
        lane: Lane::Heuristic,
        config_key: format!("{}_standard", purpose.as_str()),
        provider: "heuristic".to_owned(),
        model: None,
        prompt_version: "offline-judge@test".to_owned(),
        context: Default::default(),
        request_body: Default::default(),
        subject: Default::default(),
        parent_request_id: None,
        reserved_usd: 0.0,
        max_output_tokens: None,
    };
    store
        .stages()
        .plan_stage_requests(std::slice::from_ref(&request), &Covered::default(), t0())
        .await
        .unwrap();
    request.id
}

async fn memory_ids_with(store: &Store, user: &str, word: &str) -> Vec<MemoryId> {
    store
        .listing()
        .list_memories(user, None)
        .await
        .unwrap()
        .into_iter()
        .filter(|memory| memory.text.to_lowercase().contains(word))
        .map(|memory| MemoryId::parse(&memory.id).unwrap())
        .collect()
}

async fn erasure_leaves_no_word_and_no_way_back(test: TestApp) {
    let app = &test.app;
    let store = &app.store;
    let zed = extract_and_summarize_zed_beside_bo(&test).await;
    store_the_words_on_every_other_write_path(store, zed).await;
    for word in WORDS {
        assert!(
            !store.find_text_anywhere(word).await.unwrap().is_empty(),
            "{word} was never stored"
        );
    }
    let bo_before = store.listing().list_memories("bo", None).await.unwrap();

    let receipt = memsift_engine::erase::erase_user(app, "zed").await.unwrap();
    assert!(receipt.n_memories > 0 && receipt.n_tombstones > 0, "{receipt:?}");

    assert_no_word_is_left_in_sql_or_in_the_files(store).await;
    assert!(store.find_text_anywhere("\"zed\"").await.unwrap().is_empty());
    assert_eq!(
        store.listing().list_memories("bo", None).await.unwrap(),
        bo_before,
        "another user's memories are spared"
    );

    let zed_again = extraction_writes_none_of_the_erased_facts_again(&test).await;
    // Nor a consolidation, nor an operator's supersede, nor a replay.
    stage_writes_and_revisions_refuse_the_erased_facts(store, zed_again).await;
    replays_write_none_of_the_erased_facts(&test).await;
    for word in ["quetzalburg", "xylophonist", "zorblax"] {
        assert!(
            memory_ids_with(store, "zed", word).await.is_empty(),
            "`{word}` came back"
        );
    }
    test.finish().await;
}

/// Zed's and bo's conversations extracted, and zed's summarized, so zed's words are in messages,
/// memories, entities and a summary; zed's user id.
async fn extract_and_summarize_zed_beside_bo(test: &TestApp) -> memsift_core::UserId {
    let app = &test.app;
    let store = &app.store;
    test.import("zed.jsonl", &conversation("zed")).await.unwrap();
    test.import(
        "bo.jsonl",
        &[
            line("bo", "c2", 0, "user", "I live in Oslo.", false),
            line("bo", "c2", 1, "user", "I have a cat named Pusur.", true),
        ]
        .concat(),
    )
    .await
    .unwrap();
    run_until_idle(app).await.unwrap();
    for word in ["quetzalburg", "xylophonist", "zorblax"] {
        assert!(
            !memory_ids_with(store, "zed", word).await.is_empty(),
            "no memory says {word}"
        );
    }
    memsift_engine::pipeline::run_stage(app, memsift_engine::stages::Stage::Summaries, Some("zed"), false, true)
        .await
        .unwrap();
    assert!(!store.find_text_anywhere("quetzalburg").await.unwrap().is_empty());
    store.listing().user_id("zed").await.unwrap().unwrap()
}

/// The words extraction does not write: a provider's error on a failed request, a consolidation
/// and an operator's supersede, each with its journal row.
async fn store_the_words_on_every_other_write_path(store: &Store, zed: memsift_core::UserId) {
    // A provider's error that quotes the prompt, kept on a failed attempt.
    let failed = stage_request(store, zed, Purpose::Refinement).await;
    store
        .requests()
        .record_failure(
            failed,
            memsift_core::status::RequestStatus::Errored,
            "invalid_request_error: ... the user's friend Vandermolen ...",
            t0(),
        )
        .await
        .unwrap();
    // A consolidation whose new text and journal row hold a word.
    let pair: Vec<MemoryId> = [
        memory_ids_with(store, "zed", "xylophonist").await[0],
        memory_ids_with(store, "zed", "hiking").await[0],
    ]
    .to_vec();
    let review = stage_request(store, zed, Purpose::ConsolidationReview).await;
    store
        .requests()
        .record_answer(review, "{}", None, &RequestUsage::default(), t0())
        .await
        .unwrap();
    let replaced = store
        .stages()
        .apply_replacement(&Replacement {
            request_id: review,
            user_id: zed,
            originals: pair,
            new_texts: vec!["The user is a xylophonist from Oskarvik who loves hiking.".to_owned()],
            embeddings: None,
            kind: "consolidate",
            reason: "same person".to_owned(),
            cap: RunCap {
                run: "audit".to_owned(),
                cap: 5,
            },
            now: t0(),
            narrowed: None,
        })
        .await
        .unwrap();
    assert!(
        matches!(replaced, StageOutcome::Applied(ref applied) if applied.n_memories_created == 1),
        "{replaced:?}"
    );
    // An operator's supersede, journaled.
    let dog = memory_ids_with(store, "zed", "zorblax").await[0];
    store
        .memories()
        .revise_memory(
            "zed",
            dog,
            &Revision::Supersede {
                content: "The user's dog Zorblax comes from Plimsollvania.".to_owned(),
            },
            "the user said so",
            t0(),
        )
        .await
        .unwrap();
}

/// No erased word in any text column, nor (on SQLite) in the bytes of the database files.
async fn assert_no_word_is_left_in_sql_or_in_the_files(store: &Store) {
    for word in WORDS {
        let found = store.find_text_anywhere(word).await.unwrap();
        assert!(found.is_empty(), "`{word}` is still in {found:?}");
        for file in store.database_files() {
            let Ok(bytes) = std::fs::read(&file) else { continue };
            let lowered: Vec<u8> = bytes.iter().map(u8::to_ascii_lowercase).collect();
            assert!(
                !lowered.windows(word.len()).any(|window| window == word.as_bytes()),
                "`{word}` is still in the bytes of {}",
                file.display()
            );
        }
    }
}

/// The same conversation again: extraction writes none of the erased facts. Zed's new user id.
async fn extraction_writes_none_of_the_erased_facts_again(test: &TestApp) -> memsift_core::UserId {
    let store = &test.app.store;
    test.import("zed-again.jsonl", &conversation("zed")).await.unwrap();
    let again = run_until_idle(&test.app).await.unwrap();
    assert!(again.n_items_dropped > 0, "{again:?}");
    for word in ["quetzalburg", "xylophonist", "zorblax"] {
        assert!(
            memory_ids_with(store, "zed", word).await.is_empty(),
            "`{word}` came back through extraction"
        );
    }
    store.listing().user_id("zed").await.unwrap().unwrap()
}

/// A consolidation into an erased fact creates nothing, and a supersede to one is refused.
async fn stage_writes_and_revisions_refuse_the_erased_facts(store: &Store, zed_again: memsift_core::UserId) {
    let hiking = memory_ids_with(store, "zed", "hiking").await;
    let Some(&kept) = hiking.first() else { return };
    let review = stage_request(store, zed_again, Purpose::ConsolidationReview).await;
    store
        .requests()
        .record_answer(review, "{}", None, &RequestUsage::default(), t0())
        .await
        .unwrap();
    let outcome = store
        .stages()
        .apply_replacement(&Replacement {
            request_id: review,
            user_id: zed_again,
            originals: vec![kept],
            new_texts: vec!["I live in Quetzalburg.".to_owned()],
            embeddings: None,
            kind: "consolidate",
            reason: "audit".to_owned(),
            cap: RunCap {
                run: "audit-2".to_owned(),
                cap: 5,
            },
            now: t0(),
            narrowed: None,
        })
        .await
        .unwrap();
    let StageOutcome::Applied(applied) = outcome else {
        panic!("first apply")
    };
    assert_eq!(applied.n_memories_created, 0);
    assert!(applied.note.unwrap_or_default().contains("erased"));
    let refused = store
        .memories()
        .revise_memory(
            "zed",
            kept,
            &Revision::Supersede {
                content: "I live in Quetzalburg.".to_owned(),
            },
            "audit",
            t0(),
        )
        .await
        .unwrap_err()
        .to_string();
    assert!(refused.contains("erased"), "{refused}");
}

/// Replaying any of zed's applied requests writes none of the erased words.
async fn replays_write_none_of_the_erased_facts(test: &TestApp) {
    let app = &test.app;
    for request in app
        .store
        .listing()
        .list_requests(Some("zed"), Some("applied"), None)
        .await
        .unwrap()
    {
        let report = replay_request(&app.apply_context(), RequestId::parse(&request.id).unwrap(), false)
            .await
            .unwrap();
        assert!(
            report
                .new_memories
                .iter()
                .all(|text| !WORDS.iter().any(|word| text.to_lowercase().contains(word))),
            "{report:?}"
        );
    }
}

#[tokio::test]
async fn erasure_leaves_no_word_and_no_way_back_on_sqlite() {
    erasure_leaves_no_word_and_no_way_back(TestApp::sqlite().await).await;
}

#[tokio::test]
async fn erasure_leaves_no_word_and_no_way_back_on_postgres() {
    erasure_leaves_no_word_and_no_way_back(TestApp::postgres().await).await;
}
