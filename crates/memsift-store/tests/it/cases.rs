//! The store cases; each runs once per backend (see `main.rs`).

use chrono::Duration;
use memsift_core::status::{Lane, Purpose, Role, Temporal};
use memsift_core::{MemoryId, MessageId, RequestId, SegmentId, UserId};
use memsift_store::{
    ApplyInput, ApplyOutcome, DuplicateEvidence, DuplicateOf, ItemEmbeddings, NewMemory, NewMessage, NewRequest, Store,
};
use serde_json::json;

use crate::helpers::{idle, message, no_progress, t0};
// The vector and schedule cases live in their own files; the suite macro reaches every case through this module.
pub use crate::postprocess::*;
pub use crate::schedules::*;
pub use crate::vectors::*;

async fn segment_statuses(store: &Store, user: &str) -> Vec<(String, i64)> {
    store
        .list_segments(Some(user), None, None)
        .await
        .unwrap()
        .into_iter()
        .map(|row| (row.status, row.n_messages))
        .collect()
}

fn item(text: &str, evidence: Vec<MessageId>) -> NewMemory {
    NewMemory {
        text: text.to_owned(),
        dedupe_key: memsift_core::text::dedupe_key(text),
        confidence: 0.9,
        happens_at: None,
        expires_at: None,
        sensitive: false,
        temporal: Temporal::Durable,
        hinted_memory_ids: Vec::new(),
        linking_hints: Vec::new(),
        entities: Vec::new(),
        evidence,
    }
}

/// Ingests one closed two-turn segment for `user` and claims it; returns (segment, user, message ids).
async fn closed_claimed_segment(store: &Store, user: &str, conversation: &str) -> (SegmentId, UserId, Vec<MessageId>) {
    let mut second = message(user, conversation, 1, Role::Assistant, "Noted.");
    second.boundary_after = true;
    let messages = vec![
        message(user, conversation, 0, Role::User, "I live in Lisbon with my cat Miso."),
        second,
    ];
    store.ingest(&messages, idle(), t0(), &no_progress).await.unwrap();
    let claimed = store
        .claim_segments("worker-a", t0(), Duration::minutes(15), 100)
        .await
        .unwrap();
    let mine = claimed
        .into_iter()
        .find(|segment| segment.attempt == 1)
        .expect("the new segment is claimable");
    let turns = store.segment_turns(mine.id).await.unwrap();
    (
        mine.id,
        mine.user_id,
        turns.into_iter().map(|turn| turn.message_id).collect(),
    )
}

fn request(segment_id: SegmentId, user_id: UserId, chunk_index: i64) -> NewRequest {
    NewRequest {
        id: RequestId::new_v7(),
        purpose: Purpose::Extraction,
        user_id,
        segment_id: Some(segment_id),
        chunk_index,
        lane: Lane::Heuristic,
        config_key: "extraction_standard".to_owned(),
        provider: "heuristic".to_owned(),
        model: None,
        prompt_version: "heuristic@1".to_owned(),
        context: Default::default(),
        request_body: Default::default(),
        subject: Default::default(),
        parent_request_id: None,
        reserved_usd: 0.0,
    }
}

fn apply_input(request: &NewRequest, items: Vec<NewMemory>) -> ApplyInput {
    ApplyInput {
        request_id: request.id,
        user_id: request.user_id,
        segment_id: request.segment_id,
        prompt_version: request.prompt_version.clone(),
        model: None,
        items,
        drops: json!([]),
        duplicate_evidence: Vec::new(),
        n_dropped: 0,
        embeddings: None,
        replay: None,
        now: t0(),
    }
}

pub async fn a_database_migrated_before_the_comments_were_reworded_still_starts(store: &Store) {
    // Migrations 1 and 2 changed only in their comments; sqlx checksums whole files, so without
    // the repair every database created before would refuse to start.
    store.record_test_migration_checksums(None).await.unwrap();
    store.migrate().await.unwrap();
    store.migrate().await.unwrap();
    // A migration whose text changed in any other way is still refused, naming the version.
    store.record_test_migration_checksums(Some(vec![0; 48])).await.unwrap();
    let error = store.migrate().await.unwrap_err().to_string();
    assert!(error.contains("migration 1"), "{error}");
}

pub async fn every_foreign_key_has_an_index_that_leads_with_it(store: &Store) {
    // Erasing a user or dropping old requests deletes parent rows; without an index on the
    // child's column each delete scans the child table, and listings that count children per
    // row turn quadratic. Any foreign key a later migration adds must come with its index.
    assert_eq!(store.unindexed_foreign_keys().await.unwrap(), Vec::<String>::new());
}

pub async fn migrations_create_the_whole_data_model(store: &Store) {
    // Every table of the data model exists and is empty; running the migrations again is a no-op.
    store.migrate().await.unwrap();
    let counts = store.counts().await.unwrap();
    assert_eq!(
        (
            counts.users,
            counts.messages,
            counts.segments,
            counts.memories,
            counts.requests
        ),
        (0, 0, 0, 0, 0)
    );
    for table in [
        "users",
        "segments",
        "messages",
        "batches",
        "llm_requests",
        "memories",
        "memory_evidence",
        "memory_links",
        "entities",
        "memory_entities",
        "operations",
        "schedules",
        "tombstones",
        "segment_summaries",
    ] {
        assert_eq!(store.count_rows(table).await.unwrap(), 0, "table {table}");
    }
}

