//! Batch cases: a batch the provider does not know is counted as a miss that remembers whether its
//! create was ever called, and is looked for again soon after a create without an outcome.

use chrono::Duration;
use memsift_core::status::Lane;
use memsift_store::{NewRequest, Store};

use crate::helpers::{closed_claimed_segment, request, t0};

pub async fn a_reconcile_miss_remembers_whether_the_create_was_called(store: &Store) {
    let mut results = Vec::new();
    // The batch whose create was never called first: its wait is the longer, so the next due
    // work read in the second case is that case's own.
    for (conversation, called) in [("c2", false), ("c1", true)] {
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
        let (grace, recheck) = (Duration::minutes(5), Duration::seconds(30));
        let due = async |at| {
            let listed = store.batches().batches_to_reconcile(at, grace).await.unwrap();
            listed.iter().any(|row| row.id == batch.id.to_string())
        };
        // A create that answered without an outcome is looked for at once; a batch whose create
        // may still be running (its process died around it) only once the grace and its
        // submitter's claim have run out.
        let looked_for_at = if called { t0() } else { t0() + policy.lease };
        assert_eq!(due(t0()).await, called, "{conversation}");
        assert!(due(looked_for_at).await);
        let next_due = store
            .requests()
            .next_due_work(
                Duration::zero(),
                grace,
                &[(Lane::Batch, "extraction_standard".to_owned())],
            )
            .await
            .unwrap();
        assert_eq!(next_due, Some(looked_for_at), "{conversation}");
        let first = store
            .batches()
            .reconcile_miss(batch.id, looked_for_at, grace, recheck)
            .await
            .unwrap();
        // The next pass: a short recheck after a create without an outcome, a grace otherwise.
        let next_pass = looked_for_at + if called { recheck } else { grace };
        assert!(!due(next_pass - Duration::seconds(1)).await);
        assert!(due(next_pass).await);
        let second = store
            .batches()
            .reconcile_miss(batch.id, next_pass, grace, recheck)
            .await
            .unwrap();
        results.push((first, second));
    }
    let miss = |misses, create_was_called| memsift_store::ReconcileMiss {
        misses,
        create_was_called,
    };
    assert_eq!(results[0], (miss(1, false), miss(2, false)));
    assert_eq!(results[1], (miss(1, true), miss(2, true)));
}
