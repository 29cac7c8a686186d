//! Apply cases: one request's output is written exactly once, with its evidence, entities,
//! vectors and model; dedupe keeps one memory per fact and passes a duplicate's evidence on.

use memsift_core::MemoryId;
use memsift_core::status::{Lane, RequestStatus, Temporal};
use memsift_store::{
    ApplyInput, ApplyOutcome, ContinuationPlan, DuplicateEvidence, DuplicateOf, ItemEmbeddings, NewRequest, Store,
};

use crate::helpers::{apply_input, closed_claimed_segment, item, memory_texts_since, request, segment_statuses, t0};

pub async fn apply_writes_a_result_exactly_once(store: &Store) {
    let (segment_id, user_id, message_ids) = closed_claimed_segment(store, "ana", "c1").await;
    let request = request(segment_id, user_id, 0);
    store
        .requests()
        .plan_segment_requests(segment_id, std::slice::from_ref(&request), t0())
        .await
        .unwrap();
    store
        .record_output(request.id, "[...]", Some("end_turn"), t0())
        .await
        .unwrap();
    let input = apply_input(
        &request,
        vec![
            item("Ana lives in Lisbon.", vec![message_ids[0]]),
            item("Ana has a cat named Miso.", vec![]),
        ],
    );
    let first = store.memories().apply(&input).await.unwrap();
    let ApplyOutcome::Applied {
        memory_ids,
        segment_extracted,
        ..
    } = first
    else {
        panic!("first apply must write")
    };
    assert_eq!(memory_ids.len(), 2);
    assert!(segment_extracted);
    let after_first = store.listing().counts().await.unwrap();
    assert_eq!(
        store.memories().apply(&input).await.unwrap(),
        ApplyOutcome::AlreadyApplied
    );
    assert_eq!(store.listing().counts().await.unwrap(), after_first);
    assert_eq!(store.count_rows("memory_evidence").await.unwrap(), 1);
    let memories = store.listing().list_memories("ana", None).await.unwrap();
    assert_eq!(memories[0].evidence, ["t0"]);
}

pub async fn a_segment_is_extracted_only_when_every_chunk_is_applied(store: &Store) {
    let (segment_id, user_id, _) = closed_claimed_segment(store, "ana", "c1").await;
    let chunks = [request(segment_id, user_id, 0), request(segment_id, user_id, 1)];
    store
        .requests()
        .plan_segment_requests(segment_id, &chunks, t0())
        .await
        .unwrap();
    for chunk in &chunks {
        store.record_output(chunk.id, "[]", None, t0()).await.unwrap();
    }
    let ApplyOutcome::Applied { segment_extracted, .. } =
        store.memories().apply(&apply_input(&chunks[0], vec![])).await.unwrap()
    else {
        panic!("chunk 0 applies")
    };
    assert!(!segment_extracted);
    assert_eq!(segment_statuses(store, "ana").await, vec![("extracting".to_owned(), 2)]);
    let ApplyOutcome::Applied { segment_extracted, .. } =
        store.memories().apply(&apply_input(&chunks[1], vec![])).await.unwrap()
    else {
        panic!("chunk 1 applies")
    };
    assert!(segment_extracted);
    assert_eq!(segment_statuses(store, "ana").await, vec![("extracted".to_owned(), 2)]);
}