pub async fn ingest_gives_each_message_one_segment_and_closes_on_boundary(store: &Store) {
    let mut closing = message("ana", "c1", 2, Role::Assistant, "Got it.");
    closing.boundary_after = true;
    let messages = vec![
        message("ana", "c1", 0, Role::User, "Hi, I moved to Porto."),
        message("ana", "c1", 1, Role::Assistant, "Welcome!"),
        closing,
        message("ana", "c1", 3, Role::User, "Another thing."),
    ];
    let report = store.ingest(&messages, idle(), t0(), &no_progress).await.unwrap();
    assert_eq!(
        (
            report.n_added,
            report.n_segments_started,
            report.n_segments_closed,
            report.n_users_created
        ),
        (4, 2, 1, 1)
    );
    assert_eq!(
        segment_statuses(store, "ana").await,
        vec![("closed".to_owned(), 3), ("open".to_owned(), 1)]
    );
}

pub async fn an_idle_gap_inside_the_input_starts_a_new_segment(store: &Store) {
    let messages = vec![
        message("ana", "c1", 0, Role::User, "first"),
        message("ana", "c1", 59, Role::User, "still the first segment"),
        message(
            "ana",
            "c1",
            119,
            Role::User,
            "a new segment after 60 minutes of silence",
        ),
    ];
    store.ingest(&messages, idle(), t0(), &no_progress).await.unwrap();
    assert_eq!(
        segment_statuses(store, "ana").await,
        vec![("closed".to_owned(), 2), ("open".to_owned(), 1)]
    );
    let closed = store.list_segments(Some("ana"), Some("closed"), None).await.unwrap();
    assert_eq!(closed[0].close_reason.as_deref(), Some("idle"));
}

pub async fn reimporting_the_same_messages_adds_nothing(store: &Store) {
    let mut messages = vec![
        message("ana", "c1", 0, Role::User, "I am vegetarian."),
        message("bo", "c2", 0, Role::User, "hello"),
    ];
    messages[1].external_id = Some("D1:1".to_owned());
    messages[1].boundary_after = true;
    let first = store.ingest(&messages, idle(), t0(), &no_progress).await.unwrap();
    let before = store.counts().await.unwrap();
    let second = store
        .ingest(&messages, idle(), t0() + Duration::days(1), &no_progress)
        .await
        .unwrap();
    assert_eq!((first.n_added, second.n_added, second.n_already_stored), (2, 0, 2));
    assert_eq!(store.counts().await.unwrap(), before);
}

pub async fn a_failed_ingest_leaves_the_store_as_it_was(store: &Store) {
    store
        .ingest(
            &[message("ana", "c1", 0, Role::User, "kept from before")],
            idle(),
            t0(),
            &no_progress,
        )
        .await
        .unwrap();
    let before = store.counts().await.unwrap();
    let messages: Vec<NewMessage> = (0..5)
        .map(|minute| message("bo", "c9", minute, Role::User, &format!("message {minute}")))
        .collect();
    let owned_store = store.clone();
    // The progress callback panics after the third message has been written inside the
    // transaction: the task dies, and the transaction must roll back with it.
    let outcome = tokio::spawn(async move {
        owned_store
            .ingest(&messages, idle(), t0(), &|n_done| {
                assert!(n_done < 3, "simulated crash mid-import")
            })
            .await
    })
    .await;
    assert!(outcome.unwrap_err().is_panic());
    assert_eq!(store.counts().await.unwrap(), before);
}

pub async fn idle_segments_close_by_the_injected_clock(store: &Store) {
    store
        .ingest(
            &[message("ana", "c1", 0, Role::User, "hello")],
            idle(),
            t0(),
            &no_progress,
        )
        .await
        .unwrap();
    assert_eq!(
        store
            .close_idle_segments(t0() + Duration::minutes(59), idle())
            .await
            .unwrap(),
        0
    );
    assert_eq!(
        store
            .close_idle_segments(t0() + Duration::minutes(60), idle())
            .await
            .unwrap(),
        1
    );
    assert_eq!(segment_statuses(store, "ana").await, vec![("closed".to_owned(), 1)]);
}

pub async fn concurrent_claims_take_disjoint_segments(store: &Store) {
    let messages: Vec<NewMessage> = (0..6)
        .map(|conversation_idx| {
            let mut message = message("ana", &format!("c{conversation_idx}"), 0, Role::User, "hello there");
            message.boundary_after = true;
            message
        })
        .collect();
    store.ingest(&messages, idle(), t0(), &no_progress).await.unwrap();
    let (a, b, c) = tokio::join!(
        store.claim_segments("a", t0(), Duration::minutes(15), 3),
        store.claim_segments("b", t0(), Duration::minutes(15), 3),
        store.claim_segments("c", t0(), Duration::minutes(15), 3),
    );
    let mut ids: Vec<SegmentId> = [a.unwrap(), b.unwrap(), c.unwrap()]
        .concat()
        .into_iter()
        .map(|segment| segment.id)
        .collect();
    let n_claimed = ids.len();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), n_claimed, "a segment was claimed twice");
    assert_eq!(n_claimed, 6);
    assert!(
        store
            .claim_segments("d", t0(), Duration::minutes(15), 3)
            .await
            .unwrap()
            .is_empty()
    );
}

pub async fn apply_writes_a_result_exactly_once(store: &Store) {
    let (segment_id, user_id, message_ids) = closed_claimed_segment(store, "ana", "c1").await;
    let request = request(segment_id, user_id, 0);
    store
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
    let first = store.apply(&input).await.unwrap();
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
    let after_first = store.counts().await.unwrap();
    assert_eq!(store.apply(&input).await.unwrap(), ApplyOutcome::AlreadyApplied);
    assert_eq!(store.counts().await.unwrap(), after_first);
    assert_eq!(store.count_rows("memory_evidence").await.unwrap(), 1);
    let memories = store.list_memories("ana", None).await.unwrap();
    assert_eq!(memories[0].evidence, ["t0"]);
}

