//! Lane cases: a paused lane holds its requests and batches unspent until the probe, rerouting
//! moves them, and lane health keeps each lane's last state and the live processes.

use chrono::Duration;
use memsift_core::status::Lane;
use memsift_store::{NewRequest, Store};

use crate::helpers::{closed_claimed_segment, request, t0};

pub async fn a_paused_lane_holds_its_work_unspent_and_rerouting_moves_it(store: &Store) {
    let (segment_id, user_id, _) = closed_claimed_segment(store, "ana", "c1").await;
    let planned = NewRequest {
        lane: Lane::Batch,
        provider: "openai".to_owned(),
        model: Some("gpt-4o-mini".to_owned()),
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
    let pack = async |at| {
        store
            .batches()
            .pack_batch("openai", "extraction_standard", "w", at, policy)
            .await
            .unwrap()
    };
    let batch = pack(t0()).await.expect("due at once");
    // The create met a setting fault: the batch fails, the request waits unspent until the probe.
    let probe_at = t0() + Duration::minutes(1);
    store
        .batches()
        .hold_batch(batch.id, "lane batch openai/gpt-4o-mini paused: 404", probe_at, t0())
        .await
        .unwrap();
    let requests = store.listing().list_requests(Some("ana"), None, None).await.unwrap();
    assert_eq!(
        (requests.len(), requests[0].status.as_str(), requests[0].attempt),
        (1, "planned", 1)
    );
    let segment = &store.listing().list_segments(Some("ana"), None, None).await.unwrap()[0];
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
        .lanes()
        .waiting_requests(Lane::Batch, &["extraction_standard".to_owned()], 10)
        .await
        .unwrap();
    assert_eq!(waiting.len(), 1);
    assert_eq!((waiting[0].id, waiting[0].user_id), (planned.id, user_id));
    // Rerouted to another lane: the same id, claimable there at once.
    let moved = store
        .lanes()
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
        .requests()
        .claim_requests(Lane::Immediate, "w", t0(), Duration::minutes(15), 10)
        .await
        .unwrap();
    assert_eq!(claimed.len(), 1);
    assert_eq!(
        (claimed[0].id, claimed[0].config_key.as_str(), claimed[0].attempt),
        (planned.id, "extraction_fallback", 1)
    );
    // Held again on the immediate lane: not claimable before its time, then claimable.
    store
        .lanes()
        .hold_request(planned.id, "paused: 401", probe_at)
        .await
        .unwrap();
    let early = store
        .requests()
        .claim_requests(Lane::Immediate, "w", t0(), Duration::minutes(15), 10)
        .await
        .unwrap();
    assert!(early.is_empty());
    let due = store
        .requests()
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
        .lanes()
        .record_lane_transition(&transition("open", true, t0()), "w1")
        .await
        .unwrap();
    let rows = store.lanes().lane_health().await.unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!((rows[0].state.as_str(), rows[0].setting_fault), ("open", true));
    assert_eq!(rows[0].reason.as_deref(), Some("openai: not found\u{FFFD}"));
    store
        .lanes()
        .record_lane_transition(&transition("closed", false, t0() + Duration::minutes(2)), "w2")
        .await
        .unwrap();
    let rows = store.lanes().lane_health().await.unwrap();
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

    // Quotas are shared by demand: w1 asked a provider for something at t0 and again at 4 min,
    // w2 only ran (a daemon with nothing to send) at 3 min, then asked at 5 min.
    let lanes = store.lanes();
    lanes.heartbeat("w1", t0(), true).await.unwrap();
    lanes.heartbeat("w2", t0() + Duration::minutes(3), false).await.unwrap();
    lanes.heartbeat("w1", t0() + Duration::minutes(4), true).await.unwrap();
    let others = async |worker: &str, since_minutes: i64| {
        lanes
            .other_demanding_workers(worker, t0() + Duration::minutes(since_minutes))
            .await
            .unwrap()
    };
    assert_eq!(others("w2", 0).await, 1, "w1 wants a share");
    assert_eq!(others("w1", 0).await, 0, "an idle process takes no part");
    lanes.heartbeat("w2", t0() + Duration::minutes(5), true).await.unwrap();
    // A beat without demand keeps the last time the process wanted a share.
    lanes.heartbeat("w2", t0() + Duration::minutes(6), false).await.unwrap();
    assert_eq!(others("w1", 5).await, 1);
    assert_eq!(others("w2", 5).await, 0, "w1 last asked at 4 min");
    assert_eq!(others("w1", 6).await, 0);
}
