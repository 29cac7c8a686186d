//! Refinement cases: who is a candidate (length, age, reads, cooldown, three rejections at most),
//! and a split that replaces one memory with several, undone exactly.

use chrono::Duration;
use memsift_core::status::Purpose;
use memsift_store::{RefinementRules, Replacement, Store};
use serde_json::json;

use super::{active_texts, answered, applied, cap};
use crate::helpers::t0;

pub async fn refinement_needs_length_age_and_reads_and_stops_after_three_rejections(store: &Store) {
    let long = "Ana basically really likes to cook very spicy Thai curries on Sunday evenings with her partner.";
    let (ana, eligible) = store.insert_test_memory("ana", long).await.unwrap();
    let (_, short) = store.insert_test_memory("ana", "Ana cooks.").await.unwrap();
    let (_, unread) = store
        .insert_test_memory("ana", &format!("{long} She also bakes bread."))
        .await
        .unwrap();
    let now = t0() + Duration::days(30);
    store.set_test_memory_reads(eligible, 3, t0()).await.unwrap();
    store.set_test_memory_reads(short, 10, t0()).await.unwrap();
    store.set_test_memory_reads(unread, 2, t0()).await.unwrap();
    let rules = RefinementRules {
        min_chars: 70,
        min_age_days: 7,
        min_reads: 3,
        cooldown_days: 30,
        max_rejections: 3,
    };
    let ids = |candidates: Vec<memsift_store::StageMemory>| candidates.into_iter().map(|m| m.id).collect::<Vec<_>>();
    assert_eq!(
        ids(store.stages().refinement_candidates(ana, now, &rules).await.unwrap()),
        vec![eligible]
    );
    // Too young: written 3 days before now.
    store
        .set_test_memory_reads(eligible, 3, now - Duration::days(3))
        .await
        .unwrap();
    assert!(
        store
            .stages()
            .refinement_candidates(ana, now, &rules)
            .await
            .unwrap()
            .is_empty()
    );
    store.set_test_memory_reads(eligible, 3, t0()).await.unwrap();

    // Each rejection restarts the cooldown; after three it is never offered again.
    let mut at = now;
    for round in 1..=3 {
        let request = answered(store, ana, Purpose::Refinement, json!({}), json!({}), "{}").await;
        let done = applied(
            store
                .stages()
                .apply_refinement_rejection(request, ana, eligible, "do_nothing: fine as it is", at)
                .await
                .unwrap(),
        );
        assert!(done.operation_id.is_some());
        assert!(
            store
                .stages()
                .refinement_candidates(ana, at + Duration::days(1), &rules)
                .await
                .unwrap()
                .is_empty(),
            "cooldown after rejection {round}"
        );
        at += Duration::days(31);
        let expected = if round < 3 { vec![eligible] } else { vec![] };
        assert_eq!(
            ids(store.stages().refinement_candidates(ana, at, &rules).await.unwrap()),
            expected
        );
    }
}

pub async fn a_split_refinement_replaces_one_memory_with_several_and_undo_restores_it(store: &Store) {
    let text = "Ana works as a nurse in Porto; Ana plays the cello in an amateur orchestra on weekends.";
    let (ana, original) = store.insert_test_memory("ana", text).await.unwrap();
    let before = store.user_rows(ana).await.unwrap();
    let request = answered(store, ana, Purpose::Refinement, json!({}), json!({}), "{}").await;
    let parts = vec![
        "Ana works as a nurse in Porto.".to_owned(),
        "Ana plays the cello in an amateur orchestra on weekends.".to_owned(),
    ];
    let done = applied(
        store
            .stages()
            .apply_replacement(&Replacement {
                request_id: request,
                user_id: ana,
                originals: vec![original],
                new_texts: parts.clone(),
                embeddings: None,
                kind: "refine",
                reason: "split".to_owned(),
                cap: cap(1),
                now: t0(),
                narrowed: None,
            })
            .await
            .unwrap(),
    );
    assert_eq!((done.n_memories_created, done.n_memories_archived), (2, 1));
    let mut want = parts;
    want.sort();
    assert_eq!(active_texts(store, "ana").await, want);
    let rows = store.user_rows(ana).await.unwrap();
    assert!(
        rows.memories
            .iter()
            .filter(|m| m["archived_at"].is_null())
            .all(|m| !m["refined_at"].is_null())
    );
    store
        .memories()
        .undo_operation("ana", done.operation_id.unwrap(), t0())
        .await
        .unwrap();
    assert_eq!(store.user_rows(ana).await.unwrap(), before);
}