pub async fn a_segment_is_extracted_only_when_every_chunk_is_applied(store: &Store) {
    let (segment_id, user_id, _) = closed_claimed_segment(store, "ana", "c1").await;
    let chunks = [request(segment_id, user_id, 0), request(segment_id, user_id, 1)];
    store.plan_segment_requests(segment_id, &chunks, t0()).await.unwrap();
    for chunk in &chunks {
        store.record_output(chunk.id, "[]", None, t0()).await.unwrap();
    }
    let ApplyOutcome::Applied { segment_extracted, .. } = store.apply(&apply_input(&chunks[0], vec![])).await.unwrap()
    else {
        panic!("chunk 0 applies")
    };
    assert!(!segment_extracted);
    assert_eq!(segment_statuses(store, "ana").await, vec![("extracting".to_owned(), 2)]);
    let ApplyOutcome::Applied { segment_extracted, .. } = store.apply(&apply_input(&chunks[1], vec![])).await.unwrap()
    else {
        panic!("chunk 1 applies")
    };
    assert!(segment_extracted);
    assert_eq!(segment_statuses(store, "ana").await, vec![("extracted".to_owned(), 2)]);
}

pub async fn the_same_fact_from_two_segments_is_stored_once(store: &Store) {
    let (first_segment, user_id, _) = closed_claimed_segment(store, "ana", "c1").await;
    let (second_segment, _, _) = closed_claimed_segment(store, "ana", "c2").await;
    for segment_id in [first_segment, second_segment] {
        let request = request(segment_id, user_id, 0);
        store
            .plan_segment_requests(segment_id, std::slice::from_ref(&request), t0())
            .await
            .unwrap();
        store.record_output(request.id, "[...]", None, t0()).await.unwrap();
        store
            .apply(&apply_input(&request, vec![item("Ana lives in Lisbon.", vec![])]))
            .await
            .unwrap();
    }
    assert_eq!(store.list_memories("ana", None).await.unwrap().len(), 1);
    assert!(
        store
            .active_dedupe_keys(user_id)
            .await
            .unwrap()
            .contains("ana lives in lisbon")
    );
}

pub async fn a_segment_goes_dead_after_max_attempts(store: &Store) {
    let (segment_id, _, _) = closed_claimed_segment(store, "ana", "c1").await;
    store
        .fail_segment(segment_id, "provider said no", 2, Duration::minutes(5), t0())
        .await
        .unwrap();
    assert_eq!(segment_statuses(store, "ana").await[0].0, "failed");
    // Not due yet, then due: the retry waits for its time.
    assert!(
        store
            .claim_segments("w", t0(), Duration::minutes(15), 10)
            .await
            .unwrap()
            .is_empty()
    );
    let again = store
        .claim_segments("w", t0() + Duration::minutes(5), Duration::minutes(15), 10)
        .await
        .unwrap();
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].attempt, 2);
    store
        .fail_segment(segment_id, "provider said no again", 2, Duration::minutes(5), t0())
        .await
        .unwrap();
    let rows = store.list_segments(Some("ana"), None, None).await.unwrap();
    assert_eq!(
        (rows[0].status.as_str(), rows[0].last_error.as_deref()),
        ("dead", Some("provider said no again"))
    );
    assert!(
        store
            .claim_segments("w", t0() + Duration::days(1), Duration::minutes(15), 10)
            .await
            .unwrap()
            .is_empty()
    );
}

pub async fn entities_are_upserted_and_joined(store: &Store) {
    let (segment_id, user_id, _) = closed_claimed_segment(store, "ana", "c1").await;
    let request = request(segment_id, user_id, 0);
    store
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
    store.apply(&apply_input(&request, vec![lisbon, moving])).await.unwrap();
    assert_eq!(store.count_rows("entities").await.unwrap(), 2);
    assert_eq!(store.count_rows("memory_entities").await.unwrap(), 3);
    let memories = store.list_memories("ana", None).await.unwrap();
    assert_eq!(memories[1].entities, ["Lisbon", "Miso"]);
}

pub async fn memory_listings_are_scoped_by_user(store: &Store) {
    for (user, text) in [("ana", "Ana lives in Lisbon."), ("bo", "Bo lives in Oslo.")] {
        let (segment_id, user_id, _) = closed_claimed_segment(store, user, "c1").await;
        let request = request(segment_id, user_id, 0);
        store
            .plan_segment_requests(segment_id, std::slice::from_ref(&request), t0())
            .await
            .unwrap();
        store.record_output(request.id, "[...]", None, t0()).await.unwrap();
        store
            .apply(&apply_input(&request, vec![item(text, vec![])]))
            .await
            .unwrap();
    }
    let ana: Vec<String> = store
        .list_memories("ana", None)
        .await
        .unwrap()
        .into_iter()
        .map(|row| row.text)
        .collect();
    assert_eq!(ana, vec!["Ana lives in Lisbon."]);
    assert!(store.list_memories("nobody", None).await.unwrap().is_empty());
    assert_eq!(store.list_requests(Some("bo"), None, None).await.unwrap().len(), 1);
}

pub async fn ids_match_by_their_start_or_their_end_within_their_user(store: &Store) {
    use memsift_store::IdKind;
    let (ana_segment, _, _) = closed_claimed_segment(store, "ana", "c1").await;
    let (bo_segment, _, _) = closed_claimed_segment(store, "bo", "c1").await;
    let (ana, bo) = (ana_segment.to_string(), bo_segment.to_string());
    let matching = |fragment: String, user: Option<&'static str>| async move {
        store.ids_matching(IdKind::Segment, &fragment, user).await.unwrap()
    };
    // The last 12 characters, as the tables print them, and the same in capitals.
    assert_eq!(
        matching(ana[ana.len() - 12..].to_owned(), None).await,
        std::slice::from_ref(&ana)
    );
    assert_eq!(
        matching(ana[ana.len() - 12..].to_uppercase(), None).await,
        std::slice::from_ref(&ana)
    );
    // A prefix both UUIDv7s share (the same millisecond's timestamp) finds both, in id order.
    let mut both = vec![ana.clone(), bo.clone()];
    both.sort();
    assert_eq!(matching(ana[..4].to_owned(), None).await, both);
    // …and only the user's own when scoped, so another user's ids are never listed.
    assert_eq!(
        matching(ana[..4].to_owned(), Some("bo")).await,
        std::slice::from_ref(&bo)
    );
    assert!(matching(ana[ana.len() - 12..].to_owned(), Some("bo")).await.is_empty());
    // The full id, a wildcard and a fragment of the middle find nothing else.
    assert_eq!(matching(ana.clone(), None).await, std::slice::from_ref(&ana));
    assert!(matching("%".to_owned(), None).await.is_empty());
    assert!(matching(format!("{}_", &ana[..4]), None).await.is_empty());
    assert!(matching(ana[10..20].to_owned(), None).await.is_empty());
    // Kinds search their own table: no request has a segment's id.
    assert!(
        store
            .ids_matching(IdKind::Request, &ana, None)
            .await
            .unwrap()
            .is_empty()
    );
}

