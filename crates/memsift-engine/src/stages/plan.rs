//! What each stage plans: its candidates, picked per user and capped by the run.

use std::collections::{BTreeMap, HashMap, HashSet};

use memsift_core::request::RequestSubject;
use memsift_core::status::Purpose;
use memsift_core::{MemoryId, UserId};
use memsift_payload::count_tokens;
use memsift_postprocess::MemoryText;
use memsift_postprocess::{consolidation, entity_gc, refinement, relationship, summary};
use memsift_store::{Covered, RefinementRules, RunCap};

use super::request::{Planned, UserRun, stage_request, texts_of, user_vectors};
use super::{PairTokens, StagePlan};
use crate::app::App;
use crate::budget::Pending;

/// Refinement eligibility (docs/design.md, section 9).
const REFINEMENT_RULES: RefinementRules = RefinementRules {
    min_chars: refinement::MIN_CHARS as i64,
    min_age_days: refinement::MIN_AGE_DAYS,
    min_reads: refinement::MIN_READS,
    cooldown_days: refinement::COOLDOWN_DAYS,
    max_rejections: refinement::MAX_REJECTIONS,
};

/// Purposes whose answers replace memories: a memory named by one in flight is not planned again.
const REPLACING_PURPOSES: &[Purpose] = &[
    Purpose::Consolidation,
    Purpose::ConsolidationReview,
    Purpose::Refinement,
];

/// Segments summarised per planning step.
const SUMMARY_BATCH: i64 = 500;

/// Relationship classification: for each new memory, its link hints, then up to 20 memories at
/// cosine ≥ 0.75. Each pair is judged newer against older (by when each memory was said,
/// `Store::memory_said_at`), so one request classifies all the older candidates of one memory
/// (the shared instructions are the cached system prompt); the classified memory can be an
/// older one found by a new memory said earlier. Duplicate and mirrored pairs are dropped.
pub(super) async fn plan_relationships(app: &App, unit: &UserRun<'_>, plan: &mut StagePlan) -> anyhow::Result<Planned> {
    let limit = i64::from(app.config.postprocess.max_relate_per_run);
    let new_memories = app.store.stages().memories_to_relate(unit.user_id, limit).await?;
    let mut planned = Planned::default();
    if new_memories.is_empty() {
        return Ok(planned);
    }
    let index = app.vectors.fresh_index(&app.store, unit.user_id).await?;
    let vectors = user_vectors(app, unit.user_id).await?;
    let mut pairs = Vec::new();
    // "<source> <kind> <target>" as the extractor said it, passed on with the pair in either order.
    let mut hinted: HashMap<(MemoryId, MemoryId), relationship::LinkKind> = HashMap::new();
    for memory in &new_memories {
        for hint in &memory.link_hints {
            if let Some(kind) = hint.kind.as_deref().and_then(relationship::LinkKind::parse) {
                hinted.insert((memory.id, hint.memory_id), kind);
            }
        }
        let mut candidates: Vec<MemoryId> = memory.link_hints.iter().map(|hint| hint.memory_id).collect();
        if let Some(vector) = vectors.get(&memory.id) {
            for (neighbour, score) in index.nearest(vector, relationship::MAX_CANDIDATES + 1)? {
                if score >= relationship::CANDIDATE_MIN_COSINE {
                    candidates.push(neighbour);
                }
            }
        }
        pairs.extend(candidates.into_iter().map(|candidate| (memory.id, candidate)));
    }
    let pairs = relationship::unique_pairs(pairs);
    let ends: Vec<MemoryId> = pairs.iter().flat_map(|(a, b)| [*a, *b]).collect();
    let said = app.store.stages().memory_said_at(unit.user_id, &ends).await?;
    // Which new memory each pair was found for, so it is marked related only once every request
    // carrying one of its pairs is planned.
    let mut owners: HashMap<MemoryId, Vec<MemoryId>> = HashMap::new();
    let mut by_memory: BTreeMap<MemoryId, Vec<MemoryId>> = BTreeMap::new();
    for ((found_by, _), (memory, candidate)) in
        pairs.iter().zip(relationship::newer_first(pairs.iter().copied(), |id| {
            said.get(&id).copied()
        }))
    {
        let list = by_memory.entry(memory).or_default();
        if list.len() < relationship::MAX_CANDIDATES {
            list.push(candidate);
            owners.entry(*found_by).or_default().push(memory);
        }
    }
    let mut texts_by_id: HashMap<MemoryId, String> = new_memories
        .iter()
        .map(|memory| (memory.id, memory.text.clone()))
        .collect();
    let outside: Vec<MemoryId> = by_memory
        .keys()
        .filter(|id| !texts_by_id.contains_key(id))
        .copied()
        .collect();
    texts_by_id.extend(texts_of(&app.store, unit.user_id, &outside).await?);
    let mut done: HashSet<MemoryId> = HashSet::new();
    for (memory_id, candidate_ids) in &by_memory {
        let Some(memory_text) = texts_by_id.get(memory_id) else {
            continue;
        };
        // Hints can name archived memories; only active ones are compared.
        let texts = texts_of(&app.store, unit.user_id, candidate_ids).await?;
        let candidates: Vec<MemoryText> = candidate_ids
            .iter()
            .filter_map(|id| {
                texts.get(id).map(|text| MemoryText {
                    id: *id,
                    text: text.clone(),
                })
            })
            .collect();
        let memory_text = MemoryText {
            id: *memory_id,
            text: memory_text.clone(),
        };
        if candidates.is_empty() {
            done.insert(*memory_id);
            continue;
        }
        let hints: Vec<Option<relationship::ExtractorHint>> = candidates
            .iter()
            .map(|candidate| {
                let said = |from, to, from_memory| {
                    hinted
                        .get(&(from, to))
                        .map(|&kind| relationship::ExtractorHint { kind, from_memory })
                };
                said(*memory_id, candidate.id, true).or_else(|| said(candidate.id, *memory_id, false))
            })
            .collect();
        if let Some(request) = relationship_request(app, unit, plan, &memory_text, &candidates, &hints).await? {
            planned.requests.push(request);
            done.insert(*memory_id);
        }
    }
    for memory in &new_memories {
        let sources = owners.get(&memory.id).map(Vec::as_slice).unwrap_or_default();
        if sources.iter().all(|source| done.contains(source)) {
            planned.related.push(memory.id);
        }
    }
    Ok(planned)
}

