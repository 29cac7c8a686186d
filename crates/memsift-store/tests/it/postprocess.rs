//! Post-processing cases: links, consolidation, refinement, entity GC and summaries, each
//! journaled and undone to the exact prior rows; several pin a bug of the reference pipeline
//! (docs/design.md, section 12) that ours must not have.

use chrono::Duration;
use memsift_core::status::{Lane, Purpose, Role};
use memsift_core::{MemoryId, RequestId, SegmentId, UserId};
use memsift_store::{
    EntityDecision, NewLink, NewRequest, RefinementRules, Replacement, RequestUsage, RunCap, StageApplied,
    StageOutcome, Store,
};
use serde_json::{Value, json};

use crate::helpers::{idle, message, no_progress, t0};

/// A stage request of `purpose` about `subject`, answered with `raw` (status `succeeded`).
async fn answered(
    store: &Store,
    user_id: UserId,
    purpose: Purpose,
    subject: Value,
    context: Value,
    raw: &str,
) -> RequestId {
    let request = NewRequest {
        id: RequestId::new_v7(),
        purpose,
        user_id,
        segment_id: subject
            .get("segment_id")
            .and_then(Value::as_str)
            .map(|id| SegmentId::parse(id).unwrap()),
        chunk_index: 0,
        lane: Lane::Heuristic,
        config_key: format!("{}_standard", purpose.as_str()),
        provider: "heuristic".to_owned(),
        model: None,
        prompt_version: "offline-judge@1".to_owned(),
        // Written as JSON the way stages write them, read through the typed contract.
        context: serde_json::from_value(context).unwrap(),
        request_body: Default::default(),
        subject: serde_json::from_value(subject).unwrap(),
        parent_request_id: None,
        reserved_usd: 0.0,
    };
    store
        .plan_stage_requests(std::slice::from_ref(&request), &memsift_store::Covered::default(), t0())
        .await
        .unwrap();
    assert!(
        store
            .record_answer(request.id, raw, None, &RequestUsage::default(), t0())
            .await
            .unwrap()
    );
    request.id
}

fn cap(n: i64) -> RunCap {
    RunCap {
        run: RequestId::new_v7().to_string(),
        cap: n,
    }
}

fn applied(outcome: StageOutcome) -> StageApplied {
    match outcome {
        StageOutcome::Applied(applied) => applied,
        StageOutcome::AlreadyApplied => panic!("expected a first apply"),
    }
}

fn link(source: MemoryId, target: MemoryId, kind: &str, supersedes_older: bool) -> NewLink {
    NewLink {
        source,
        target,
        kind: kind.to_owned(),
        confidence: 0.9,
        reasoning: format!("{kind} by test"),
        supersedes_older,
    }
}

async fn active_texts(store: &Store, user: &str) -> Vec<String> {
    let mut texts: Vec<String> = store
        .list_memories(user, None)
        .await
        .unwrap()
        .into_iter()
        .map(|row| row.text)
        .collect();
    texts.sort();
    texts
}

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
    let done = applied(store.apply_links(request, ana, &links, &cap(0), t0()).await.unwrap());
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
        store.apply_links(request, ana, &links, &cap(0), t0()).await.unwrap(),
        StageOutcome::AlreadyApplied
    );
}