pub async fn apply_stores_each_items_vector_with_its_model(store: &Store) {
    let (segment_id, user_id, _) = closed_claimed_segment(store, "ana", "c1").await;
    let request = request(segment_id, user_id, 0);
    store
        .plan_segment_requests(segment_id, std::slice::from_ref(&request), t0())
        .await
        .unwrap();
    store
        .record_output(request.id, "[...]", Some("end_turn"), t0())
        .await
        .unwrap();
    let version_before = store.memory_version(user_id).await.unwrap();
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
    } = store.apply(&input).await.unwrap()
    else {
        panic!("the first apply writes")
    };
    // One bump for the whole write, reported so a cache can follow it without a reload.
    assert_eq!(memory_version, version_before + 1);
    assert_eq!(store.memory_version(user_id).await.unwrap(), memory_version);
    assert_eq!(item_positions, vec![0, 1]);
    let stored = store.user_memory_vectors(user_id).await.unwrap();
    for (memory_id, position) in memory_ids.iter().zip(&item_positions) {
        let row = stored.rows.iter().find(|row| row.memory_id == *memory_id).unwrap();
        assert_eq!(row.model_id.as_deref(), Some("test-model"));
        assert_eq!(row.dimension, Some(3));
        assert_eq!(row.vector.as_ref(), Some(&vectors[*position]));
    }
}

pub async fn referenced_memories_are_the_owners_active_ones_in_order(store: &Store) {
    let (ana, lisbon) = store.insert_test_memory("ana", "Ana lives in Lisbon.").await.unwrap();
    let (_, miso) = store
        .insert_test_memory("ana", "Ana has a cat named Miso.")
        .await
        .unwrap();
    let (_, archived) = store
        .insert_test_memory("ana", "Ana used to live in Porto.")
        .await
        .unwrap();
    store.archive_test_memory(ana, archived).await.unwrap();
    let (_, bobs) = store.insert_test_memory("bob", "Bob plays chess.").await.unwrap();
    let unknown = MemoryId::new_v7();

    let mut question = message("ana", "c9", 0, Role::User, "Where should I move?");
    question.referenced_memory_ids = vec![miso];
    let mut answer = message("ana", "c9", 1, Role::Assistant, "You like Lisbon.");
    // Another user's memory, an archived one and an unknown id must never reach Ana's prompt.
    answer.referenced_memory_ids = vec![bobs, lisbon, archived, miso, unknown];
    answer.boundary_after = true;
    store
        .ingest(&[question, answer], idle(), t0(), &no_progress)
        .await
        .unwrap();
    let segment = store
        .list_segments(Some("ana"), None, None)
        .await
        .unwrap()
        .into_iter()
        .find(|row| row.n_messages == 2)
        .unwrap();
    let referenced = store.referenced_memories(segment.id.parse().unwrap()).await.unwrap();
    assert_eq!(
        referenced,
        vec![
            (miso, "Ana has a cat named Miso.".to_owned()),
            (lisbon, "Ana lives in Lisbon.".to_owned()),
        ]
    );
}

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

pub async fn the_cost_view_sums_tokens_by_user_stage_and_lane(store: &Store) {
    let (segment_id, user_id, _) = closed_claimed_segment(store, "ana", "c1").await;
    let chunks = [request(segment_id, user_id, 0), request(segment_id, user_id, 1)];
    store.plan_segment_requests(segment_id, &chunks, t0()).await.unwrap();
    for (chunk, tokens) in chunks.iter().zip([100_i64, 40]) {
        let usage = memsift_store::RequestUsage {
            input_tokens: tokens,
            output_tokens: tokens / 2,
            cache_creation_tokens: 0,
            cache_read_tokens: tokens * 3,
            cost_usd: tokens as f64 / 1000.0,
        };
        assert!(
            store
                .record_answer(chunk.id, "[]", Some("end_turn"), &usage, t0())
                .await
                .unwrap()
        );
    }
    let rows = store.cost_by_user_stage().await.unwrap();
    assert_eq!(rows.len(), 1, "{rows:?}");
    let row = &rows[0];
    assert_eq!(
        (row.user_external_id.as_str(), row.purpose.as_str(), row.lane.as_str()),
        ("ana", "extraction", "heuristic")
    );
    assert_eq!(
        (
            row.n_requests,
            row.input_tokens,
            row.output_tokens,
            row.cache_read_tokens
        ),
        (2, 140, 70, 420)
    );
    assert!((row.cost_usd - 0.14).abs() < 1e-9, "{}", row.cost_usd);
}

/// Every column of a user's memories, archived ones included, for exact before/after comparisons.
async fn all_memory_rows(store: &Store, user_id: UserId) -> Vec<(String, String, memsift_store::MemoryState)> {
    store.user_memory_states(user_id).await.unwrap()
}