pub async fn a_cut_answers_continuation_is_planned_with_its_apply_and_holds_its_segment_open(store: &Store) {
    let (segment_id, user_id, _) = closed_claimed_segment(store, "ana", "c1").await;
    let cut = request(segment_id, user_id, 0);
    store
        .requests()
        .plan_segment_requests(segment_id, std::slice::from_ref(&cut), t0())
        .await
        .unwrap();
    store
        .record_output(cut.id, "[{...}, {\"te", Some("end_turn"), t0())
        .await
        .unwrap();
    // The second item meets the first at write: the continuation shows it by the stored memory.
    let items = vec![
        item("Ana lives in Lisbon.", vec![]),
        item("Ana lives in Lisbon.", vec![]),
    ];
    let mut continuation = NewRequest {
        parent_request_id: Some(cut.id),
        ..request(segment_id, user_id, 0)
    };
    continuation.context.continuation = 1;
    for (short, item) in ["aaaaaa", "bbbbbb"].into_iter().zip(&items) {
        continuation
            .context
            .memories
            .insert(short.to_owned(), (item.id, item.text.clone()));
    }
    let input = ApplyInput {
        continuation: ContinuationPlan::Continue(Box::new(continuation.clone())),
        ..apply_input(&cut, items.clone())
    };
    let ApplyOutcome::Applied {
        memory_ids,
        segment_extracted,
        ..
    } = store.memories().apply(&input).await.unwrap()
    else {
        panic!("the cut answer applies")
    };
    assert_eq!(memory_ids, vec![items[0].id], "the caller's id");
    assert!(!segment_extracted, "the continuation holds the segment open");
    assert_eq!(segment_statuses(store, "ana").await, vec![("extracting".to_owned(), 2)]);
    // Applying again writes nothing and plans no second continuation.
    assert_eq!(
        store.memories().apply(&input).await.unwrap(),
        ApplyOutcome::AlreadyApplied
    );
    let rows = store.listing().list_requests(Some("ana"), None, None).await.unwrap();
    let mut planned: Vec<(i64, i64, String)> = rows
        .iter()
        .map(|row| (row.chunk_index, row.attempt, row.status.clone()))
        .collect();
    planned.sort();
    assert_eq!(
        planned,
        vec![(0, 1, "applied".to_owned()), (0, 2, "planned".to_owned())]
    );
    let shown = store.requests().stored_output(continuation.id).await.unwrap().context;
    assert_eq!(shown.continuation, 1);
    let shown_ids: Vec<MemoryId> = shown.memories.values().map(|(id, _)| *id).collect();
    assert_eq!(shown_ids, vec![items[0].id, items[0].id]);

    store
        .record_output(continuation.id, "[]", Some("end_turn"), t0())
        .await
        .unwrap();
    let ApplyOutcome::Applied { segment_extracted, .. } = store
        .memories()
        .apply(&apply_input(&continuation, vec![]))
        .await
        .unwrap()
    else {
        panic!("the continuation applies")
    };
    assert!(segment_extracted);
    assert_eq!(segment_statuses(store, "ana").await, vec![("extracted".to_owned(), 2)]);
}

pub async fn a_failed_continuation_has_attempts_of_its_own(store: &Store) {
    let (segment_id, user_id, _) = closed_claimed_segment(store, "ana", "c1").await;
    let cut = request(segment_id, user_id, 0);
    store
        .requests()
        .plan_segment_requests(segment_id, std::slice::from_ref(&cut), t0())
        .await
        .unwrap();
    store
        .record_output(cut.id, "[{\"te", Some("max_tokens"), t0())
        .await
        .unwrap();
    let continuation = NewRequest {
        parent_request_id: Some(cut.id),
        ..request(segment_id, user_id, 0)
    };
    let input = ApplyInput {
        continuation: ContinuationPlan::Continue(Box::new(continuation.clone())),
        ..apply_input(&cut, vec![])
    };
    store.memories().apply(&input).await.unwrap();
    // The continuation is the chunk's attempt 2, but its first try: with two tries allowed it
    // is tried again, then the segment goes dead with the reason.
    let max_attempts = 2;
    let mut failing = continuation.id;
    for expected in [(1, 0), (0, 1)] {
        store
            .requests()
            .record_failure(failing, RequestStatus::Errored, "overloaded", t0())
            .await
            .unwrap();
        let report = store
            .requests()
            .replan_failed_requests(max_attempts, t0())
            .await
            .unwrap();
        assert_eq!((report.n_replanned, report.n_dead), expected);
        let rows = store
            .listing()
            .list_requests(Some("ana"), Some("planned"), None)
            .await
            .unwrap();
        if let Some(next) = rows.first() {
            failing = next.id.parse().unwrap();
            let next = store.requests().stored_output(failing).await.unwrap();
            assert_eq!(next.chunk_index, 0);
        }
    }
    let segments = store.listing().list_segments(Some("ana"), None, None).await.unwrap();
    assert_eq!(segments[0].status, "dead");
    let reason = segments[0].last_error.clone().unwrap_or_default();
    assert!(reason.contains("attempt 2 of 2"), "{reason}");
}

