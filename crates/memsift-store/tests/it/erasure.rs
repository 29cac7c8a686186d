//! The erasure case: a user's data goes, tombstones keep the erased facts from coming back, and
//! other users are untouched.

use memsift_store::{ApplyInput, ApplyOutcome, ItemEmbeddings, Store};

use crate::helpers::{apply_input, closed_claimed_segment, idle, item, message, no_progress, request, t0};
use crate::races::json_fact_keys;

pub async fn erasing_a_user_removes_their_data_keeps_tombstones_and_spares_others(store: &Store) {
    let (segment_id, user_id, message_ids) = closed_claimed_segment(store, "ana", "c1").await;
    let (_, bo_memory) = store.insert_test_memory("bo", "Bo plays chess.").await.unwrap();
    let first = request(segment_id, user_id, 0);
    store
        .requests()
        .plan_segment_requests(segment_id, std::slice::from_ref(&first), t0())
        .await
        .unwrap();
    store
        .record_output(first.id, "[\"raw\"]", Some("end_turn"), t0())
        .await
        .unwrap();
    let mut lisbon = item("Ana lives in Lisbon.", vec![message_ids[0]]);
    lisbon.entities = vec![("Lisbon".to_owned(), "place".to_owned())];
    let input = ApplyInput {
        embeddings: Some(ItemEmbeddings {
            model_id: "test-model".to_owned(),
            vectors: vec![vec![1.0, 0.0], vec![0.0, 1.0]],
        }),
        ..apply_input(&first, vec![lisbon.clone(), item("Ana has a cat named Miso.", vec![])])
    };
    store.memories().apply(&input).await.unwrap();

    let receipt = store.erasure().erase_user("ana", t0(), &json_fact_keys).await.unwrap();
    assert_eq!(
        (
            receipt.n_memories,
            receipt.n_vectors,
            receipt.n_entities,
            receipt.n_segments,
            receipt.n_messages,
            receipt.n_raw_outputs,
            receipt.n_request_bodies,
            receipt.n_tombstones,
        ),
        (2, 2, 1, 1, 2, 1, 1, 2)
    );
    assert!(store.listing().list_memories("ana", None).await.unwrap().is_empty());
    assert!(
        store
            .listing()
            .list_segments(Some("ana"), None, None)
            .await
            .unwrap()
            .is_empty()
    );
    let detail = store.listing().request_detail(first.id).await.unwrap();
    assert_eq!((detail.raw_output, detail.status.as_str()), (None, "applied"));
    assert_eq!(store.request_body(first.id).await.unwrap(), serde_json::Value::Null);
    assert_eq!(store.count_rows("memory_evidence").await.unwrap(), 0);
    assert_eq!(store.count_rows("memory_entities").await.unwrap(), 0);
    // Bo is untouched.
    let bo = store.listing().list_memories("bo", None).await.unwrap();
    assert_eq!(bo.len(), 1);
    assert_eq!(bo[0].id, bo_memory.to_string());

    // The same fact arriving again for ana is refused at write, by its tombstone.
    let (segment_id, user_id, _) = closed_claimed_segment(store, "ana", "c2").await;
    let again = request(segment_id, user_id, 0);
    store
        .requests()
        .plan_segment_requests(segment_id, std::slice::from_ref(&again), t0())
        .await
        .unwrap();
    store
        .record_output(again.id, "[...]", Some("end_turn"), t0())
        .await
        .unwrap();
    let ApplyOutcome::Applied {
        memory_ids,
        n_erased_at_write,
        ..
    } = store
        .memories()
        .apply(&apply_input(&again, vec![lisbon, item("Ana plays the cello.", vec![])]))
        .await
        .unwrap()
    else {
        panic!("a fresh request applies")
    };
    assert_eq!((memory_ids.len(), n_erased_at_write), (1, 1));
    let texts: Vec<String> = store
        .listing()
        .list_memories("ana", None)
        .await
        .unwrap()
        .into_iter()
        .map(|memory| memory.text)
        .collect();
    assert_eq!(texts, vec!["Ana plays the cello."]);
    assert!(matches!(
        store.erasure().erase_user("nobody", t0(), &json_fact_keys).await,
        Err(memsift_store::StoreError::NotFound(_))
    ));
}