pub async fn revisions_are_journaled_and_undo_restores_the_exact_prior_rows(store: &Store) {
    let (ana, lisbon) = store.insert_test_memory("ana", "Ana lives in Lisbon.").await.unwrap();
    let (_, cat) = store.insert_test_memory("ana", "Ana has a cat.").await.unwrap();
    let (_, bobs) = store.insert_test_memory("bo", "Bo plays chess.").await.unwrap();
    let original = all_memory_rows(store, ana).await;

    let confirmed = store
        .revise_memory("ana", cat, &memsift_store::Revision::Confirm, "she said so", t0())
        .await
        .unwrap();
    assert_eq!(confirmed.state.confidence, 1.0);
    let superseded = store
        .revise_memory(
            "ana",
            lisbon,
            &memsift_store::Revision::Supersede {
                content: "Ana lives in Porto since March.".to_owned(),
            },
            "she moved",
            t0(),
        )
        .await
        .unwrap();
    let porto = superseded.new_memory_id.unwrap();
    let texts: Vec<String> = store
        .list_memories("ana", None)
        .await
        .unwrap()
        .into_iter()
        .map(|memory| memory.text)
        .collect();
    assert!(
        texts.contains(&"Ana lives in Porto since March.".to_owned()),
        "{texts:?}"
    );
    assert!(
        !texts.contains(&"Ana lives in Lisbon.".to_owned()),
        "superseded memories leave the active set"
    );
    assert_eq!(store.count_rows("operations").await.unwrap(), 2);

    // Scoped: bo cannot revise or undo ana's memories, and an archived memory is not revised again.
    assert!(matches!(
        store
            .revise_memory("bo", cat, &memsift_store::Revision::Expire, "x", t0())
            .await,
        Err(memsift_store::StoreError::NotFound(_))
    ));
    assert!(matches!(
        store.undo_operation("bo", superseded.operation_id, t0()).await,
        Err(memsift_store::StoreError::NotFound(_))
    ));
    assert!(matches!(
        store
            .revise_memory("ana", lisbon, &memsift_store::Revision::Expire, "x", t0())
            .await,
        Err(memsift_store::StoreError::Invalid(_))
    ));

    // Undo both, newest first: the rows are exactly what they were, Porto is gone.
    let undone = store
        .undo_operation("ana", superseded.operation_id, t0())
        .await
        .unwrap();
    assert_eq!(undone.deleted_memory_id, Some(porto.to_string()));
    store.undo_operation("ana", confirmed.operation_id, t0()).await.unwrap();
    assert_eq!(all_memory_rows(store, ana).await, original);
    assert!(matches!(
        store.undo_operation("ana", confirmed.operation_id, t0()).await,
        Err(memsift_store::StoreError::Invalid(_))
    ));
    assert_eq!(store.list_memories("bo", None).await.unwrap()[0].id, bobs.to_string());
    // The journal keeps both operations, marked undone.
    assert_eq!(store.count_rows("operations").await.unwrap(), 2);
}

pub async fn scoring_archives_the_lowest_under_the_floor_capped_and_undoably(store: &Store) {
    // Twenty old, never-read memories: all under the floor. A 10 % cap archives two of them.
    let mut ids = Vec::new();
    let mut ana = None;
    for index in 0..20 {
        let (user, id) = store
            .insert_test_memory("ana", &format!("Ana fact number {index}."))
            .await
            .unwrap();
        ana = Some(user);
        ids.push(id);
    }
    let ana = ana.unwrap();
    // One of them the user confirmed: it is never archived for low importance.
    store
        .revise_memory("ana", ids[0], &memsift_store::Revision::Confirm, "she said so", t0())
        .await
        .unwrap();
    let before = store.user_memory_states(ana).await.unwrap();
    let policy = memsift_store::ScoringPolicy {
        floor: 0.05,
        min_age_days: 30,
        max_share_per_run: 0.1,
    };
    // Too young: nothing is archived, however low the score.
    let young = store.score_memories(&policy, t0() + Duration::days(10)).await.unwrap();
    assert_eq!((young.n_scored, young.n_archived), (20, 0));

    let later = t0() + Duration::days(400);
    let report = store.score_memories(&policy, later).await.unwrap();
    assert_eq!((report.n_users, report.n_scored, report.n_archived), (1, 20, 2));
    assert_eq!(report.n_spared_by_cap, 17, "19 unconfirmed under the floor, 2 archived");
    let active = store.list_memories("ana", None).await.unwrap();
    assert_eq!(active.len(), 18);
    assert!(
        active.iter().any(|memory| memory.id == ids[0].to_string()),
        "the confirmed one stays"
    );
    assert_eq!(
        store.count_rows("operations").await.unwrap(),
        3,
        "one confirm, two archives"
    );

    // Each archive is journaled and undone like any revision.
    let archived: Vec<String> = store
        .user_memory_states(ana)
        .await
        .unwrap()
        .into_iter()
        .filter(|(_, _, state)| state.archived_at.is_some())
        .map(|(id, _, _)| id)
        .collect();
    assert_eq!(archived.len(), 2);
    for operation in store.operation_ids("ana", "score_archive").await.unwrap() {
        store.undo_operation("ana", operation, later).await.unwrap();
    }
    let restored: Vec<_> = store
        .user_memory_states(ana)
        .await
        .unwrap()
        .into_iter()
        .map(|(id, text, state)| (id, text, state.archived_at, state.archive_reason))
        .collect();
    let original: Vec<_> = before
        .into_iter()
        .map(|(id, text, state)| (id, text, state.archived_at, state.archive_reason))
        .collect();
    assert_eq!(restored, original);
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
        .plan_segment_requests(first_segment, std::slice::from_ref(&first), t0())
        .await
        .unwrap();
    store.record_output(first.id, "[...]", None, t0()).await.unwrap();
    let outcome = store
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
        .plan_segment_requests(second_segment, std::slice::from_ref(&second), t0())
        .await
        .unwrap();
    store.record_output(second.id, "[...]", None, t0()).await.unwrap();
    store
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
    store.apply(&input).await.unwrap();
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
    let bo = store.user_id("bo").await.unwrap().unwrap();
    assert!(store.user_rows(bo).await.unwrap().evidence.is_empty());
}

