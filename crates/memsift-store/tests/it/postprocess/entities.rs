//! Entity GC cases: merges are validated and move every join to the target, deletes take their
//! joins, and an undone merge keeps the joins added after it.

use chrono::Duration;
use memsift_core::status::Purpose;
use memsift_store::{EntityDecision, Store};
use serde_json::json;

use super::{answered, applied};
use crate::helpers::t0;

pub async fn entity_merges_are_validated_and_move_every_join_to_the_target(store: &Store) {
    // The reference pipeline's entity merge showed no candidate ids, kept the source id in its
    // rewrite, validated no target, and its delete left the references behind.
    let (ana, a) = store.insert_test_memory("ana", "Caroline paints.").await.unwrap();
    let (_, b) = store.insert_test_memory("ana", "Caroline runs.").await.unwrap();
    let (_, c) = store
        .insert_test_memory("ana", "Caroline Smith is Ana's friend.")
        .await
        .unwrap();
    let (bo, bos) = store.insert_test_memory("bo", "Bo knows Caroline.").await.unwrap();
    let old = t0() - Duration::days(60);
    let source = store
        .insert_test_entity(ana, "Caroline", "person", &[a, b], old)
        .await
        .unwrap();
    let target = store
        .insert_test_entity(ana, "Caroline Smith", "person", &[c], old)
        .await
        .unwrap();
    let place = store
        .insert_test_entity(ana, "Caroline Springs", "place", &[c], old)
        .await
        .unwrap();
    let bos_entity = store
        .insert_test_entity(bo, "Caroline S", "person", &[bos], old)
        .await
        .unwrap();
    let before = store.user_rows(ana).await.unwrap();
    let dormant = store.stages().dormant_entities(ana, t0(), 45, 1, 5).await.unwrap();
    assert_eq!(dormant.len(), 3);

    for (target, candidates, why) in [
        (target.clone(), vec![place.clone()], "not a candidate"),
        (place.clone(), vec![place.clone()], "not a `person`"),
        (bos_entity.clone(), vec![bos_entity.clone()], "not this user's"),
        (source.clone(), vec![source.clone()], "itself"),
    ] {
        let request = answered(store, ana, Purpose::EntityGc, json!({}), json!({}), "{}").await;
        let decision = EntityDecision::Merge { target, candidates };
        let done = applied(
            store
                .stages()
                .apply_entity_decision(request, ana, &source, &decision, t0())
                .await
                .unwrap(),
        );
        assert!(done.note.as_deref().unwrap().contains(why), "{done:?}");
        assert_eq!(store.user_rows(ana).await.unwrap(), before);
    }

    let request = answered(store, ana, Purpose::EntityGc, json!({}), json!({}), "{}").await;
    let decision = EntityDecision::Merge {
        target: target.clone(),
        candidates: vec![target.clone(), place.clone()],
    };
    let done = applied(
        store
            .stages()
            .apply_entity_decision(request, ana, &source, &decision, t0())
            .await
            .unwrap(),
    );
    let rows = store.user_rows(ana).await.unwrap();
    let mut target_joins: Vec<String> = rows
        .joins
        .iter()
        .filter(|(_, entity)| *entity == target)
        .map(|(memory, _)| memory.clone())
        .collect();
    target_joins.sort();
    let mut want = vec![a.to_string(), b.to_string(), c.to_string()];
    want.sort();
    assert_eq!(target_joins, want);
    assert!(
        rows.joins.iter().all(|(_, entity)| *entity != source),
        "no join keeps the source"
    );
    let target_row = rows.entities.iter().find(|e| e["id"] == target).unwrap();
    assert_eq!(target_row["link_count"], 3);
    let source_row = rows.entities.iter().find(|e| e["id"] == source).unwrap();
    assert!(!source_row["archived_at"].is_null());
    store
        .memories()
        .undo_operation("ana", done.operation_id.unwrap(), t0())
        .await
        .unwrap();
    assert_eq!(store.user_rows(ana).await.unwrap(), before);

    // A delete removes the joins too, and undo brings them back.
    let request = answered(store, ana, Purpose::EntityGc, json!({}), json!({}), "{}").await;
    let done = applied(
        store
            .stages()
            .apply_entity_decision(request, ana, &place, &EntityDecision::Delete, t0())
            .await
            .unwrap(),
    );
    assert!(
        store
            .user_rows(ana)
            .await
            .unwrap()
            .joins
            .iter()
            .all(|(_, entity)| *entity != place)
    );
    store
        .memories()
        .undo_operation("ana", done.operation_id.unwrap(), t0())
        .await
        .unwrap();
    assert_eq!(store.user_rows(ana).await.unwrap(), before);
}

pub async fn undoing_an_entity_merge_keeps_joins_added_after_it(store: &Store) {
    // An undo puts back what the merge changed and removes what it added, nothing more: a join a
    // later extraction gave the target survives the undo.
    let (ana, a) = store.insert_test_memory("ana", "Tiago cooks.").await.unwrap();
    let (_, b) = store.insert_test_memory("ana", "Tiago Silva runs.").await.unwrap();
    let old = t0() - Duration::days(60);
    let source = store
        .insert_test_entity(ana, "Tiago", "person", &[a], old)
        .await
        .unwrap();
    let target = store
        .insert_test_entity(ana, "Tiago Silva", "person", &[b], old)
        .await
        .unwrap();
    let request = answered(store, ana, Purpose::EntityGc, json!({}), json!({}), "{}").await;
    let decision = EntityDecision::Merge {
        target: target.clone(),
        candidates: vec![target.clone()],
    };
    let done = applied(
        store
            .stages()
            .apply_entity_decision(request, ana, &source, &decision, t0())
            .await
            .unwrap(),
    );
    // Later, another memory names the target (as an extraction would join it).
    let (_, c) = store.insert_test_memory("ana", "Tiago Silva swims.").await.unwrap();
    let later = store
        .insert_test_entity(ana, "someone else", "person", &[c], t0())
        .await
        .unwrap();
    store
        .stages()
        .apply_entity_decision(
            answered(store, ana, Purpose::EntityGc, json!({}), json!({}), "{}").await,
            ana,
            &later,
            &EntityDecision::Merge {
                target: target.clone(),
                candidates: vec![target.clone()],
            },
            t0(),
        )
        .await
        .unwrap();
    store
        .memories()
        .undo_operation("ana", done.operation_id.unwrap(), t0())
        .await
        .unwrap();
    let rows = store.user_rows(ana).await.unwrap();
    let mut joins: Vec<(String, String)> = rows.joins.clone();
    joins.sort();
    let mut want = vec![
        (a.to_string(), source.clone()),
        (b.to_string(), target.clone()),
        (c.to_string(), target.clone()),
    ];
    want.sort();
    assert_eq!(joins, want);
}
