//! Relationship cases: each candidate gets its own link, and a confident supersedes archives the
//! end its kind names within the run's cap, never across users, undone exactly.

use memsift_core::status::Purpose;
use memsift_store::{StageOutcome, Store};
use serde_json::json;

use super::{active_texts, answered, applied, cap, link};
use crate::helpers::t0;

pub async fn several_candidates_of_one_memory_each_get_their_own_link(store: &Store) {
    // The reference pipeline keyed results by an 8-character id prefix, so several candidates of
    // one memory overwrote each other and collapsed into one link on the wrong target.
    let (ana, new) = store.insert_test_memory("ana", "Ana moved to Porto.").await.unwrap();
    let (_, a) = store.insert_test_memory("ana", "Ana lives in Lisbon.").await.unwrap();
    let (_, b) = store.insert_test_memory("ana", "Ana works in Lisbon.").await.unwrap();
    let (_, c) = store.insert_test_memory("ana", "Ana likes Porto wine.").await.unwrap();
    let links = vec![
        link(new, a, "conflicts", false),
        link(new, b, "causes", false),
        link(new, c, "motivated_by", false),
    ];
    let request = answered(store, ana, Purpose::Relationship, json!({}), json!({}), "[]").await;
    let done = applied(
        store
            .stages()
            .apply_links(request, ana, &links, &cap(0), t0())
            .await
            .unwrap(),
    );
    assert_eq!(done.n_links, 3);
    let rows = store.user_rows(ana).await.unwrap();
    let mut got: Vec<(String, String, String)> = rows
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
    got.sort();
    let mut want: Vec<(String, String, String)> = links
        .iter()
        .map(|l| (l.source.to_string(), l.target.to_string(), l.kind.clone()))
        .collect();
    want.sort();
    assert_eq!(got, want);
    // Applying the same answer again writes nothing.
    assert_eq!(
        store
            .stages()
            .apply_links(request, ana, &links, &cap(0), t0())
            .await
            .unwrap(),
        StageOutcome::AlreadyApplied
    );
}

pub async fn a_confident_supersedes_archives_the_end_its_kind_names_within_the_cap_and_undo_restores_it(store: &Store) {
    let (ana, lisbon) = store.insert_test_memory("ana", "Ana lives in Lisbon.").await.unwrap();
    let (_, porto) = store
        .insert_test_memory("ana", "Ana lives in Porto now.")
        .await
        .unwrap();
    let (bo, bos) = store.insert_test_memory("bo", "Bo lives in Lisbon.").await.unwrap();
    let before = store.user_rows(ana).await.unwrap();

    // With a cap of 0 the link is written but nothing is archived.
    let request = answered(store, ana, Purpose::Relationship, json!({}), json!({}), "[]").await;
    let done = applied(
        store
            .stages()
            .apply_links(request, ana, &[link(porto, lisbon, "supersedes", true)], &cap(0), t0())
            .await
            .unwrap(),
    );
    assert_eq!((done.n_links, done.n_memories_archived), (1, 0));
    assert!(done.note.unwrap().contains("cap"));
    assert_eq!(active_texts(store, "ana").await.len(), 2);
    store
        .memories()
        .undo_operation("ana", done.operation_id.unwrap(), t0())
        .await
        .unwrap();
    assert_eq!(store.user_rows(ana).await.unwrap(), before);

    // The kind names the stale end, whatever the ages: "Lisbon supersedes Porto" archives Porto,
    // the memory written later (the old rule archived the older end, Lisbon, whichever it was).
    let request = answered(store, ana, Purpose::Relationship, json!({}), json!({}), "[]").await;
    let done = applied(
        store
            .stages()
            .apply_links(request, ana, &[link(lisbon, porto, "supersedes", true)], &cap(1), t0())
            .await
            .unwrap(),
    );
    assert_eq!(done.n_memories_archived, 1);
    assert_eq!(
        active_texts(store, "ana").await,
        vec!["Ana lives in Lisbon.".to_owned()]
    );
    let rows = store.user_rows(ana).await.unwrap();
    let stale = rows.memories.iter().find(|m| m["id"] == porto.to_string()).unwrap();
    assert_eq!(stale["superseded_by"], lisbon.to_string());
    store
        .memories()
        .undo_operation("ana", done.operation_id.unwrap(), t0())
        .await
        .unwrap();
    assert_eq!(store.user_rows(ana).await.unwrap(), before);

    // `invalidated_by` names the source: the memory is archived, kept, and points at the other.
    let request = answered(store, ana, Purpose::Relationship, json!({}), json!({}), "[]").await;
    let done = applied(
        store
            .stages()
            .apply_links(
                request,
                ana,
                &[link(lisbon, porto, "invalidated_by", true)],
                &cap(1),
                t0(),
            )
            .await
            .unwrap(),
    );
    assert_eq!((done.n_links, done.n_memories_archived), (1, 1));
    assert_eq!(
        active_texts(store, "ana").await,
        vec!["Ana lives in Porto now.".to_owned()]
    );
    let rows = store.user_rows(ana).await.unwrap();
    let old = rows.memories.iter().find(|m| m["id"] == lisbon.to_string()).unwrap();
    assert_eq!(old["superseded_by"], porto.to_string());

    // Another user's memory is never linked (invariant 9), and the answer is applied with a note.
    let request = answered(store, ana, Purpose::Relationship, json!({}), json!({}), "[]").await;
    let done = applied(
        store
            .stages()
            .apply_links(request, ana, &[link(porto, bos, "conflicts", false)], &cap(5), t0())
            .await
            .unwrap(),
    );
    assert_eq!(done.n_links, 0);
    assert!(done.operation_id.is_none());
    assert!(store.user_rows(bo).await.unwrap().links.is_empty());

    let journal = store.operation_ids("ana", "link").await.unwrap();
    store
        .memories()
        .undo_operation("ana", *journal.last().unwrap(), t0())
        .await
        .unwrap();
    assert_eq!(store.user_rows(ana).await.unwrap(), before);
}

pub async fn memory_said_at_reads_the_latest_evidence_turn_or_the_write_time(store: &Store) {
    // Memories citing no turns were said when they were written; another user's memory is
    // skipped, never read (invariant 9).
    let (ana, lisbon) = store.insert_test_memory("ana", "Ana lives in Lisbon.").await.unwrap();
    let (_, bos) = store.insert_test_memory("bo", "Bo lives in Lisbon.").await.unwrap();
    let said = store.stages().memory_said_at(ana, &[lisbon, bos]).await.unwrap();
    assert_eq!(said.len(), 1, "{said:?}");
    assert_eq!(
        said[&lisbon],
        chrono::DateTime::parse_from_rfc3339("2026-03-01T10:00:00Z").unwrap()
    );
}