/// One relationship request: `memory` against its older `candidates`, counted against the
/// reference's one request per pair.
async fn relationship_request(
    app: &App,
    unit: &UserRun<'_>,
    plan: &mut StagePlan,
    memory_text: &MemoryText,
    candidates: &[MemoryText],
    hints: &[Option<relationship::ExtractorHint>],
) -> anyhow::Result<Option<memsift_store::NewRequest>> {
    let prompt = app.prompts.get(Purpose::Relationship.as_str())?;
    let request = relationship::relationship_request_with_hints(prompt, memory_text, candidates, hints);
    let tokens = plan.pair_tokens.get_or_insert_with(PairTokens::default);
    tokens.n_pairs += candidates.len() as u64;
    tokens.n_requests += 1;
    tokens.ours_uncached += count_tokens(&request.user_message) as u64;
    tokens.ours_cacheable += count_tokens(&request.system) as u64;
    for candidate in candidates {
        let pair = relationship::relationship_pair_request(prompt, memory_text, candidate);
        tokens.reference_uncached += (count_tokens(&pair.system) + count_tokens(&pair.user_message)) as u64;
    }
    plan.planned.push(format!(
        "{}: classify {} against {} candidate(s)",
        unit.external,
        memory_text.id,
        candidates.len()
    ));
    let subject = RequestSubject {
        memory_id: Some(memory_text.id),
        candidates: candidates.iter().map(|c| c.id).collect(),
        ..unit.cap.subject()
    };
    stage_request(app, Purpose::Relationship, unit.user_id, request, subject, unit.pending).await
}

/// The clusters one consolidation run may propose, and how many are left for a later run: the
/// run's cap (`share_cap` of the user's active memories, at least one) counts clusters, not
/// memories. Counted in memories, a cap of one never let the smallest cluster (two) through, so
/// a user with 20 or fewer memories was never consolidated.
pub(super) fn within_cluster_cap<T>(clusters: Vec<T>, cap: i64) -> (Vec<T>, usize) {
    let room = usize::try_from(cap).unwrap_or(0);
    let n_left = clusters.len().saturating_sub(room);
    (clusters.into_iter().take(room).collect(), n_left)
}