pub async fn a_confident_supersedes_archives_the_older_within_the_cap_and_undo_restores_it(store: &Store) {
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
            .apply_links(request, ana, &[link(porto, lisbon, "supersedes", true)], &cap(0), t0())
            .await
            .unwrap(),
    );
    assert_eq!((done.n_links, done.n_memories_archived), (1, 0));
    assert!(done.note.unwrap().contains("cap"));
    assert_eq!(active_texts(store, "ana").await.len(), 2);
    store
        .undo_operation("ana", done.operation_id.unwrap(), t0())
        .await
        .unwrap();
    assert_eq!(store.user_rows(ana).await.unwrap(), before);

    // Within the cap the older memory is archived, kept, and points at the newer one; it does not
    // matter which side of the link the older one is on.
    let request = answered(store, ana, Purpose::Relationship, json!({}), json!({}), "[]").await;
    let done = applied(
        store
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
            .apply_links(request, ana, &[link(porto, bos, "conflicts", false)], &cap(5), t0())
            .await
            .unwrap(),
    );
    assert_eq!(done.n_links, 0);
    assert!(done.operation_id.is_none());
    assert!(store.user_rows(bo).await.unwrap().links.is_empty());

    let journal = store.operation_ids("ana", "link").await.unwrap();
    store
        .undo_operation("ana", *journal.last().unwrap(), t0())
        .await
        .unwrap();
    assert_eq!(store.user_rows(ana).await.unwrap(), before);
}

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
    };
    let done = applied(store.apply_replacement(&replacement).await.unwrap());
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
    };
    for (originals, text, cap_n, why) in [
        (vec![a, b], "Ana has a cat.", 5, "no longer active"),
        (vec![a, c], "Ana's cat is called Miso.", 1, "cap"),
    ] {
        let request = answered(store, ana, Purpose::ConsolidationReview, json!({}), json!({}), "{}").await;
        let done = applied(
            store
                .apply_replacement(&try_merge(originals, text, cap_n, request))
                .await
                .unwrap(),
        );
        assert!(done.note.as_deref().unwrap().contains(why), "{done:?}");
        assert!(done.operation_id.is_none());
        assert_eq!(store.user_rows(ana).await.unwrap(), before);
    }
}

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
        ids(store.refinement_candidates(ana, now, &rules).await.unwrap()),
        vec![eligible]
    );
    // Too young: written 3 days before now.
    store
        .set_test_memory_reads(eligible, 3, now - Duration::days(3))
        .await
        .unwrap();
    assert!(store.refinement_candidates(ana, now, &rules).await.unwrap().is_empty());
    store.set_test_memory_reads(eligible, 3, t0()).await.unwrap();

    // Each rejection restarts the cooldown; after three it is never offered again.
    let mut at = now;
    for round in 1..=3 {
        let request = answered(store, ana, Purpose::Refinement, json!({}), json!({}), "{}").await;
        let done = applied(
            store
                .apply_refinement_rejection(request, ana, eligible, "do_nothing: fine as it is", at)
                .await
                .unwrap(),
        );
        assert!(done.operation_id.is_some());
        assert!(
            store
                .refinement_candidates(ana, at + Duration::days(1), &rules)
                .await
                .unwrap()
                .is_empty(),
            "cooldown after rejection {round}"
        );
        at += Duration::days(31);
        let expected = if round < 3 { vec![eligible] } else { vec![] };
        assert_eq!(
            ids(store.refinement_candidates(ana, at, &rules).await.unwrap()),
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
        .undo_operation("ana", done.operation_id.unwrap(), t0())
        .await
        .unwrap();
    assert_eq!(store.user_rows(ana).await.unwrap(), before);
}

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
    let dormant = store.dormant_entities(ana, t0(), 45, 1, 5).await.unwrap();
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
        .undo_operation("ana", done.operation_id.unwrap(), t0())
        .await
        .unwrap();
    assert_eq!(store.user_rows(ana).await.unwrap(), before);

    // A delete removes the joins too, and undo brings them back.
    let request = answered(store, ana, Purpose::EntityGc, json!({}), json!({}), "{}").await;
    let done = applied(
        store
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
        .undo_operation("ana", done.operation_id.unwrap(), t0())
        .await
        .unwrap();
    assert_eq!(store.user_rows(ana).await.unwrap(), before);
}

pub async fn a_segment_keeps_one_live_summary(store: &Store) {
    let mut last = message("ana", "c1", 1, Role::Assistant, "Nice.");
    last.boundary_after = true;
    let messages = vec![message("ana", "c1", 0, Role::User, "I ran a marathon."), last];
    store.ingest(&messages, idle(), t0(), &no_progress).await.unwrap();
    let segment = store.list_segments(Some("ana"), None, None).await.unwrap()[0].clone();
    let segment_id = SegmentId::parse(&segment.id).unwrap();
    let user = store.user_id("ana").await.unwrap().unwrap();
    let subject = json!({ "segment_id": segment_id.to_string() });
    for (text, live) in [
        ("Ana ran a marathon.", "Ana ran a marathon."),
        ("Ana ran a marathon.", "Ana ran a marathon."),
        ("Ana ran her first marathon.", "Ana ran her first marathon."),
    ] {
        let request = answered(store, user, Purpose::Summary, subject.clone(), json!({}), "{}").await;
        store
            .apply_summary(request, user, segment_id, text, t0())
            .await
            .unwrap();
        assert_eq!(store.live_summary(segment_id).await.unwrap().as_deref(), Some(live));
    }
    // Three answers, two distinct texts: one live row, one superseded, the identical one wrote nothing.
    assert_eq!(store.count_rows("segment_summaries").await.unwrap(), 2);
}

pub async fn a_failed_stage_request_gets_one_successor_per_attempt(store: &Store) {
    // Stage requests have no segment, so their attempts are told apart by subject; before that a
    // failed one would have been re-planned on every step, forever.
    let (ana, memory) = store.insert_test_memory("ana", "Ana has a cat.").await.unwrap();
    let subject = json!({ "run": "r1", "cap": 1, "memory_id": memory.to_string() });
    let request = answered(store, ana, Purpose::Refinement, subject, json!({}), "{}").await;
    // Turn the answered request into a failed attempt instead.
    let failed = NewRequest {
        id: RequestId::new_v7(),
        purpose: Purpose::Refinement,
        user_id: ana,
        segment_id: None,
        chunk_index: 0,
        lane: Lane::Heuristic,
        config_key: "refinement_standard".to_owned(),
        provider: "heuristic".to_owned(),
        model: None,
        prompt_version: "offline-judge@1".to_owned(),
        context: Default::default(),
        request_body: Default::default(),
        subject: serde_json::from_value(json!({ "run": "r2", "cap": 1, "memory_id": memory.to_string() })).unwrap(),
        parent_request_id: None,
        reserved_usd: 0.0,
    };
    store
        .plan_stage_requests(std::slice::from_ref(&failed), &memsift_store::Covered::default(), t0())
        .await
        .unwrap();
    store
        .record_failure(
            failed.id,
            memsift_core::status::RequestStatus::Errored,
            "overloaded",
            t0(),
        )
        .await
        .unwrap();
    let first = store.replan_failed_requests(3, t0()).await.unwrap();
    let second = store.replan_failed_requests(3, t0()).await.unwrap();
    assert_eq!((first.n_replanned, second.n_replanned), (1, 0));
    let _ = request;
}

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
            .apply_narrowing(request, ana, memory, 0.5, Some(expiry), t0() + Duration::hours(1))
            .await
            .unwrap(),
    );
    let row = store.review_memory(ana, memory).await.unwrap().unwrap();
    assert_eq!((row.confidence, row.expires_at), (0.5, Some(expiry)));
    // Another user's memory is not narrowed through ana's request.
    let (bo, bos) = store.insert_test_memory("bo", "Bo plays chess.").await.unwrap();
    let request = answered(store, ana, Purpose::ExtractionReview, json!({}), json!({}), "{}").await;
    let other = applied(store.apply_narrowing(request, ana, bos, 0.1, None, t0()).await.unwrap());
    assert!(other.operation_id.is_none());
    assert_eq!(store.review_memory(bo, bos).await.unwrap().unwrap().confidence, 0.9);
    store
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