pub async fn the_same_fact_from_two_segments_is_stored_once(store: &Store) {
    let (first_segment, user_id, _) = closed_claimed_segment(store, "ana", "c1").await;
    let (second_segment, _, _) = closed_claimed_segment(store, "ana", "c2").await;
    for segment_id in [first_segment, second_segment] {
        let request = request(segment_id, user_id, 0);
        store
            .requests()
            .plan_segment_requests(segment_id, std::slice::from_ref(&request), t0())
            .await
            .unwrap();
        store.record_output(request.id, "[...]", None, t0()).await.unwrap();
        store
            .memories()
            .apply(&apply_input(&request, vec![item("Ana lives in Lisbon.", vec![])]))
            .await
            .unwrap();
    }
    assert_eq!(store.listing().list_memories("ana", None).await.unwrap().len(), 1);
    let named = std::collections::BTreeSet::from(["ana lives in lisbon".to_owned()]);
    assert!(
        store
            .memories()
            .dedupe_keys_among(user_id, &named, false)
            .await
            .unwrap()
            .contains("ana lives in lisbon")
    );
}

/// The exact stage reads only the keys it names: the user's active ones, or with `archived_too`
/// their archived ones as well; never another user's, never a key it did not name.
pub async fn the_keys_an_answer_names_are_read_from_the_users_memories_alone(store: &Store) {
    // Test memories are keyed `text#id`.
    let key = |text: &str, id: memsift_core::MemoryId| format!("{text}#{id}");
    let (ana, lisbon) = store.insert_test_memory("ana", "Ana lives in Lisbon.").await.unwrap();
    let (_, porto) = store.insert_test_memory("ana", "Ana lived in Porto.").await.unwrap();
    store.archive_test_memory(ana, porto).await.unwrap();
    store.insert_test_memory("ana", "Ana keeps bees.").await.unwrap();
    let (_, oslo) = store.insert_test_memory("bo", "Bo lives in Oslo.").await.unwrap();
    let (lisbon, porto) = (key("Ana lives in Lisbon.", lisbon), key("Ana lived in Porto.", porto));
    let named = std::collections::BTreeSet::from([
        lisbon.clone(),
        porto.clone(),
        key("Bo lives in Oslo.", oslo),
        "ana sails".to_owned(),
    ]);
    let found = |set: std::collections::HashSet<String>| set.into_iter().collect::<std::collections::BTreeSet<_>>();
    let active = store.memories().dedupe_keys_among(ana, &named, false).await.unwrap();
    assert_eq!(found(active), std::collections::BTreeSet::from([lisbon.clone()]));
    let all = store.memories().dedupe_keys_among(ana, &named, true).await.unwrap();
    assert_eq!(found(all), std::collections::BTreeSet::from([lisbon, porto]));
    let none = std::collections::BTreeSet::new();
    assert!(
        store
            .memories()
            .dedupe_keys_among(ana, &none, true)
            .await
            .unwrap()
            .is_empty()
    );
}

pub async fn entities_are_upserted_and_joined(store: &Store) {
    let (segment_id, user_id, _) = closed_claimed_segment(store, "ana", "c1").await;
    let request = request(segment_id, user_id, 0);
    store
        .requests()
        .plan_segment_requests(segment_id, std::slice::from_ref(&request), t0())
        .await
        .unwrap();
    store.record_output(request.id, "[...]", None, t0()).await.unwrap();
    let mut lisbon = item("Ana lives in Lisbon.", vec![]);
    lisbon.entities = vec![("Lisbon".to_owned(), "place".to_owned())];
    let mut moving = item("Ana is selling her flat in Lisbon.", vec![]);
    moving.entities = vec![
        ("lisbon".to_owned(), "place".to_owned()),
        ("Miso".to_owned(), "pet".to_owned()),
    ];
    store
        .memories()
        .apply(&apply_input(&request, vec![lisbon, moving]))
        .await
        .unwrap();
    assert_eq!(store.count_rows("entities").await.unwrap(), 2);
    assert_eq!(store.count_rows("memory_entities").await.unwrap(), 3);
    let memories = store.listing().list_memories("ana", None).await.unwrap();
    assert_eq!(memories[1].entities, ["Lisbon", "Miso"]);
}