/// Consolidation: hubs first, non-overlapping clusters of 2–5 at cosine ≥ 0.88, as many
/// clusters as the run's cap (in clusters) allows; each archives all of its members.
pub(super) async fn plan_consolidation(app: &App, unit: &UserRun<'_>, plan: &mut StagePlan) -> anyhow::Result<Planned> {
    let mut planned = Planned::default();
    let hubs = app.store.stages().memory_hubs(unit.user_id).await?;
    if hubs.len() < consolidation::CLUSTER_MIN {
        return Ok(planned);
    }
    let busy = app
        .store
        .stages()
        .memories_in_flight(unit.user_id, REPLACING_PURPOSES)
        .await?;
    // Memories classified as contradicting or replacing each other say different things, however
    // close their wording: they are never one cluster.
    let apart: HashSet<(MemoryId, MemoryId)> = app
        .store
        .stages()
        .linked_pairs(unit.user_id, &["conflicts", "supersedes", "invalidated_by"])
        .await?
        .into_iter()
        .flat_map(|(a, b)| [(a, b), (b, a)])
        .collect();
    let index = app.vectors.fresh_index(&app.store, unit.user_id).await?;
    let vectors = user_vectors(app, unit.user_id).await?;
    let mut neighbours: HashMap<MemoryId, Vec<(MemoryId, f32)>> = HashMap::new();
    let seeds: Vec<MemoryId> = hubs.into_iter().filter(|id| !busy.contains(id)).collect();
    for id in &seeds {
        let Some(vector) = vectors.get(id) else { continue };
        let near: Vec<(MemoryId, f32)> = index
            .nearest(vector, consolidation::CLUSTER_MAX * 2)?
            .into_iter()
            .filter(|(other, _)| other != id && !busy.contains(other))
            .filter(|(other, _)| !apart.contains(&(*id, *other)))
            .filter(|(_, score)| *score >= consolidation::CLUSTER_MIN_COSINE)
            .collect();
        neighbours.insert(*id, near);
    }
    // A set the judge or its review kept as it was has the same answer until a member changes
    // (a changed memory has a new id); asking again would spend a request and a place under the cap.
    let kept = app.store.stages().kept_clusters(unit.user_id).await?;
    let mut chosen = Vec::new();
    for cluster in consolidation::pick_clusters(&seeds, &neighbours) {
        let mut members = cluster.clone();
        members.sort();
        if kept.contains(&members) {
            plan.n_kept += 1;
            continue;
        }
        let texts = texts_of(&app.store, unit.user_id, &cluster).await?;
        let members: Vec<MemoryText> = cluster
            .iter()
            .filter_map(|id| {
                texts.get(id).map(|text| MemoryText {
                    id: *id,
                    text: text.clone(),
                })
            })
            .collect();
        if members.len() == cluster.len() {
            chosen.push((cluster, members));
        }
    }
    let (chosen, n_left) = within_cluster_cap(chosen, unit.cap.cap);
    plan.n_left_by_cap += n_left as u64;
    // The store counts a run's changes in memories: the run may change exactly the members of the
    // clusters it planned.
    let cap = RunCap {
        run: unit.cap.run.clone(),
        cap: chosen.iter().map(|(cluster, _)| cluster.len() as i64).sum(),
    };
    for (cluster, members) in chosen {
        let prompt = app.prompts.get(Purpose::Consolidation.as_str())?;
        let request = consolidation::consolidation_request(prompt, &members);
        plan.planned.push(format!(
            "{}: propose merging {}",
            unit.external,
            members
                .iter()
                .map(|m| format!("\"{}\"", m.text))
                .collect::<Vec<_>>()
                .join(" + ")
        ));
        let subject = RequestSubject {
            members: cluster.clone(),
            ..cap.subject()
        };
        if let Some(request) = stage_request(
            app,
            Purpose::Consolidation,
            unit.user_id,
            request,
            subject,
            unit.pending,
        )
        .await?
        {
            planned.requests.push(request);
        }
    }
    Ok(planned)
}

/// Refinement: long, old, much-read memories not refined lately, at most the run's cap.
pub(super) async fn plan_refinement(app: &App, unit: &UserRun<'_>, plan: &mut StagePlan) -> anyhow::Result<Planned> {
    let mut planned = Planned::default();
    let busy = app
        .store
        .stages()
        .memories_in_flight(unit.user_id, REPLACING_PURPOSES)
        .await?;
    let candidates = app
        .store
        .stages()
        .refinement_candidates(unit.user_id, app.clock.now(), &REFINEMENT_RULES)
        .await?;
    let candidates: Vec<_> = candidates.into_iter().filter(|m| !busy.contains(&m.id)).collect();
    let room = unit.cap.cap.max(0) as usize;
    plan.n_left_by_cap += candidates.len().saturating_sub(room) as u64;
    for memory in candidates.into_iter().take(room) {
        let prompt = app.prompts.get(Purpose::Refinement.as_str())?;
        let memory_text = MemoryText {
            id: memory.id,
            text: memory.text.clone(),
        };
        let request = refinement::refinement_request(prompt, &memory_text);
        plan.planned
            .push(format!("{}: refine \"{}\"", unit.external, memory.text));
        let subject = RequestSubject {
            memory_id: Some(memory.id),
            ..unit.cap.subject()
        };
        if let Some(request) =
            stage_request(app, Purpose::Refinement, unit.user_id, request, subject, unit.pending).await?
        {
            planned.requests.push(request);
        }
    }
    Ok(planned)
}

