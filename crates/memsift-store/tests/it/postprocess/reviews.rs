//! The reviewer case: a narrowing of confidence or expiry is journaled, undone exactly, and never
//! reaches another user's memory.

use chrono::Duration;
use memsift_core::status::Purpose;
use memsift_store::Store;
use serde_json::json;

use super::{answered, applied};
use crate::helpers::t0;

pub async fn a_reviewer_narrowing_is_journaled_and_undone_exactly(store: &Store) {
    let (ana, memory) = store
        .insert_test_memory("ana", "Ana has a dog named Rex.")
        .await
        .unwrap();
    let before = store.user_rows(ana).await.unwrap();
    let request = answered(store, ana, Purpose::ExtractionReview, json!({}), json!({}), "{}").await;
    let expiry = t0() + Duration::days(30);
    let done = applied(
        store
            .stages()
            .apply_narrowing(request, ana, memory, 0.5, Some(expiry), t0() + Duration::hours(1))
            .await
            .unwrap(),
    );
    let row = store.stages().review_memory(ana, memory).await.unwrap().unwrap();
    assert_eq!((row.confidence, row.expires_at), (0.5, Some(expiry)));
    // Another user's memory is not narrowed through ana's request.
    let (bo, bos) = store.insert_test_memory("bo", "Bo plays chess.").await.unwrap();
    let request = answered(store, ana, Purpose::ExtractionReview, json!({}), json!({}), "{}").await;
    let other = applied(
        store
            .stages()
            .apply_narrowing(request, ana, bos, 0.1, None, t0())
            .await
            .unwrap(),
    );
    assert!(other.operation_id.is_none());
    assert_eq!(
        store.stages().review_memory(bo, bos).await.unwrap().unwrap().confidence,
        0.9
    );
    store
        .memories()
        .undo_operation("ana", done.operation_id.unwrap(), t0())
        .await
        .unwrap();
    assert_eq!(store.user_rows(ana).await.unwrap(), before);
}