pub async fn apply_stores_each_items_vector_with_its_model(store: &Store) {
    let (segment_id, user_id, _) = closed_claimed_segment(store, "ana", "c1").await;
    let request = request(segment_id, user_id, 0);
    store
        .requests()
        .plan_segment_requests(segment_id, std::slice::from_ref(&request), t0())
        .await
        .unwrap();
    store
        .record_output(request.id, "[...]", Some("end_turn"), t0())
        .await
        .unwrap();
    let version_before = store.vectors().memory_version(user_id).await.unwrap();
    let vectors = vec![vec![0.6, 0.8, 0.0], vec![0.0, 0.0, 1.0]];
    let input = ApplyInput {
        embeddings: Some(ItemEmbeddings {
            model_id: "test-model".to_owned(),
            vectors: vectors.clone(),
        }),
        ..apply_input(
            &request,
            vec![
                item("Ana lives in Lisbon.", vec![]),
                item("Ana has a cat named Miso.", vec![]),
            ],
        )
    };
    let ApplyOutcome::Applied {
        memory_ids,
        item_positions,
        memory_version,
        ..
    } = store.memories().apply(&input).await.unwrap()
    else {
        panic!("the first apply writes")
    };
    // One bump for the whole write, reported so a cache can follow it without a reload.
    assert_eq!(memory_version, version_before + 1);
    assert_eq!(store.vectors().memory_version(user_id).await.unwrap(), memory_version);
    assert_eq!(item_positions, vec![0, 1]);
    let stored = store.vectors().user_memory_vectors(user_id).await.unwrap();
    for (memory_id, position) in memory_ids.iter().zip(&item_positions) {
        let row = stored.rows.iter().find(|row| row.memory_id == *memory_id).unwrap();
        assert_eq!(row.model_id.as_deref(), Some("test-model"));
        assert_eq!(row.dimension, Some(3));
        assert_eq!(row.vector.as_ref(), Some(&vectors[*position]));
    }
}

pub async fn a_duplicate_passes_its_evidence_to_the_stored_memory(store: &Store) {
    // Dedupe must not lose what a question needs: the turns that stated a fact again (exactly, by
    // a dropped near-duplicate, or at write) become evidence of the memory that was kept.
    let (first_segment, user_id, first_turns) = closed_claimed_segment(store, "ana", "c1").await;
    let (second_segment, _, second_turns) = closed_claimed_segment(store, "ana", "c2").await;
    let (third_segment, _, third_turns) = closed_claimed_segment(store, "ana", "c3").await;
    let (_, bos_memory) = store.insert_test_memory("bo", "Bo lives in Porto.").await.unwrap();
    let first = request(first_segment, user_id, 0);
    store
        .requests()
        .plan_segment_requests(first_segment, std::slice::from_ref(&first), t0())
        .await
        .unwrap();
    store.record_output(first.id, "[...]", None, t0()).await.unwrap();
    let outcome = store
        .memories()
        .apply(&apply_input(
            &first,
            vec![item("Ana lives in Lisbon.", vec![first_turns[0]])],
        ))
        .await
        .unwrap();
    let ApplyOutcome::Applied { memory_ids, .. } = outcome else {
        panic!("first apply")
    };
    let kept = memory_ids[0];
    // Second segment: the same text again (a conflict at write).
    let second = request(second_segment, user_id, 0);
    store
        .requests()
        .plan_segment_requests(second_segment, std::slice::from_ref(&second), t0())
        .await
        .unwrap();
    store.record_output(second.id, "[...]", None, t0()).await.unwrap();
    store
        .memories()
        .apply(&apply_input(
            &second,
            vec![item("Ana lives in Lisbon.", vec![second_turns[0]])],
        ))
        .await
        .unwrap();
    // Third segment: a dropped near-duplicate naming the kept memory, and a forged drop naming
    // another user's memory, which is ignored.
    let third = request(third_segment, user_id, 0);
    store
        .requests()
        .plan_segment_requests(third_segment, std::slice::from_ref(&third), t0())
        .await
        .unwrap();
    store.record_output(third.id, "[...]", None, t0()).await.unwrap();
    let mut input = apply_input(&third, vec![]);
    input.duplicate_evidence = vec![
        DuplicateEvidence {
            of: DuplicateOf::Memory(kept),
            evidence: vec![third_turns[0]],
        },
        DuplicateEvidence {
            of: DuplicateOf::Memory(bos_memory),
            evidence: vec![third_turns[1]],
        },
    ];
    input.n_dropped = 2;
    let before = store.vectors().memory_state(user_id).await.unwrap();
    store.memories().apply(&input).await.unwrap();
    // What its evidence turns said is part of the kept memory's document in the memory lexicon,
    // so the new evidence stamps it for the lexicons to read again.
    let (after, restamped) = memory_texts_since(store, user_id, Some(before.version)).await;
    assert!(
        after.version > before.version,
        "an apply that only passed evidence on still moves the version, or no cache would read it"
    );
    assert_eq!(
        restamped.changed.iter().map(|(id, _, _)| *id).collect::<Vec<_>>(),
        [kept]
    );
    assert_eq!(restamped.changed[0].2.lines().count(), 3, "all three turns it rests on");
    let rows = store.user_rows(user_id).await.unwrap();
    let mut cited: Vec<String> = rows
        .evidence
        .iter()
        .filter(|(memory, _)| *memory == kept.to_string())
        .map(|(_, message)| message.clone())
        .collect();
    cited.sort();
    let mut want = vec![
        first_turns[0].to_string(),
        second_turns[0].to_string(),
        third_turns[0].to_string(),
    ];
    want.sort();
    assert_eq!(cited, want);
    let bo = store.listing().user_id("bo").await.unwrap().unwrap();
    assert!(store.user_rows(bo).await.unwrap().evidence.is_empty());
}

