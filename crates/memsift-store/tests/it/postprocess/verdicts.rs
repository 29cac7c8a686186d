//! How stage requests end: every kind of verdict, refusals included, leaves its request `applied`,
//! and a failed stage request is re-planned once per attempt.

use chrono::Duration;
use memsift_core::status::{Lane, Purpose, Role};
use memsift_core::{MemoryId, RequestId, SegmentId};
use memsift_store::{EntityDecision, NewRequest, Replacement, StageOutcome, Store};
use serde_json::json;

use super::{answered, cap, link};
use crate::helpers::{idle, message, no_progress, t0};

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
        max_output_tokens: None,
    };
    store
        .stages()
        .plan_stage_requests(std::slice::from_ref(&failed), &memsift_store::Covered::default(), t0())
        .await
        .unwrap();
    store
        .requests()
        .record_failure(
            failed.id,
            memsift_core::status::RequestStatus::Errored,
            "overloaded",
            t0(),
        )
        .await
        .unwrap();
    let first = store.requests().replan_failed_requests(3, t0()).await.unwrap();
    let second = store.requests().replan_failed_requests(3, t0()).await.unwrap();
    assert_eq!((first.n_replanned, second.n_replanned), (1, 0));
    let _ = request;
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
        .messages()
        .ingest(
            &[message("ana", "c1", 0, Role::User, "I ran a marathon."), last],
            idle(),
            t0(),
            &no_progress,
        )
        .await
        .unwrap();
    let segment =
        SegmentId::parse(&store.listing().list_segments(Some("ana"), None, None).await.unwrap()[0].id).unwrap();

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
        narrowed: None,
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
    case! { "link written", Purpose::Relationship, |r| store.stages().apply_links(r, ana, &[link(a, c, "conflicts", false)], &cap(5), t0()) }
    case! { "link to an archived memory", Purpose::Relationship, |r| store.stages().apply_links(r, ana, &[link(a, archived, "causes", false)], &cap(5), t0()) }
    case! { "supersede refused by the cap", Purpose::Relationship, |r| store.stages().apply_links(r, ana, &[link(d, e, "supersedes", true)], &cap(0), t0()) }
    case! { "no links at all", Purpose::Relationship, |r| store.stages().apply_links(r, ana, &[], &cap(5), t0()) }
    case! { "consolidation refused by the cap", Purpose::ConsolidationReview, |r| store.stages().apply_replacement(&replace(r, vec![a, b], &["Ana lives in Lisbon (Portugal)."], 1)) }
    case! { "consolidation of an archived member", Purpose::ConsolidationReview, |r| store.stages().apply_replacement(&replace(r, vec![a, archived], &["Ana lived in Faro and Lisbon."], 5)) }
    case! { "consolidation into another memory's text", Purpose::ConsolidationReview, |r| store.stages().apply_replacement(&replace(r, vec![a, b], &["Ana moved to Porto."], 5)) }
    case! { "consolidation with nothing to write", Purpose::ConsolidationReview, |r| store.stages().apply_replacement(&replace(r, vec![a, b], &[], 5)) }
    case! { "consolidation written", Purpose::ConsolidationReview, |r| store.stages().apply_replacement(&replace(r, vec![a, b], &["Ana lives in Lisbon, in Portugal."], 5)) }
    case! { "refinement rejected", Purpose::Refinement, |r| store.stages().apply_refinement_rejection(r, ana, d, "do_nothing: fine as it is", t0()) }
    case! { "narrowing of an active memory", Purpose::ExtractionReview, |r| store.stages().apply_narrowing(r, ana, e, 0.4, None, t0()) }
    case! { "narrowing of an archived memory", Purpose::ExtractionReview, |r| store.stages().apply_narrowing(r, ana, archived, 0.4, None, t0()) }
    case! { "entity kept", Purpose::EntityGc, |r| store.stages().apply_entity_decision(r, ana, &keep_entity, &EntityDecision::Keep, t0()) }
    case! { "entity merge to a target not offered", Purpose::EntityGc, |r| store.stages().apply_entity_decision(r, ana, &refused_entity, &merge(&merge_target, &[]), t0()) }
    case! { "entity merged", Purpose::EntityGc, |r| store.stages().apply_entity_decision(r, ana, &merged_entity, &merge(&merge_target, &[&merge_target]), t0()) }
    case! { "entity merged again after it is archived", Purpose::EntityGc, |r| store.stages().apply_entity_decision(r, ana, &merged_entity, &merge(&merge_target, &[&merge_target]), t0()) }
    case! { "entity deleted", Purpose::EntityGc, |r| store.stages().apply_entity_decision(r, ana, &deleted_entity, &EntityDecision::Delete, t0()) }
    case! { "entity that does not exist", Purpose::EntityGc, |r| store.stages().apply_entity_decision(r, ana, "no-such-entity", &EntityDecision::Delete, t0()) }
    case! { "summary written", Purpose::Summary, |r| store.stages().apply_summary(r, ana, segment, "Ana ran a marathon.", t0()) }
    case! { "summary unchanged", Purpose::Summary, |r| store.stages().apply_summary(r, ana, segment, "Ana ran a marathon.", t0()) }
    case! { "unusable answer", Purpose::Consolidation, |r| store.stages().apply_without_change(r, 0, Some("the answer is not JSON"), t0()) }

    let mut n_with_note = 0;
    for (name, request, outcome) in &cases {
        let StageOutcome::Applied(applied) = outcome else {
            panic!("{name}: the first apply reported AlreadyApplied");
        };
        n_with_note += usize::from(applied.note.is_some());
        let detail = store.listing().request_detail(*request).await.unwrap();
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
        .stages()
        .apply_links(*request, ana, &[link(a, d, "causes", false)], &cap(5), t0())
        .await
        .unwrap();
    assert_eq!(again, StageOutcome::AlreadyApplied);
    assert_eq!(
        store.requests().unapplied_answers(100).await.unwrap(),
        Vec::<RequestId>::new()
    );
}