/// Every item of a user's raw outputs is fingerprinted at erasure, the ones the first apply
/// dropped (a near-duplicate here) included: after a re-import, neither comes back.
pub async fn erasure_fingerprints_every_item_of_the_users_raw_outputs(store: &Store) {
    let (segment_id, user_id, message_ids) = closed_claimed_segment(store, "ana", "c1").await;
    let first = request(segment_id, user_id, 0);
    store
        .requests()
        .plan_segment_requests(segment_id, std::slice::from_ref(&first), t0())
        .await
        .unwrap();
    let raw = r#"[{"text": "Ana lives in Lisbon."}, {"text": "Ana lives in Lisbon, Portugal."}]"#;
    store
        .record_output(first.id, raw, Some("end_turn"), t0())
        .await
        .unwrap();
    // The second item was dropped as a near-duplicate: only the first is stored.
    let lisbon = item("Ana lives in Lisbon.", vec![message_ids[0]]);
    store
        .memories()
        .apply(&apply_input(&first, vec![lisbon.clone()]))
        .await
        .unwrap();
    let receipt = store.erasure().erase_user("ana", t0(), &json_fact_keys).await.unwrap();
    assert_eq!(receipt.n_tombstones, 2);

    let (segment_id, user_id, _) = closed_claimed_segment(store, "ana", "c2").await;
    let again = request(segment_id, user_id, 0);
    store
        .requests()
        .plan_segment_requests(segment_id, std::slice::from_ref(&again), t0())
        .await
        .unwrap();
    store
        .record_output(again.id, raw, Some("end_turn"), t0())
        .await
        .unwrap();
    let outcome = store
        .memories()
        .apply(&apply_input(
            &again,
            vec![lisbon, item("Ana lives in Lisbon, Portugal.", vec![])],
        ))
        .await
        .unwrap();
    let ApplyOutcome::Applied {
        memory_ids,
        n_erased_at_write,
        ..
    } = outcome
    else {
        panic!("a fresh request applies")
    };
    assert_eq!((memory_ids.len(), n_erased_at_write), (0, 2));
}

/// Arbitrary ids: each is refused, or stored under its canonical form, and then every spelling
/// that normalises the same (padded, decomposed) reads and erases that one user.
pub async fn every_spelling_of_a_user_id_reaches_one_user_or_is_refused(store: &Store) {
    use proptest::strategy::{Strategy, ValueTree};
    use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
    use unicode_normalization::UnicodeNormalization;

    let mut runner = TestRunner::new_with_rng(Config::with_cases(48), TestRng::deterministic_rng(RngAlgorithm::ChaCha));
    let ids = proptest::prop_oneof![
        proptest::arbitrary::any::<String>(),
        "[ \t]{0,2}[a-zA-Z\u{e9}\u{301}\u{0}\u{fffd} ]{0,6}[ \n]{0,2}",
    ];
    for case in 0..48 {
        let raw = ids.new_tree(&mut runner).unwrap().current();
        let mut one = message(&raw, &format!("c{case}"), 0, memsift_core::status::Role::User, "hello");
        one.external_id = Some(format!("m{case}"));
        let stored = store.messages().ingest(&[one], idle(), t0(), &no_progress).await;
        let Ok(canonical) = memsift_core::message::canonical_user_id(&raw) else {
            assert!(
                matches!(stored, Err(memsift_store::StoreError::Invalid(_))),
                "{raw:?} is refused, not stored: {stored:?}"
            );
            continue;
        };
        stored.unwrap();
        let listed = store
            .listing()
            .list_segments(Some(&canonical), None, None)
            .await
            .unwrap();
        assert_eq!(listed.len(), 1, "{raw:?} is stored under its canonical form");
        let respelled = format!(" {}\u{3000}", raw.nfd().collect::<String>());
        let receipt = store
            .erasure()
            .erase_user(&respelled, t0(), &json_fact_keys)
            .await
            .unwrap();
        assert_eq!(receipt.n_messages, 1, "{raw:?} erased as {respelled:?}");
        assert!(
            store
                .listing()
                .list_segments(Some(&canonical), None, None)
                .await
                .unwrap()
                .is_empty()
        );
    }
}
