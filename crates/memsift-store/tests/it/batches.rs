//! Batch cases: a batch the provider does not know is counted as a miss that remembers whether its
//! create was ever called.

use chrono::Duration;
use memsift_core::status::Lane;
use memsift_store::{NewRequest, Store};

use crate::helpers::{closed_claimed_segment, request, t0};

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
            .requests()
            .plan_segment_requests(segment_id, std::slice::from_ref(&planned), t0())
            .await
            .unwrap();
        let policy = memsift_store::PackPolicy {
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
        if called {
            store.batches().note_create_unknown(batch.id, "HTTP 500").await.unwrap();
        }
        let first = store
            .batches()
            .reconcile_miss(batch.id, t0(), Duration::minutes(5))
            .await
            .unwrap();
        let second = store
            .batches()
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