/// Entity GC: entities dormant 45 days with 1–5 links, each shown with its candidates' ids
/// (same kind, similar name).
pub(super) async fn plan_entity_gc(app: &App, unit: &UserRun<'_>, plan: &mut StagePlan) -> anyhow::Result<Planned> {
    let mut planned = Planned::default();
    let dormant = app
        .store
        .stages()
        .dormant_entities(
            unit.user_id,
            app.clock.now(),
            entity_gc::DORMANT_DAYS,
            entity_gc::MIN_LINKS,
            entity_gc::MAX_LINKS,
        )
        .await?;
    let all: Vec<entity_gc::EntityRef> = app
        .store
        .stages()
        .user_entities(unit.user_id)
        .await?
        .into_iter()
        .map(|row| entity_gc::EntityRef {
            id: row.id,
            name: row.name,
            kind: row.kind,
        })
        .collect();
    let limit = app.config.postprocess.max_entity_reviews_per_run as usize;
    for entity in dormant.into_iter().take(limit) {
        let entity = entity_gc::EntityRef {
            id: entity.id,
            name: entity.name,
            kind: entity.kind,
        };
        let candidates = entity_gc::name_candidates(&entity, &all);
        let texts = app.store.stages().entity_memory_texts(&entity.id, 5).await?;
        let prompt = app.prompts.get(Purpose::EntityGc.as_str())?;
        let request = entity_gc::entity_gc_request(prompt, &entity, &candidates, &texts);
        plan.planned.push(format!(
            "{}: review entity \"{}\" ({}) against {} candidate(s)",
            unit.external,
            entity.name,
            entity.kind,
            candidates.len()
        ));
        let subject = RequestSubject {
            entity_id: Some(entity.id.clone()),
            entity_candidates: candidates.iter().map(|c| c.id.clone()).collect(),
            ..unit.cap.subject()
        };
        if let Some(request) =
            stage_request(app, Purpose::EntityGc, unit.user_id, request, subject, unit.pending).await?
        {
            planned.requests.push(request);
        }
    }
    Ok(planned)
}

/// Segment summaries: one request per extracted segment without a live summary.
pub(super) async fn plan_summaries(
    app: &App,
    users: &HashSet<UserId>,
    dry_run: bool,
    plan: &mut StagePlan,
) -> anyhow::Result<()> {
    let mut requests = Vec::new();
    let pending = Pending::default();
    for (segment_id, user_id) in app.store.stages().segments_to_summarize(SUMMARY_BATCH).await? {
        if !users.contains(&user_id) {
            continue;
        }
        let turns: Vec<_> = app
            .store
            .segments()
            .segment_turns(segment_id)
            .await?
            .into_iter()
            .map(|turn| turn.turn)
            .collect();
        if turns.is_empty() {
            continue;
        }
        let prompt = app.prompts.get(Purpose::Summary.as_str())?;
        let request = summary::summary_request(prompt, &turns);
        plan.planned
            .push(format!("summarise segment {segment_id} ({} turns)", turns.len()));
        let subject = RequestSubject {
            segment_id: Some(segment_id),
            ..RequestSubject::default()
        };
        if let Some(request) = stage_request(app, Purpose::Summary, user_id, request, subject, &pending).await? {
            requests.push(request);
        }
    }
    plan.n_requests += requests.len() as u64;
    if !dry_run {
        app.store
            .stages()
            .plan_stage_requests(&requests, &Covered::default(), app.clock.now())
            .await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::within_cluster_cap;

    proptest! {
        /// Any user with a duplicate pair gets one cluster per run, whatever their number of
        /// memories and the configured share; no run proposes more clusters than its cap.
        #[test]
        fn a_user_with_a_duplicate_pair_gets_a_cluster_every_run(
            active in 2usize..2_000,
            share in 0.001f64..0.5,
            n_clusters in 1usize..40,
        ) {
            let cap = memsift_store::share_cap(share, active) as i64;
            let clusters: Vec<Vec<usize>> = (0..n_clusters).map(|n| vec![2 * n, 2 * n + 1]).collect();
            let (chosen, n_left) = within_cluster_cap(clusters, cap);
            prop_assert!(!chosen.is_empty(), "active {active}, share {share}: cap {cap}");
            prop_assert!(chosen.len() as i64 <= cap);
            prop_assert_eq!(chosen.len() + n_left, n_clusters);
        }
    }
}