pub async fn each_memory_records_the_model_that_produced_it(store: &Store) {
    // A model's extraction records its model, the offline lane `heuristic`, and an operator's
    // supersede `operator`, on the memory itself; listings, the detail and the metrics show them.
    let (segment_id, user_id, message_ids) = closed_claimed_segment(store, "ana", "c1").await;
    let by_model = NewRequest {
        lane: Lane::Batch,
        provider: "anthropic".to_owned(),
        model: Some("claude-haiku-4-5".to_owned()),
        ..request(segment_id, user_id, 0)
    };
    let offline = request(segment_id, user_id, 1);
    store
        .requests()
        .plan_segment_requests(segment_id, &[by_model.clone(), offline.clone()], t0())
        .await
        .unwrap();
    for (planned, text) in [
        (&by_model, "Ana lives in Lisbon."),
        (&offline, "Ana has a cat named Miso."),
    ] {
        store.record_output(planned.id, "[...]", None, t0()).await.unwrap();
        let mut memory = item(text, vec![message_ids[0]]);
        if planned.id == offline.id {
            memory.sensitive = true;
            memory.temporal = Temporal::Recurring;
        }
        store
            .memories()
            .apply(&apply_input(planned, vec![memory]))
            .await
            .unwrap();
    }
    let models = |rows: Vec<memsift_store::MemoryRow>| -> Vec<(String, Option<String>)> {
        rows.into_iter().map(|row| (row.text, row.model)).collect()
    };
    assert_eq!(
        models(store.listing().list_memories("ana", None).await.unwrap()),
        [
            ("Ana lives in Lisbon.".to_owned(), Some("claude-haiku-4-5".to_owned())),
            ("Ana has a cat named Miso.".to_owned(), Some("heuristic".to_owned())),
        ]
    );
    let lisbon = store.listing().list_memories("ana", None).await.unwrap()[0]
        .id
        .parse::<MemoryId>()
        .unwrap();
    let revised = store
        .memories()
        .revise_memory(
            "ana",
            lisbon,
            &memsift_store::Revision::Supersede {
                content: "Ana lives in Porto.".to_owned(),
            },
            "she moved",
            t0(),
        )
        .await
        .unwrap();
    let porto = store
        .listing()
        .memory_detail(revised.new_memory_id.unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (porto.text.as_str(), porto.model.as_deref()),
        ("Ana lives in Porto.", Some(memsift_store::OPERATOR_MODEL))
    );
    let archived = store.listing().memory_detail(lisbon).await.unwrap().unwrap();
    assert!(archived.archived_at.is_some());
    assert_eq!(archived.model.as_deref(), Some("claude-haiku-4-5"));
    assert_eq!(archived.source_request_id, Some(by_model.id.to_string()));
    assert_eq!(store.listing().memory_detail(MemoryId::new_v7()).await.unwrap(), None);
    // Every memory written is counted by kind, archived ones too.
    let mut kinds = store.listing().metrics_snapshot().await.unwrap().memories_by_kind;
    kinds.sort();
    assert_eq!(
        kinds,
        [("durable".to_owned(), false, 2), ("recurring".to_owned(), true, 1)]
    );
}