pub async fn a_populated_database_keeps_every_row_through_later_migrations(store: &Store) {
    // The store arrives at migration 6, the last schema before `llm_requests` was rebuilt on
    // SQLite (to add the `failed` status). A rebuild drops the old table; with foreign keys on,
    // that drop would null every memory's source request and delete every child request.
    let (segment_id, user_id, _) = closed_claimed_segment(store, "ana", "c1").await;
    let extraction = request(segment_id, user_id, 0);
    // Planning writes columns later migrations added, so the rows go in as the old schema had them.
    store
        .plan_test_requests(Some(segment_id), std::slice::from_ref(&extraction), t0())
        .await
        .unwrap();
    store
        .record_output(extraction.id, "[...]", Some("end_turn"), t0())
        .await
        .unwrap();
    let memory_ids = store
        .apply_test_memories(
            extraction.id,
            user_id,
            &["Ana lives in Lisbon.", "Ana has a cat named Miso."],
            t0(),
        )
        .await
        .unwrap();
    let child = NewRequest {
        id: RequestId::new_v7(),
        purpose: Purpose::ConsolidationReview,
        segment_id: None,
        parent_request_id: Some(extraction.id),
        subject: memsift_core::request::RequestSubject {
            members: vec![memory_ids[0]],
            ..Default::default()
        },
        ..request(segment_id, user_id, 0)
    };
    store
        .plan_test_requests(None, std::slice::from_ref(&child), t0())
        .await
        .unwrap();
    store
        .revise_memory(
            "ana",
            memory_ids[1],
            &memsift_store::Revision::Confirm,
            "the user said so",
            t0(),
        )
        .await
        .unwrap();
    let rows_before = store.user_rows(user_id).await.unwrap();
    let requests_before = store.list_requests(None, None, None).await.unwrap();
    let counts_before = store.counts().await.unwrap();
    assert_eq!(requests_before.len(), 2);

    store.migrate().await.unwrap();
    store.adopt_erasure_key(t0()).await.unwrap();

    assert_eq!(store.user_rows(user_id).await.unwrap(), rows_before);
    assert_eq!(store.list_requests(None, None, None).await.unwrap(), requests_before);
    assert_eq!(store.counts().await.unwrap(), counts_before);
    assert!(
        rows_before
            .memories
            .iter()
            .all(|memory| memory["source_request_id"].is_string() || memory["prompt_version"] == "operator"),
        "every extracted memory still names its request"
    );
    assert_eq!(store.operation_ids("ana", "confirm").await.unwrap().len(), 1);
    // Memories written before they recorded a model take their request's (here the offline lane,
    // which names only its provider).
    for id in &memory_ids {
        let memory = store.memory_detail(*id).await.unwrap().unwrap();
        assert_eq!(memory.model.as_deref(), Some("heuristic"), "{memory:?}");
    }
    // The rebuilt table takes the new status: a failing answer is quarantined.
    store
        .record_answer(child.id, "{}", None, &memsift_store::RequestUsage::default(), t0())
        .await
        .unwrap();
    let quarantined = store.record_apply_failure(child.id, "corrupt", 1, t0()).await.unwrap();
    assert_eq!(quarantined, memsift_store::ApplyFailure::Quarantined { attempts: 1 });
    assert_eq!(store.request_detail(child.id).await.unwrap().status, "failed");
}

/// Texts of every kind a message, an answer or an error can carry, U+0000 often among them.
fn any_text() -> impl proptest::strategy::Strategy<Value = String> {
    use proptest::prelude::*;
    let character = prop_oneof![
        3 => Just('\0'),
        3 => proptest::char::range('a', 'z'),
        1 => Just('\u{FFFD}'),
        1 => any::<char>(),
    ];
    proptest::collection::vec(character, 1..64).prop_map(String::from_iter)
}

pub async fn any_text_is_stored_the_same_on_both_backends(store: &Store) {
    // PostgreSQL refuses U+0000 in text and jsonb; SQLite stores it. A provider answer holding
    // one failed to record on PostgreSQL (and was paid for again every lease), and an import
    // holding one was refused whole. Every text now reaches both backends the same way.
    use proptest::strategy::{Strategy, ValueTree};
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let strategy = (any_text(), any_text(), any_text(), any_text());
    for case in 0..40 {
        let (content, conversation, answer, error) = strategy.new_tree(&mut runner).unwrap().current();
        let stored = |text: &str| text.replace('\0', "\u{FFFD}");
        let user = format!("user-{case}");
        let mut last = message(&user, &conversation, 1, Role::User, &content);
        last.boundary_after = true;
        let report = store
            .ingest(
                &[message(&user, &conversation, 0, Role::User, &content), last],
                idle(),
                t0(),
                &no_progress,
            )
            .await
            .unwrap_or_else(|error| panic!("case {case}: ingest of {content:?} failed: {error}"));
        // The two messages differ only in time, so both are stored.
        assert_eq!(report.n_added, 2, "case {case}");
        let segment = &store.list_segments(Some(&user), None, None).await.unwrap()[0];
        let segment_id = SegmentId::parse(&segment.id).unwrap();
        let turns = store.segment_turns(segment_id).await.unwrap();
        assert!(
            turns.iter().all(|turn| turn.turn.content == stored(&content)),
            "case {case}"
        );
        // Re-importing the same bytes adds nothing.
        let again = store
            .ingest(
                &[message(&user, &conversation, 0, Role::User, &content)],
                idle(),
                t0(),
                &no_progress,
            )
            .await
            .unwrap();
        assert_eq!(again.n_added, 0, "case {case}");

        let claimed = store.claim_segment(segment_id, "w", t0()).await.unwrap();
        let answered = request(segment_id, claimed.user_id, 0);
        let failed = request(segment_id, claimed.user_id, 1);
        store
            .plan_segment_requests(segment_id, &[answered.clone(), failed.clone()], t0())
            .await
            .unwrap();
        store
            .record_output(answered.id, &answer, Some(&answer), t0())
            .await
            .unwrap_or_else(|error| panic!("case {case}: recording {answer:?} failed: {error}"));
        store
            .record_failure(failed.id, memsift_core::status::RequestStatus::Errored, &error, t0())
            .await
            .unwrap();
        let detail = store.request_detail(answered.id).await.unwrap();
        assert_eq!(
            detail.raw_output.as_deref(),
            Some(stored(&answer).as_str()),
            "case {case}"
        );
        assert_eq!(
            detail.stop_reason.as_deref(),
            Some(stored(&answer).as_str()),
            "case {case}"
        );
        let detail = store.request_detail(failed.id).await.unwrap();
        assert_eq!(detail.error.as_deref(), Some(stored(&error).as_str()), "case {case}");
        // The answer applies too: items, drops and notes carry provider text.
        let mut input = apply_input(&answered, vec![item(&format!("Ana said {answer}"), vec![])]);
        input.drops = json!([{ "reason": "truncated", "text": answer, "detail": error }]);
        assert!(
            matches!(store.apply(&input).await.unwrap(), ApplyOutcome::Applied { .. }),
            "case {case}"
        );
    }
}

