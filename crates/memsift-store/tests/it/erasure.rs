//! The erasure case: a user's data goes, tombstones keep the erased facts from coming back, and
//! other users are untouched.

use memsift_store::{ApplyInput, ApplyOutcome, ItemEmbeddings, Store};

use crate::helpers::{apply_input, closed_claimed_segment, item, request, t0};

pub async fn erasing_a_user_removes_their_data_keeps_tombstones_and_spares_others(store: &Store) {
    let (segment_id, user_id, message_ids) = closed_claimed_segment(store, "ana", "c1").await;
    let (_, bo_memory) = store.insert_test_memory("bo", "Bo plays chess.").await.unwrap();
    let first = request(segment_id, user_id, 0);
    store
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
    store.apply(&input).await.unwrap();

    let receipt = store.erase_user("ana", t0()).await.unwrap();
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
    assert!(store.list_memories("ana", None).await.unwrap().is_empty());
    assert!(store.list_segments(Some("ana"), None, None).await.unwrap().is_empty());
    let detail = store.request_detail(first.id).await.unwrap();
    assert_eq!((detail.raw_output, detail.status.as_str()), (None, "applied"));
    assert_eq!(store.request_body(first.id).await.unwrap(), serde_json::Value::Null);
    assert_eq!(store.count_rows("memory_evidence").await.unwrap(), 0);
    assert_eq!(store.count_rows("memory_entities").await.unwrap(), 0);
    // Bo is untouched.
    let bo = store.list_memories("bo", None).await.unwrap();
    assert_eq!(bo.len(), 1);
    assert_eq!(bo[0].id, bo_memory.to_string());

    // The same fact arriving again for ana is refused at write, by its tombstone.
    let (segment_id, user_id, _) = closed_claimed_segment(store, "ana", "c2").await;
    let again = request(segment_id, user_id, 0);
    store
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
        .apply(&apply_input(&again, vec![lisbon, item("Ana plays the cello.", vec![])]))
        .await
        .unwrap()
    else {
        panic!("a fresh request applies")
    };
    assert_eq!((memory_ids.len(), n_erased_at_write), (1, 1));
    let texts: Vec<String> = store
        .list_memories("ana", None)
        .await
        .unwrap()
        .into_iter()
        .map(|memory| memory.text)
        .collect();
    assert_eq!(texts, vec!["Ana plays the cello."]);
    assert!(matches!(
        store.erase_user("nobody", t0()).await,
        Err(memsift_store::StoreError::NotFound(_))
    ));
}
