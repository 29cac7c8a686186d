//! Cases for the error and reason texts the store keeps: whatever a provider or a lane says.

use chrono::Duration;
use memsift_core::status::Lane;
use memsift_store::{LaneTransition, NewRequest, PackPolicy, Store};

use crate::helpers::{closed_claimed_segment, request, t0};

/// A provider's error text with a U+0000 in it, and what both backends keep of it.
const SAID: &str = "provider said \0 no";
const KEPT: &str = "provider said \u{FFFD} no";

pub async fn a_nul_in_an_error_text_is_stored_as_the_replacement_character(store: &Store) {
    // Writes that ran on the pool bound error texts raw; PostgreSQL refuses U+0000 in text, so
    // the step that records a failure failed itself.
    let (segment_id, user_id, _) = closed_claimed_segment(store, "ana", "c1").await;
    store
        .segments()
        .fail_segment(segment_id, SAID, 5, Duration::minutes(5), t0())
        .await
        .unwrap();
    assert_eq!(segment_error(store, "ana").await.as_deref(), Some(KEPT));

    store.segments().claim_segment(segment_id, "w", t0()).await.unwrap();
    store
        .segments()
        .defer_segment(segment_id, t0() + Duration::hours(1), SAID)
        .await
        .unwrap();
    assert_eq!(segment_error(store, "ana").await.as_deref(), Some(KEPT));

    store.segments().claim_segment(segment_id, "w", t0()).await.unwrap();
    let planned = NewRequest {
        lane: Lane::Batch,
        provider: "anthropic".to_owned(),
        ..request(segment_id, user_id, 0)
    };
    store
        .requests()
        .plan_segment_requests(segment_id, std::slice::from_ref(&planned), t0())
        .await
        .unwrap();
    let policy = PackPolicy {
        max_requests: 10,
        max_wait: Duration::zero(),
        lease: Duration::minutes(15),
    };
    let batch = store
        .batches()
        .pack_batch("anthropic", "extraction_standard", "w", t0(), policy)
        .await
        .unwrap()
        .unwrap();
    store.batches().note_create_unknown(batch.id, SAID).await.unwrap();
    assert_eq!(
        batch_error(store, batch.id).await.as_deref(),
        Some(format!("create outcome unknown: {KEPT}").as_str())
    );
    store
        .batches()
        .snooze_batch(batch.id, t0() + Duration::minutes(1), Some(SAID))
        .await
        .unwrap();
    assert_eq!(batch_error(store, batch.id).await.as_deref(), Some(KEPT));
    store.batches().mark_batch_rejected(batch.id, SAID, t0()).await.unwrap();
    assert_eq!(batch_error(store, batch.id).await.as_deref(), Some(KEPT));
    let detail = store.listing().request_detail(planned.id).await.unwrap();
    assert_eq!(
        detail.error.as_deref(),
        Some(format!("batch rejected by the provider: {KEPT}").as_str())
    );

    store
        .lanes()
        .record_lane_transition(
            &LaneTransition {
                lane: Lane::Batch,
                provider: "anthropic",
                model: "m",
                endpoint: "https://example.invalid",
                state: "open",
                setting_fault: true,
                reason: Some(SAID),
                fix: Some(SAID),
                opened_at: Some(t0()),
                next_probe_at: None,
                at: t0(),
            },
            "w",
        )
        .await
        .unwrap();
    let lane = &store.lanes().lane_health().await.unwrap()[0];
    assert_eq!((lane.reason.as_deref(), lane.fix.as_deref()), (Some(KEPT), Some(KEPT)));
}

async fn segment_error(store: &Store, user: &str) -> Option<String> {
    store.listing().list_segments(Some(user), None, None).await.unwrap()[0]
        .last_error
        .clone()
}

async fn batch_error(store: &Store, batch_id: memsift_core::BatchId) -> Option<String> {
    store.batches().batch(batch_id).await.unwrap().unwrap().last_error
}

#[tokio::test]
async fn a_write_that_waits_out_sqlites_lock_says_what_holds_it_and_what_to_do() {
    // `import` beside a running writer failed after 10 s with a bare "database is locked".
    use sqlx::Connection;
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("memsift.db").display());
    let options = memsift_store::StoreOptions {
        sqlite_busy_timeout: std::time::Duration::from_millis(50),
        ..memsift_store::StoreOptions::default()
    };
    let store = Store::connect(&url, &options).await.unwrap();
    store.migrate().await.unwrap();
    // Another process's writer: a connection of its own holding the write lock.
    let mut holder = sqlx::SqliteConnection::connect(&url).await.unwrap();
    sqlx::query("BEGIN IMMEDIATE").execute(&mut holder).await.unwrap();
    let error = store.insert_test_memory("ana", "Ana runs.").await.unwrap_err();
    let line = error.to_string();
    assert!(
        line.starts_with("the SQLite database is busy: another process")
            && line.contains("run this again once it is done, or use PostgreSQL")
            && !line.contains('\n'),
        "{line}"
    );
    assert!(
        error.is_transient(),
        "a busy database says nothing about what was written"
    );
    sqlx::query("ROLLBACK").execute(&mut holder).await.unwrap();
    store.insert_test_memory("ana", "Ana runs.").await.unwrap();
    store.close().await;
}
