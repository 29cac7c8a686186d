//! Consolidation cases: members merged into one memory take their links both ways and their
//! entities, undone to the exact rows; archived members, duplicates and a full cap are refused.

use chrono::Duration;
use memsift_core::status::Purpose;
use memsift_core::{MemoryId, RequestId};
use memsift_store::{Replacement, Store};
use serde_json::json;

use super::{answered, applied, cap};
use crate::helpers::t0;

pub async fn consolidation_moves_links_both_ways_and_undo_restores_the_exact_rows(store: &Store) {
    let (ana, a) = store
        .insert_test_memory("ana", "Ana has a cat named Miso.")
        .await
        .unwrap();
    let (_, b) = store
        .insert_test_memory("ana", "Ana's cat Miso is grey.")
        .await
        .unwrap();
    let (_, c) = store
        .insert_test_memory("ana", "Ana is allergic to dogs.")
        .await
        .unwrap();
    let (_, d) = store
        .insert_test_memory("ana", "Ana adopted a pet in 2024.")
        .await
        .unwrap();
    for (source, target, kind) in [
        (c, a, "causes"),
        (a, d, "motivated_by"),
        (b, c, "conflicts"),
        (a, b, "instance_of"),
    ] {
        store.insert_test_link(source, target, kind, t0()).await.unwrap();
    }
    let miso = store
        .insert_test_entity(ana, "Miso", "pet", &[a, b], t0())
        .await
        .unwrap();
    let grey = store
        .insert_test_entity(ana, "grey", "other", &[b], t0())
        .await
        .unwrap();
    let before = store.user_rows(ana).await.unwrap();

    let merged = "Ana has a grey cat named Miso.";
    let request = answered(store, ana, Purpose::ConsolidationReview, json!({}), json!({}), "{}").await;
    let replacement = Replacement {
        request_id: request,
        user_id: ana,
        originals: vec![a, b],
        new_texts: vec![merged.to_owned()],
        embeddings: None,
        kind: "consolidate",
        reason: "same cat".to_owned(),
        cap: cap(2),
        now: t0() + Duration::hours(1),
        narrowed: None,
    };
    let done = applied(store.stages().apply_replacement(&replacement).await.unwrap());
    assert_eq!((done.n_memories_created, done.n_memories_archived), (1, 2));
    let rows = store.user_rows(ana).await.unwrap();
    let new = rows.memories.iter().find(|m| m["text"] == merged).unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    // Every link of an original now belongs to the new memory, in its own direction; the link
    // between the two originals is gone (it would be a self-link); no link names an original.
    let mut links: Vec<(String, String, String)> = rows
        .links
        .iter()
        .map(|row| {
            (
                row["source_id"].as_str().unwrap().to_owned(),
                row["target_id"].as_str().unwrap().to_owned(),
                row["kind"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    links.sort();
    let mut want = vec![
        (c.to_string(), new.clone(), "causes".to_owned()),
        (new.clone(), d.to_string(), "motivated_by".to_owned()),
        (new.clone(), c.to_string(), "conflicts".to_owned()),
    ];
    want.sort();
    assert_eq!(links, want);
    // Entity union, originals archived with superseded_by and the reason.
    let mut joins: Vec<&str> = rows
        .joins
        .iter()
        .filter(|(memory, _)| *memory == new)
        .map(|(_, entity)| entity.as_str())
        .collect();
    joins.sort();
    let mut want_joins = vec![miso.as_str(), grey.as_str()];
    want_joins.sort();
    assert_eq!(joins, want_joins);
    for original in [a, b] {
        let row = rows.memories.iter().find(|m| m["id"] == original.to_string()).unwrap();
        assert_eq!(row["superseded_by"], new);
        assert!(row["archive_reason"].as_str().unwrap().contains("same cat"));
    }

    // Undo: exactly the rows there were before, links and entities included.
    let undone = store
        .memories()
        .undo_operation("ana", done.operation_id.unwrap(), t0())
        .await
        .unwrap();
    assert_eq!(undone.deleted_memory_ids, vec![new]);
    assert_eq!(store.user_rows(ana).await.unwrap(), before);
}

pub async fn consolidation_refuses_archived_members_duplicates_and_a_full_cap(store: &Store) {
    // The reference pipeline's consolidation never rejected archived members.
    let (ana, a) = store.insert_test_memory("ana", "Ana has a cat.").await.unwrap();
    let (_, b) = store.insert_test_memory("ana", "Ana owns a cat.").await.unwrap();
    let (_, c) = store
        .insert_test_memory("ana", "Ana's cat is called Miso.")
        .await
        .unwrap();
    store.archive_test_memory(ana, b).await.unwrap();
    let before = store.user_rows(ana).await.unwrap();
    let try_merge = |originals: Vec<MemoryId>, text: &str, cap_n: i64, request_id: RequestId| Replacement {
        request_id,
        user_id: ana,
        originals,
        new_texts: vec![text.to_owned()],
        embeddings: None,
        kind: "consolidate",
        reason: "test".to_owned(),
        cap: cap(cap_n),
        now: t0(),
        narrowed: None,
    };
    for (originals, text, cap_n, why) in [
        (vec![a, b], "Ana has a cat.", 5, "no longer active"),
        (vec![a, c], "Ana's cat is called Miso.", 1, "cap"),
    ] {
        let request = answered(store, ana, Purpose::ConsolidationReview, json!({}), json!({}), "{}").await;
        let done = applied(
            store
                .stages()
                .apply_replacement(&try_merge(originals, text, cap_n, request))
                .await
                .unwrap(),
        );
        assert!(done.note.as_deref().unwrap().contains(why), "{done:?}");
        assert!(done.operation_id.is_none());
        assert_eq!(store.user_rows(ana).await.unwrap(), before);
    }
}