/// Every kind of stage verdict, each on a fresh answered request: (what it is, the apply).
type VerdictCase = (&'static str, RequestId, StageOutcome);

pub async fn every_stage_verdict_ends_its_request_applied(store: &Store) {
    // Before stage writes ran in `Store::write`, an early return inside the transaction macro left
    // the body before its commit: keep verdicts, cap refusals and archived members were reported
    // applied but rolled back, and their requests stayed `succeeded` to be picked up forever.
    let (ana, a) = store.insert_test_memory("ana", "Ana lives in Lisbon.").await.unwrap();
    let (_, b) = store
        .insert_test_memory("ana", "Ana lives in Lisbon, Portugal.")
        .await
        .unwrap();
    let (_, c) = store.insert_test_memory("ana", "Ana moved to Porto.").await.unwrap();
    let (_, d) = store
        .insert_test_memory("ana", "Ana has a cat named Tom.")
        .await
        .unwrap();
    let (_, e) = store.insert_test_memory("ana", "Ana works as a nurse.").await.unwrap();
    let (_, archived) = store
        .insert_test_memory("ana", "Ana once lived in Faro.")
        .await
        .unwrap();
    store.archive_test_memory(ana, archived).await.unwrap();
    let old = t0() - Duration::days(60);
    let keep_entity = store.insert_test_entity(ana, "Tom", "pet", &[d], old).await.unwrap();
    let merged_entity = store
        .insert_test_entity(ana, "Lisbon", "place", &[a], old)
        .await
        .unwrap();
    let merge_target = store
        .insert_test_entity(ana, "Lisboa", "place", &[b], old)
        .await
        .unwrap();
    let deleted_entity = store.insert_test_entity(ana, "Faro", "place", &[c], old).await.unwrap();
    let refused_entity = store
        .insert_test_entity(ana, "Porto", "place", &[c], old)
        .await
        .unwrap();
    let mut last = message("ana", "c1", 1, Role::Assistant, "Nice.");
    last.boundary_after = true;
    store
        .ingest(
            &[message("ana", "c1", 0, Role::User, "I ran a marathon."), last],
            idle(),
            t0(),
            &no_progress,
        )
        .await
        .unwrap();
    let segment = SegmentId::parse(&store.list_segments(Some("ana"), None, None).await.unwrap()[0].id).unwrap();

    let ask = |purpose: Purpose| answered(store, ana, purpose, json!({}), json!({}), "{}");
    let replace = |request_id, originals: Vec<MemoryId>, texts: &[&str], cap_of: i64| Replacement {
        request_id,
        user_id: ana,
        originals,
        new_texts: texts.iter().map(|text| (*text).to_owned()).collect(),
        embeddings: None,
        kind: "consolidate",
        reason: "test".to_owned(),
        cap: cap(cap_of),
        now: t0(),
    };
    let merge = |target: &str, candidates: &[&String]| EntityDecision::Merge {
        target: target.to_owned(),
        candidates: candidates.iter().map(|id| (*id).clone()).collect(),
    };
    let mut cases: Vec<VerdictCase> = Vec::new();
    macro_rules! case {
        ($name:literal, $purpose:expr, |$request:ident| $apply:expr) => {{
            let $request = ask($purpose).await;
            let outcome = $apply.await.unwrap();
            cases.push(($name, $request, outcome));
        }};
    }
    case! { "link written", Purpose::Relationship, |r| store.apply_links(r, ana, &[link(a, c, "conflicts", false)], &cap(5), t0()) }
    case! { "link to an archived memory", Purpose::Relationship, |r| store.apply_links(r, ana, &[link(a, archived, "causes", false)], &cap(5), t0()) }
    case! { "supersede refused by the cap", Purpose::Relationship, |r| store.apply_links(r, ana, &[link(d, e, "supersedes", true)], &cap(0), t0()) }
    case! { "no links at all", Purpose::Relationship, |r| store.apply_links(r, ana, &[], &cap(5), t0()) }
    case! { "consolidation refused by the cap", Purpose::ConsolidationReview, |r| store.apply_replacement(&replace(r, vec![a, b], &["Ana lives in Lisbon (Portugal)."], 1)) }
    case! { "consolidation of an archived member", Purpose::ConsolidationReview, |r| store.apply_replacement(&replace(r, vec![a, archived], &["Ana lived in Faro and Lisbon."], 5)) }
    case! { "consolidation into another memory's text", Purpose::ConsolidationReview, |r| store.apply_replacement(&replace(r, vec![a, b], &["Ana moved to Porto."], 5)) }
    case! { "consolidation with nothing to write", Purpose::ConsolidationReview, |r| store.apply_replacement(&replace(r, vec![a, b], &[], 5)) }
    case! { "consolidation written", Purpose::ConsolidationReview, |r| store.apply_replacement(&replace(r, vec![a, b], &["Ana lives in Lisbon, in Portugal."], 5)) }
    case! { "refinement rejected", Purpose::Refinement, |r| store.apply_refinement_rejection(r, ana, d, "do_nothing: fine as it is", t0()) }
    case! { "narrowing of an active memory", Purpose::ExtractionReview, |r| store.apply_narrowing(r, ana, e, 0.4, None, t0()) }
    case! { "narrowing of an archived memory", Purpose::ExtractionReview, |r| store.apply_narrowing(r, ana, archived, 0.4, None, t0()) }
    case! { "entity kept", Purpose::EntityGc, |r| store.apply_entity_decision(r, ana, &keep_entity, &EntityDecision::Keep, t0()) }
    case! { "entity merge to a target not offered", Purpose::EntityGc, |r| store.apply_entity_decision(r, ana, &refused_entity, &merge(&merge_target, &[]), t0()) }
    case! { "entity merged", Purpose::EntityGc, |r| store.apply_entity_decision(r, ana, &merged_entity, &merge(&merge_target, &[&merge_target]), t0()) }
    case! { "entity merged again after it is archived", Purpose::EntityGc, |r| store.apply_entity_decision(r, ana, &merged_entity, &merge(&merge_target, &[&merge_target]), t0()) }
    case! { "entity deleted", Purpose::EntityGc, |r| store.apply_entity_decision(r, ana, &deleted_entity, &EntityDecision::Delete, t0()) }
    case! { "entity that does not exist", Purpose::EntityGc, |r| store.apply_entity_decision(r, ana, "no-such-entity", &EntityDecision::Delete, t0()) }
    case! { "summary written", Purpose::Summary, |r| store.apply_summary(r, ana, segment, "Ana ran a marathon.", t0()) }
    case! { "summary unchanged", Purpose::Summary, |r| store.apply_summary(r, ana, segment, "Ana ran a marathon.", t0()) }
    case! { "unusable answer", Purpose::Consolidation, |r| store.apply_without_change(r, 0, Some("the answer is not JSON"), t0()) }

    let mut n_with_note = 0;
    for (name, request, outcome) in &cases {
        let StageOutcome::Applied(applied) = outcome else {
            panic!("{name}: the first apply reported AlreadyApplied");
        };
        n_with_note += usize::from(applied.note.is_some());
        let detail = store.request_detail(*request).await.unwrap();
        assert_eq!(
            detail.status, "applied",
            "{name}: the request must end applied, note {:?}",
            applied.note
        );
    }
    // The refusals above really were refusals (each says why), not silent successes.
    assert!(
        n_with_note >= 12,
        "{n_with_note} of {} verdicts carried a note",
        cases.len()
    );
    // And a second apply of any of them writes nothing.
    let (_, request, _) = &cases[0];
    let again = store
        .apply_links(*request, ana, &[link(a, d, "causes", false)], &cap(5), t0())
        .await
        .unwrap();
    assert_eq!(again, StageOutcome::AlreadyApplied);
    assert_eq!(store.unapplied_answers(100).await.unwrap(), Vec::<RequestId>::new());
}
