//! Cases for drop records: kept with their request, counted once by a closed reason.

use memsift_core::drops::{DropReason, DroppedItem};
use memsift_store::{ApplyOutcome, Store};

use crate::helpers::{apply_input, closed_claimed_segment, item, request, t0};

pub async fn drops_are_counted_by_reason_once_and_read_back_typed(store: &Store) {
    let (segment_id, user_id, _) = closed_claimed_segment(store, "ana", "c1").await;
    let extraction = request(segment_id, user_id, 0);
    let stage = request(segment_id, user_id, 1);
    store
        .requests()
        .plan_segment_requests(segment_id, &[extraction.clone(), stage.clone()], t0())
        .await
        .unwrap();
    for id in [extraction.id, stage.id] {
        store.record_output(id, "[...]", Some("end_turn"), t0()).await.unwrap();
    }
    let mut input = apply_input(&extraction, vec![item("Ana lives in Lisbon.", vec![])]);
    input.drops = vec![
        DroppedItem::new(1, DropReason::TooShort, Some("Ana".to_owned())),
        DroppedItem::new(2, DropReason::TooShort, Some("ok".to_owned())),
        DroppedItem::new(3, DropReason::Truncated, Some("Ana li".to_owned())),
    ];
    input.n_dropped = 3;
    assert!(matches!(
        store.memories().apply(&input).await.unwrap(),
        ApplyOutcome::Applied { .. }
    ));
    // Applying the same answer again writes nothing, and counts nothing twice.
    assert_eq!(
        store.memories().apply(&input).await.unwrap(),
        ApplyOutcome::AlreadyApplied
    );
    store
        .stages()
        .apply_without_change(stage.id, 0, Some("keep: nothing to add"), t0())
        .await
        .unwrap();

    let snapshot = store.listing().metrics_snapshot().await.unwrap();
    // Three items were dropped; the stage answer that changed nothing is a record, not an item.
    assert_eq!(snapshot.items_dropped, 3);
    let by_reason = snapshot.drops_by_reason;
    assert_eq!(
        by_reason,
        vec![
            ("too_short".to_owned(), 2),
            ("truncated".to_owned(), 1),
            ("unchanged".to_owned(), 1)
        ]
    );
    assert_eq!(
        store.listing().request_detail(extraction.id).await.unwrap().drops.0,
        input.drops
    );
    assert_eq!(
        store.listing().request_detail(stage.id).await.unwrap().drops.0,
        vec![DroppedItem::unchanged("keep: nothing to add")]
    );
}
