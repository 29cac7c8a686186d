//! Migration cases: the schema as created, its foreign-key indexes, checksums of reworded migrations,
//! and a populated database carried through every later migration row for row.

use memsift_core::RequestId;
use memsift_core::drops::{DropReason, DroppedItem};
use memsift_core::status::Purpose;
use memsift_store::{NewRequest, Store, StoreOptions};
use serde_json::json;

use crate::helpers::{request, t0};

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
    let counts = store.listing().counts().await.unwrap();
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
        "request_drops",
    ] {
        assert_eq!(store.count_rows(table).await.unwrap(), 0, "table {table}");
    }
}

pub async fn a_populated_database_keeps_every_row_through_later_migrations(store: &Store) {
    // The store arrives at migration 6, the last schema before `llm_requests` was rebuilt on
    // SQLite (to add the `failed` status). A rebuild drops the old table; with foreign keys on,
    // that drop would null every memory's source request and delete every child request.
    // Ingest writes columns later migrations added, so the segment goes in as the old schema had it.
    let (segment_id, user_id) = store
        .insert_test_closed_segment("ana", "c1", &["I live in Lisbon with my cat Miso.", "Noted."], t0())
        .await
        .unwrap();
    let claimed = store
        .segments()
        .claim_segments("worker-a", t0(), chrono::Duration::minutes(15), 10)
        .await
        .unwrap();
    assert_eq!(claimed.len(), 1);
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
            run: Some("run-1".to_owned()),
            cap: Some(3),
            entity_id: Some("entity-1".to_owned()),
            ..Default::default()
        },
        ..request(segment_id, user_id, 0)
    };
    store
        .plan_test_requests(None, std::slice::from_ref(&child), t0())
        .await
        .unwrap();
    // Drop records as they were stored: a processor's, and a stage note as a free-text reason; a
    // journal row of the run whose changes count only in its JSON.
    store
        .record_test_drops(
            extraction.id,
            json!([{ "index": 2, "reason": "truncated", "text": "Ana li", "detail": null }]),
        )
        .await
        .unwrap();
    store
        .record_test_drops(child.id, json!([{ "reason": "the live summary already says this" }]))
        .await
        .unwrap();
    store
        .insert_test_operation(user_id, child.id, json!({ "n_changed": 2, "detail": null }), t0())
        .await
        .unwrap();
    store
        .memories()
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
    let requests_before = store.listing().list_requests(None, None, None).await.unwrap();
    let counts_before = store.listing().counts().await.unwrap();
    assert_eq!(requests_before.len(), 2);

    store.migrate().await.unwrap();
    store.erasure().adopt_erasure_key(t0()).await.unwrap();

    assert_eq!(store.user_rows(user_id).await.unwrap(), rows_before);
    assert_eq!(
        store.listing().list_requests(None, None, None).await.unwrap(),
        requests_before
    );
    assert_eq!(store.listing().counts().await.unwrap(), counts_before);
    assert!(
        rows_before
            .memories
            .iter()
            .all(|memory| memory["source_request_id"].is_string() || memory["prompt_version"] == "operator"),
        "every extracted memory still names its request"
    );
    assert_eq!(store.operation_ids("ana", "confirm").await.unwrap().len(), 1);
    // What SQL filters and sums on was filled from the JSON once: the run's changes count against
    // its cap, the entity under review is known, and the drops are counted by a closed reason.
    assert_eq!(store.run_changes("run-1").await.unwrap(), 2);
    assert_eq!(
        store.request_subject_columns(child.id).await.unwrap(),
        (Some("run-1".to_owned()), Some("entity-1".to_owned()))
    );
    assert_eq!(
        store.listing().metrics_snapshot().await.unwrap().drops_by_reason,
        vec![("truncated".to_owned(), 1), ("unchanged".to_owned(), 1)]
    );
    assert_eq!(
        store.listing().request_detail(child.id).await.unwrap().drops.0,
        vec![DroppedItem::unchanged("the live summary already says this")]
    );
    assert_eq!(
        store.listing().request_detail(extraction.id).await.unwrap().drops.0[0],
        DroppedItem {
            detail: None,
            ..DroppedItem::new(2, DropReason::Truncated, Some("Ana li".to_owned()))
        }
    );
    // Memories written before they recorded a model take their request's (here the offline lane,
    // which names only its provider).
    for id in &memory_ids {
        let memory = store.listing().memory_detail(*id).await.unwrap().unwrap();
        assert_eq!(memory.model.as_deref(), Some("heuristic"), "{memory:?}");
    }
    // The rebuilt table takes the new status: a failing answer is quarantined.
    store
        .requests()
        .record_answer(child.id, "{}", None, &memsift_store::RequestUsage::default(), t0())
        .await
        .unwrap();
    let quarantined = store
        .requests()
        .record_apply_failure(child.id, "corrupt", 1, t0())
        .await
        .unwrap();
    assert_eq!(quarantined, memsift_store::ApplyFailure::Quarantined { attempts: 1 });
    assert_eq!(store.listing().request_detail(child.id).await.unwrap().status, "failed");
}

/// A store already migrated, with its erasure key recorded, is opened by reading: behind a writer
/// that holds SQLite's write lock, opening it again (migrations, erasure key, as every read-only
/// command does) and listing neither waits nor fails.
#[tokio::test]
async fn a_migrated_sqlite_database_is_checked_without_the_write_lock() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("memsift.db").display());
    let quick = StoreOptions {
        sqlite_busy_timeout: std::time::Duration::from_millis(200),
        ..StoreOptions::default()
    };
    let key = memsift_store::ErasureKey::generate();
    let writer = Store::connect(&url, &quick).await.unwrap();
    writer.migrate().await.unwrap();
    let writer = writer.with_erasure_key(memsift_store::ErasureKey::from_hex(&key.to_hex()).unwrap());
    writer.erasure().adopt_erasure_key(t0()).await.unwrap();
    let (holding_tx, holding) = tokio::sync::oneshot::channel::<()>();
    let (release_tx, release) = tokio::sync::oneshot::channel::<()>();
    let long_writer = tokio::spawn(async move {
        writer
            .hold_write_lock_until(async move {
                let _ = holding_tx.send(());
                let _ = release.await;
            })
            .await
            .unwrap();
        writer.close().await;
    });
    holding.await.unwrap();
    let reader = Store::connect(&url, &quick).await.unwrap();
    assert!(reader.migrations_current().await.unwrap());
    reader.migrate().await.unwrap();
    let reader = reader.with_erasure_key(key);
    assert_eq!(reader.erasure().adopt_erasure_key(t0()).await.unwrap(), 0);
    assert!(
        reader
            .listing()
            .list_segments(None, None, None)
            .await
            .unwrap()
            .is_empty()
    );
    reader.close().await;
    release_tx.send(()).unwrap();
    long_writer.await.unwrap();
}