pub async fn a_paused_lane_holds_its_work_unspent_and_rerouting_moves_it(store: &Store) {
    let (segment_id, user_id, _) = closed_claimed_segment(store, "ana", "c1").await;
    let planned = NewRequest {
        lane: Lane::Batch,
        provider: "openai".to_owned(),
        model: Some("gpt-4o-mini".to_owned()),
        ..request(segment_id, user_id, 0)
    };
    store
        .plan_segment_requests(segment_id, std::slice::from_ref(&planned), t0())
        .await
        .unwrap();
    let policy = memsift_store::PackPolicy {
        max_requests: 10,
        max_wait: Duration::zero(),
        lease: Duration::minutes(15),
    };
    let pack = async |at| {
        store
            .pack_batch("openai", "extraction_standard", "w", at, policy)
            .await
            .unwrap()
    };
    let batch = pack(t0()).await.expect("due at once");
    // The create met a setting fault: the batch fails, the request waits unspent until the probe.
    let probe_at = t0() + Duration::minutes(1);
    store
        .hold_batch(batch.id, "lane batch openai/gpt-4o-mini paused: 404", probe_at, t0())
        .await
        .unwrap();
    let requests = store.list_requests(Some("ana"), None, None).await.unwrap();
    assert_eq!(
        (requests.len(), requests[0].status.as_str(), requests[0].attempt),
        (1, "planned", 1)
    );
    let segment = &store.list_segments(Some("ana"), None, None).await.unwrap()[0];
    assert_eq!(segment.status, "extracting", "waiting is not failing");
    assert_eq!(
        segment.last_error.as_deref(),
        Some("waiting: lane batch openai/gpt-4o-mini paused: 404")
    );
    assert!(
        pack(probe_at - Duration::seconds(1)).await.is_none(),
        "held until the probe"
    );
    let waiting = store
        .waiting_requests(Lane::Batch, &["extraction_standard".to_owned()], 10)
        .await
        .unwrap();
    assert_eq!(waiting.len(), 1);
    assert_eq!((waiting[0].id, waiting[0].user_id), (planned.id, user_id));
    // Rerouted to another lane: the same id, claimable there at once.
    let moved = store
        .reroute_request(
            planned.id,
            &memsift_store::Reroute {
                lane: Lane::Immediate,
                config_key: "extraction_fallback",
                provider: "anthropic",
                model: Some("claude-haiku-4-5"),
            },
        )
        .await
        .unwrap();
    assert!(moved);
    let claimed = store
        .claim_requests(Lane::Immediate, "w", t0(), Duration::minutes(15), 10)
        .await
        .unwrap();
    assert_eq!(claimed.len(), 1);
    assert_eq!(
        (claimed[0].id, claimed[0].config_key.as_str(), claimed[0].attempt),
        (planned.id, "extraction_fallback", 1)
    );
    // Held again on the immediate lane: not claimable before its time, then claimable.
    store.hold_request(planned.id, "paused: 401", probe_at).await.unwrap();
    let early = store
        .claim_requests(Lane::Immediate, "w", t0(), Duration::minutes(15), 10)
        .await
        .unwrap();
    assert!(early.is_empty());
    let due = store
        .claim_requests(Lane::Immediate, "w", probe_at, Duration::minutes(15), 10)
        .await
        .unwrap();
    assert_eq!(due.len(), 1);
}

