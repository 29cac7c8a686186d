//! The summary case: a segment keeps one live summary, and an identical answer writes nothing.

use memsift_core::SegmentId;
use memsift_core::status::{Purpose, Role};
use memsift_store::Store;
use serde_json::json;

use super::answered;
use crate::helpers::{idle, message, no_progress, t0};

pub async fn a_segment_keeps_one_live_summary(store: &Store) {
    let mut last = message("ana", "c1", 1, Role::Assistant, "Nice.");
    last.boundary_after = true;
    let messages = vec![message("ana", "c1", 0, Role::User, "I ran a marathon."), last];
    store
        .messages()
        .ingest(&messages, idle(), t0(), &no_progress)
        .await
        .unwrap();
    let segment = store.listing().list_segments(Some("ana"), None, None).await.unwrap()[0].clone();
    let segment_id = SegmentId::parse(&segment.id).unwrap();
    let user = store.listing().user_id("ana").await.unwrap().unwrap();
    let subject = json!({ "segment_id": segment_id.to_string() });
    for (text, live) in [
        ("Ana ran a marathon.", "Ana ran a marathon."),
        ("Ana ran a marathon.", "Ana ran a marathon."),
        ("Ana ran her first marathon.", "Ana ran her first marathon."),
    ] {
        let request = answered(store, user, Purpose::Summary, subject.clone(), json!({}), "{}").await;
        store
            .stages()
            .apply_summary(request, user, segment_id, text, t0())
            .await
            .unwrap();
        assert_eq!(store.live_summary(segment_id).await.unwrap().as_deref(), Some(live));
    }
    // Three answers, two distinct texts: one live row, one superseded, the identical one wrote nothing.
    assert_eq!(store.count_rows("segment_summaries").await.unwrap(), 2);
}