pub async fn lane_health_keeps_the_last_state_of_each_lane_and_the_live_processes(store: &Store) {
    let transition = |state, setting_fault, at| memsift_store::LaneTransition {
        lane: Lane::Batch,
        provider: "openai",
        model: "gpt-4o-mini",
        endpoint: "http://127.0.0.1:9",
        state,
        setting_fault,
        reason: setting_fault.then_some("openai: not found\0"),
        fix: setting_fault.then_some("OpenAI base URLs end in /v1"),
        opened_at: setting_fault.then_some(t0()),
        next_probe_at: setting_fault.then_some(t0() + Duration::minutes(1)),
        at,
    };
    store
        .record_lane_transition(&transition("open", true, t0()), "w1")
        .await
        .unwrap();
    let rows = store.lane_health().await.unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!((rows[0].state.as_str(), rows[0].setting_fault), ("open", true));
    assert_eq!(rows[0].reason.as_deref(), Some("openai: not found\u{FFFD}"));
    store
        .record_lane_transition(&transition("closed", false, t0() + Duration::minutes(2)), "w2")
        .await
        .unwrap();
    let rows = store.lane_health().await.unwrap();
    assert_eq!(
        (
            rows[0].state.as_str(),
            rows[0].setting_fault,
            rows[0].n_transitions,
            rows[0].changed_by.as_str()
        ),
        ("closed", false, 2, "w2")
    );
    assert_eq!((rows[0].reason.as_deref(), rows[0].next_probe_at), (None, None));

    store.heartbeat("w1", t0()).await.unwrap();
    store.heartbeat("w2", t0() + Duration::minutes(3)).await.unwrap();
    store.heartbeat("w1", t0() + Duration::minutes(4)).await.unwrap();
    assert_eq!(store.live_workers(t0() + Duration::minutes(3)).await.unwrap(), 2);
    assert_eq!(store.live_workers(t0() + Duration::minutes(4)).await.unwrap(), 1);
}

pub async fn a_reconcile_miss_remembers_whether_the_create_was_called(store: &Store) {
    let mut results = Vec::new();
    for (conversation, called) in [("c1", true), ("c2", false)] {
        let (segment_id, user_id, _) = closed_claimed_segment(store, conversation, conversation).await;
        let planned = NewRequest {
            lane: Lane::Batch,
            provider: "anthropic".to_owned(),
            ..request(segment_id, user_id, 0)
        };
        store
            .plan_segment_requests(segment_id, std::slice::from_ref(&planned), t0())
            .await
            .unwrap();
        let policy = memsift_store::PackPolicy {
            max_requests: 10,
            max_wait: Duration::zero(),
            lease: Duration::minutes(15),
        };
        let batch = store
            .pack_batch("anthropic", "extraction_standard", "w", t0(), policy)
            .await
            .unwrap()
            .unwrap();
        if called {
            store.note_create_unknown(batch.id, "HTTP 500").await.unwrap();
        }
        let first = store
            .reconcile_miss(batch.id, t0(), Duration::minutes(5))
            .await
            .unwrap();
        let second = store
            .reconcile_miss(batch.id, t0(), Duration::minutes(5))
            .await
            .unwrap();
        results.push((first, second));
    }
    let miss = |misses, create_was_called| memsift_store::ReconcileMiss {
        misses,
        create_was_called,
    };
    assert_eq!(results[0], (miss(1, true), miss(2, true)));
    assert_eq!(results[1], (miss(1, false), miss(2, false)));
}

pub async fn scoring_archives_one_memory_per_run_for_a_user_with_fewer_than_twenty(store: &Store) {
    // Five old, never-read memories under the floor. A 5 % cap used to be floor(5 % × 5) = 0: a
    // user with fewer than twenty memories never had one archived. Rounded up, each run takes one.
    for index in 0..5 {
        store
            .insert_test_memory("ana", &format!("Ana fact number {index}."))
            .await
            .unwrap();
    }
    let policy = memsift_store::ScoringPolicy {
        floor: 0.05,
        min_age_days: 30,
        max_share_per_run: 0.05,
    };
    let later = t0() + Duration::days(400);
    let first = store.score_memories(&policy, later).await.unwrap();
    assert_eq!((first.n_scored, first.n_archived, first.n_spared_by_cap), (5, 1, 4));
    let second = store.score_memories(&policy, later).await.unwrap();
    assert_eq!((second.n_scored, second.n_archived, second.n_spared_by_cap), (4, 1, 3));
    assert_eq!(store.list_memories("ana", None).await.unwrap().len(), 3);
    assert_eq!(store.operation_ids("ana", "score_archive").await.unwrap().len(), 2);
}

pub async fn each_memory_records_the_model_that_produced_it(store: &Store) {
    // A model's extraction records its model, the offline lane `heuristic`, and an operator's
    // supersede none, on the memory itself; listings, the detail and the metrics show them.
    let (segment_id, user_id, message_ids) = closed_claimed_segment(store, "ana", "c1").await;
    let by_model = NewRequest {
        lane: Lane::Batch,
        provider: "anthropic".to_owned(),
        model: Some("claude-haiku-4-5".to_owned()),
        ..request(segment_id, user_id, 0)
    };
    let offline = request(segment_id, user_id, 1);
    store
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
        store.apply(&apply_input(planned, vec![memory])).await.unwrap();
    }
    let models = |rows: Vec<memsift_store::MemoryRow>| -> Vec<(String, Option<String>)> {
        rows.into_iter().map(|row| (row.text, row.model)).collect()
    };
    assert_eq!(
        models(store.list_memories("ana", None).await.unwrap()),
        [
            ("Ana lives in Lisbon.".to_owned(), Some("claude-haiku-4-5".to_owned())),
            ("Ana has a cat named Miso.".to_owned(), Some("heuristic".to_owned())),
        ]
    );
    let lisbon = store.list_memories("ana", None).await.unwrap()[0]
        .id
        .parse::<MemoryId>()
        .unwrap();
    let revised = store
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
        .memory_detail(revised.new_memory_id.unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!((porto.text.as_str(), porto.model), ("Ana lives in Porto.", None));
    let archived = store.memory_detail(lisbon).await.unwrap().unwrap();
    assert!(archived.archived_at.is_some());
    assert_eq!(archived.model.as_deref(), Some("claude-haiku-4-5"));
    assert_eq!(archived.source_request_id, Some(by_model.id.to_string()));
    assert_eq!(store.memory_detail(MemoryId::new_v7()).await.unwrap(), None);
    // Every memory written is counted by kind, archived ones too.
    let mut kinds = store.metrics_snapshot().await.unwrap().memories_by_kind;
    kinds.sort();
    assert_eq!(
        kinds,
        [("durable".to_owned(), false, 2), ("recurring".to_owned(), true, 1)]
    );
}
