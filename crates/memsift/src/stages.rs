//! The post-processing stages on the pipeline: plan each stage's requests (relationships,
//! consolidation, refinement, entity GC, segment summaries) through the same router, lanes and
//! batch coordinator as extraction, and apply their answers through the store's journaled writes.
//!
//! Planning picks candidates and routes one request per unit of work; nothing changes until an
//! answer is applied. A consolidation is two requests: the proposal, then (planned by the next
//! step from the applied proposal, so a crash in between loses nothing) an independent review;
//! only an approved review changes memories. `--dry-run` plans nothing and prints what would be.

use std::collections::{BTreeMap, HashMap, HashSet};

use anyhow::Context;
use memsift_core::config::{OverBudget, ProviderKind};
use memsift_core::request::{RequestBody, RequestContext, RequestSubject};
use memsift_core::status::Lane;
use memsift_core::status::Purpose;
use memsift_core::{MemoryId, RequestId, UserId};
use memsift_llm::ResolvedLlm;
use memsift_payload::count_tokens;
use memsift_postprocess::{MemoryText, StageRequest};
use memsift_postprocess::{consolidation, entity_gc, offline, refinement, relationship, reviewer, summary};
use memsift_routing::Route;
use memsift_store::{
    Covered, EntityDecision, NewLink, NewRequest, RefinementRules, Replacement, RunCap, StageOutcome, Store,
    StoredOutput,
};
use serde::Serialize;

use crate::app::App;
use crate::apply::context::{Applied, ApplyContext};
use crate::budget::{OVER_BUDGET_KEY, Pending, estimate_usd, within_budget};

/// A post-processing stage, as the CLI and the daemon name it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Stage {
    /// Links between new memories and similar ones.
    Relationships,
    /// Merging clusters of near-duplicates (proposal, then review).
    Consolidation,
    /// Trimming or splitting long, much-read memories.
    Refinement,
    /// Merging or deleting dormant entities.
    EntityGc,
    /// One live summary per extracted segment.
    Summaries,
}

impl Stage {
    /// Every stage, in the order `memsift postprocess all` runs them.
    pub const ALL: [Stage; 5] = [
        Stage::Relationships,
        Stage::Consolidation,
        Stage::Refinement,
        Stage::EntityGc,
        Stage::Summaries,
    ];

    /// The stage's name.
    pub fn as_str(self) -> &'static str {
        match self {
            Stage::Relationships => "relationships",
            Stage::Consolidation => "consolidation",
            Stage::Refinement => "refinement",
            Stage::EntityGc => "entity_gc",
            Stage::Summaries => "summaries",
        }
    }

    /// The purpose of the requests it plans first.
    pub fn purpose(self) -> Purpose {
        match self {
            Stage::Relationships => Purpose::Relationship,
            Stage::Consolidation => Purpose::Consolidation,
            Stage::Refinement => Purpose::Refinement,
            Stage::EntityGc => Purpose::EntityGc,
            Stage::Summaries => Purpose::Summary,
        }
    }
}

/// What planning one stage did (or, on a dry run, would do).
#[derive(Clone, Debug, Default, Serialize)]
pub struct StagePlan {
    /// The stage.
    pub stage: String,
    /// Users looked at.
    pub n_users: u64,
    /// Requests planned (on a dry run: that would be).
    pub n_requests: u64,
    /// Work left for a later run because the per-user cap was reached.
    pub n_left_by_cap: u64,
    /// One line per planned request: whose, and what it asks.
    pub planned: Vec<String>,
    /// Nothing was written.
    pub dry_run: bool,
    /// Relationships only: input tokens of the planned requests against the reference's way.
    pub pair_tokens: Option<PairTokens>,
}

/// Input tokens (tiktoken `o200k_base`) of relationship classification: our requests (one per
/// memory, all its candidates, the shared instructions sent as a cacheable system prompt) against
/// one uncached request per pair, the reference's way.
#[derive(Clone, Debug, Default, Serialize)]
pub struct PairTokens {
    /// Candidate pairs classified.
    pub n_pairs: u64,
    /// Requests we send.
    pub n_requests: u64,
    /// Our tokens that are not the shared system prompt (each request's own message).
    pub ours_uncached: u64,
    /// Our system-prompt tokens: the instructions every request repeats.
    pub ours_cacheable: u64,
    /// One request per pair with the instructions inline and nothing cached.
    pub reference_uncached: u64,
}

impl PairTokens {
    /// Our input tokens per pair with the instructions counted in full on every request. That is
    /// what is billed: the instructions (about 330 tokens) are shorter than every model's minimum
    /// cacheable length (1,024 to 4,096), so no provider serves them from its cache. An earlier
    /// figure counted them at the cache-read price and understated the cost about three times.
    pub fn ours_per_pair(&self) -> f64 {
        (self.ours_uncached + self.ours_cacheable) as f64 / self.n_pairs.max(1) as f64
    }

    /// The reference's input tokens per pair.
    pub fn reference_per_pair(&self) -> f64 {
        self.reference_uncached as f64 / self.n_pairs.max(1) as f64
    }
}

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

/// The cap of one extraction review: each review is a run of its own that may change the one
/// memory it reviews. A review is not a share of the user's memories (it is planned per memory
/// extraction wrote), and a share of a user's first few memories would round to nothing.
pub const REVIEW_CAP: i64 = 1;

/// Plans one stage for every user with memories, or for `user` only.
pub async fn plan_stage(app: &App, stage: Stage, user: Option<&str>, dry_run: bool) -> anyhow::Result<StagePlan> {
    let mut plan = StagePlan {
        stage: stage.as_str().to_owned(),
        dry_run,
        ..StagePlan::default()
    };
    let users: Vec<(UserId, String)> = match user {
        Some(external) => match app.store.user_id(external).await? {
            Some(id) => vec![(id, external.to_owned())],
            None => anyhow::bail!("no user `{external}`; `memsift users` lists them"),
        },
        None => app.store.users_with_memories().await?,
    };
    if stage == Stage::Summaries {
        let wanted: HashSet<UserId> = users.iter().map(|(id, _)| *id).collect();
        plan.n_users = wanted.len() as u64;
        plan_summaries(app, &wanted, dry_run, &mut plan).await?;
        return Ok(plan);
    }
    let pending = Pending::default();
    for (user_id, external) in users {
        plan.n_users += 1;
        let active = usize::try_from(app.store.active_memory_count(user_id).await?).unwrap_or(0);
        let cap = RunCap {
            run: new_run_id(),
            cap: memsift_store::share_cap(app.config.postprocess.max_share_per_run, active) as i64,
        };
        let unit = UserRun {
            user_id,
            external: &external,
            cap: &cap,
            pending: &pending,
        };
        let requests = match stage {
            Stage::Relationships => plan_relationships(app, &unit, &mut plan).await?,
            Stage::Consolidation => plan_consolidation(app, &unit, &mut plan).await?,
            Stage::Refinement => plan_refinement(app, &unit, &mut plan).await?,
            Stage::EntityGc => plan_entity_gc(app, &unit, &mut plan).await?,
            Stage::Summaries => unreachable!("summaries are planned per segment above"),
        };
        plan.n_requests += requests.requests.len() as u64;
        if !dry_run {
            app.store
                .plan_stage_requests(
                    &requests.requests,
                    &Covered {
                        related: &requests.related,
                        ..Covered::default()
                    },
                    app.clock.now(),
                )
                .await?;
        }
    }
    Ok(plan)
}

/// One user's share of a stage run.
struct UserRun<'a> {
    user_id: UserId,
    external: &'a str,
    cap: &'a RunCap,
    /// Budget reservations of this run's requests, written only once the user is planned.
    pending: &'a Pending,
}

/// Requests to record, and memories relationship classification covered.
#[derive(Default)]
struct Planned {
    requests: Vec<NewRequest>,
    related: Vec<MemoryId>,
}

fn new_run_id() -> String {
    RequestId::new_v7().to_string()
}

/// Routes a stage request for `user_id` and wraps it as a request row; `None` when the user is
/// over their tier's daily budget and `[billing] over_budget = "defer"` (the next run plans it).
/// Over budget with `"heuristic"`, it goes to the offline judge, like extraction.
async fn stage_request(
    app: &App,
    purpose: Purpose,
    user_id: UserId,
    request: StageRequest,
    subject: RequestSubject,
    pending: &Pending,
) -> anyhow::Result<Option<NewRequest>> {
    let extra = Extra::default();
    stage_request_with(app, purpose, user_id, request, subject, extra, pending).await
}

/// What a request planned from another request's answer also carries.
#[derive(Default)]
struct Extra {
    /// The context snapshot its apply needs.
    context: RequestContext,
    /// The request whose answer planned it.
    parent_request_id: Option<RequestId>,
}

/// [`stage_request`] with a context snapshot and the request whose answer planned this one. The
/// request reserves its estimated cost like extraction's (`budget::within_budget`), counting the
/// reservations in `pending` that this planning pass has not written yet.
async fn stage_request_with(
    app: &App,
    purpose: Purpose,
    user_id: UserId,
    request: StageRequest,
    subject: RequestSubject,
    extra: Extra,
    pending: &Pending,
) -> anyhow::Result<Option<NewRequest>> {
    let tier = app
        .billing
        .tier_of(app.store.user_billing_tier(user_id).await?.as_deref());
    let mut route = app.router.route(purpose, &tier, false, app.clock.now())?;
    let input_tokens = (count_tokens(&request.system) + count_tokens(&request.user_message)) as u64;
    let mut reserved_usd = estimate_usd(&app.config, &route.llm, route.lane, input_tokens);
    if let Some(over) = within_budget(app, user_id, &tier, route.lane, reserved_usd, pending).await? {
        match app.config.billing.over_budget {
            OverBudget::Heuristic => {
                tracing::info!(%user_id, %tier, %purpose, "{over}; planning on the heuristic lane.");
                route = Route {
                    lane: Lane::Heuristic,
                    config_key: OVER_BUDGET_KEY.to_owned(),
                    llm: ResolvedLlm::offline(OVER_BUDGET_KEY),
                };
                reserved_usd = 0.0;
            }
            OverBudget::Defer => {
                tracing::info!(%user_id, %tier, %purpose, "{over}; not planned until the budget allows.");
                return Ok(None);
            }
        }
    }
    let prompt = app.prompts.get(purpose.as_str())?;
    let prompt_version = match route.llm.provider {
        ProviderKind::Heuristic => offline::OFFLINE_VERSION.to_owned(),
        _ => prompt.version.clone(),
    };
    Ok(Some(NewRequest {
        id: RequestId::new_v7(),
        purpose,
        user_id,
        segment_id: subject.segment_id,
        chunk_index: 0,
        lane: route.lane,
        config_key: route.config_key.clone(),
        provider: route.llm.provider.as_str().to_owned(),
        model: Some(route.llm.model.clone()).filter(|model| !model.is_empty()),
        prompt_version,
        context: extra.context,
        request_body: RequestBody {
            system: request.system,
            user_message: request.user_message,
        },
        subject,
        parent_request_id: extra.parent_request_id,
        reserved_usd,
    }))
}

/// Unit vectors of a user's active memories (every one embedded first).
async fn user_vectors(app: &App, user_id: UserId) -> anyhow::Result<HashMap<MemoryId, Vec<f32>>> {
    let index = app.vectors.fresh_index(&app.store, user_id).await?;
    let model = index.model_id().to_owned();
    let vectors = app.store.user_memory_vectors(user_id).await?;
    Ok(vectors
        .rows
        .into_iter()
        .filter(|row| row.model_id.as_deref() == Some(model.as_str()))
        .filter_map(|row| {
            let mut vector = row.vector?;
            let norm = vector.iter().map(|x| x * x).sum::<f32>().sqrt();
            if norm > 0.0 {
                vector.iter_mut().for_each(|x| *x /= norm);
            }
            Some((row.memory_id, vector))
        })
        .collect())
}

/// The texts of those of `ids` that are `user_id`'s active memories.
async fn texts_of(store: &Store, user_id: UserId, ids: &[MemoryId]) -> anyhow::Result<HashMap<MemoryId, String>> {
    Ok(store.active_memory_texts(user_id, ids).await?.into_iter().collect())
}

/// Relationship classification: for each new memory, its link hints, then up to 20 memories at
/// cosine ≥ 0.75; one request classifies all of one memory's candidates (the shared instructions
/// are the cached system prompt). Duplicate and mirrored pairs are dropped across the run.
async fn plan_relationships(app: &App, unit: &UserRun<'_>, plan: &mut StagePlan) -> anyhow::Result<Planned> {
    let limit = i64::from(app.config.postprocess.max_relate_per_run);
    let new_memories = app.store.memories_to_relate(unit.user_id, limit).await?;
    let mut planned = Planned::default();
    if new_memories.is_empty() {
        return Ok(planned);
    }
    let index = app.vectors.fresh_index(&app.store, unit.user_id).await?;
    let vectors = user_vectors(app, unit.user_id).await?;
    let mut pairs = Vec::new();
    for memory in &new_memories {
        let mut candidates: Vec<MemoryId> = memory.link_hints.clone();
        if let Some(vector) = vectors.get(&memory.id) {
            for neighbour in index.search(vector, relationship::MAX_CANDIDATES + 1)? {
                if neighbour.score >= relationship::CANDIDATE_MIN_COSINE {
                    candidates.push(neighbour.memory_id);
                }
            }
        }
        pairs.extend(candidates.into_iter().map(|candidate| (memory.id, candidate)));
    }
    let mut by_memory: BTreeMap<MemoryId, Vec<MemoryId>> = BTreeMap::new();
    for (memory, candidate) in relationship::unique_pairs(pairs) {
        let list = by_memory.entry(memory).or_default();
        if list.len() < relationship::MAX_CANDIDATES {
            list.push(candidate);
        }
    }
    for memory in &new_memories {
        let Some(candidate_ids) = by_memory.get(&memory.id) else {
            planned.related.push(memory.id);
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
        if candidates.is_empty() {
            planned.related.push(memory.id);
            continue;
        }
        let prompt = app.prompts.get(Purpose::Relationship.as_str())?;
        let memory_text = MemoryText {
            id: memory.id,
            text: memory.text.clone(),
        };
        let request = relationship::relationship_request(prompt, &memory_text, &candidates);
        let tokens = plan.pair_tokens.get_or_insert_with(PairTokens::default);
        tokens.n_pairs += candidates.len() as u64;
        tokens.n_requests += 1;
        tokens.ours_uncached += count_tokens(&request.user_message) as u64;
        tokens.ours_cacheable += count_tokens(&request.system) as u64;
        for candidate in &candidates {
            let pair = relationship::relationship_pair_request(prompt, &memory_text, candidate);
            tokens.reference_uncached += (count_tokens(&pair.system) + count_tokens(&pair.user_message)) as u64;
        }
        plan.planned.push(format!(
            "{}: classify {} against {} candidate(s)",
            unit.external,
            memory.id,
            candidates.len()
        ));
        let subject = RequestSubject {
            memory_id: Some(memory.id),
            candidates: candidates.iter().map(|c| c.id).collect(),
            ..unit.cap.subject()
        };
        if let Some(request) =
            stage_request(app, Purpose::Relationship, unit.user_id, request, subject, unit.pending).await?
        {
            planned.requests.push(request);
            planned.related.push(memory.id);
        }
    }
    Ok(planned)
}

/// Consolidation: hubs first, non-overlapping clusters of 2–5 at cosine ≥ 0.88, as many as fit
/// in the run's cap (a cluster archives all of its members).
async fn plan_consolidation(app: &App, unit: &UserRun<'_>, plan: &mut StagePlan) -> anyhow::Result<Planned> {
    let mut planned = Planned::default();
    let hubs = app.store.memory_hubs(unit.user_id).await?;
    if hubs.len() < consolidation::CLUSTER_MIN {
        return Ok(planned);
    }
    let busy = app.store.memories_in_flight(unit.user_id, REPLACING_PURPOSES).await?;
    // Memories classified as contradicting or replacing each other say different things, however
    // close their wording: they are never one cluster.
    let apart: HashSet<(MemoryId, MemoryId)> = app
        .store
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
            .search(vector, consolidation::CLUSTER_MAX * 2)?
            .into_iter()
            .filter(|n| n.memory_id != *id && !busy.contains(&n.memory_id))
            .filter(|n| !apart.contains(&(*id, n.memory_id)))
            .filter(|n| n.score >= consolidation::CLUSTER_MIN_COSINE)
            .map(|n| (n.memory_id, n.score))
            .collect();
        neighbours.insert(*id, near);
    }
    let mut budget = unit.cap.cap;
    for cluster in consolidation::pick_clusters(&seeds, &neighbours) {
        if cluster.len() as i64 > budget {
            plan.n_left_by_cap += 1;
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
        if members.len() != cluster.len() {
            continue;
        }
        budget -= cluster.len() as i64;
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
            ..unit.cap.subject()
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
async fn plan_refinement(app: &App, unit: &UserRun<'_>, plan: &mut StagePlan) -> anyhow::Result<Planned> {
    let mut planned = Planned::default();
    let busy = app.store.memories_in_flight(unit.user_id, REPLACING_PURPOSES).await?;
    let candidates = app
        .store
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
async fn plan_entity_gc(app: &App, unit: &UserRun<'_>, plan: &mut StagePlan) -> anyhow::Result<Planned> {
    let mut planned = Planned::default();
    let dormant = app
        .store
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
        let texts = app.store.entity_memory_texts(&entity.id, 5).await?;
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
async fn plan_summaries(app: &App, users: &HashSet<UserId>, dry_run: bool, plan: &mut StagePlan) -> anyhow::Result<()> {
    let mut requests = Vec::new();
    let pending = Pending::default();
    for (segment_id, user_id) in app.store.segments_to_summarize(SUMMARY_BATCH).await? {
        if !users.contains(&user_id) {
            continue;
        }
        let turns: Vec<_> = app
            .store
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
            .plan_stage_requests(&requests, &Covered::default(), app.clock.now())
            .await?;
    }
    Ok(())
}

/// Plans the independent review of every applied consolidation proposal that has none yet;
/// returns how many. Runs on every pipeline step, so a crash between proposal and review only
/// delays the review.
pub async fn plan_reviews(app: &App) -> anyhow::Result<u64> {
    let proposals = app.store.proposals_to_review(64).await?;
    let mut requests = Vec::new();
    let pending = Pending::default();
    for proposal in proposals {
        let Ok(Some(proposed)) = consolidation::parse_consolidation_answer(&proposal.raw_output) else {
            continue;
        };
        let members = proposal.subject.members.clone();
        let texts = texts_of(&app.store, proposal.user_id, &members).await?;
        let cluster: Vec<MemoryText> = members
            .iter()
            .map(|id| MemoryText {
                id: *id,
                text: texts.get(id).cloned().unwrap_or_default(),
            })
            .collect();
        let prompt = app.prompts.get(Purpose::ConsolidationReview.as_str())?;
        let request = consolidation::review_request(prompt, &cluster, &proposed.text);
        let subject = RequestSubject {
            proposal_request_id: Some(proposal.request_id),
            ..proposal.subject.clone()
        };
        let context = RequestContext {
            proposal: Some(proposed.text.clone()),
            proposal_reasoning: Some(proposed.reasoning.clone()),
            ..RequestContext::default()
        };
        let extra = Extra {
            context,
            parent_request_id: Some(proposal.request_id),
        };
        if let Some(request) = stage_request_with(
            app,
            Purpose::ConsolidationReview,
            proposal.user_id,
            request,
            subject,
            extra,
            &pending,
        )
        .await?
        {
            requests.push(request);
        }
    }
    let n = requests.len() as u64;
    if n > 0 {
        app.store
            .plan_stage_requests(&requests, &Covered::default(), app.clock.now())
            .await?;
    }
    Ok(n)
}

/// With `[postprocess] extraction_reviewer` on, plans one review of every memory extraction
/// wrote that has none yet; returns how many. Runs on every pipeline step, like the
/// consolidation reviews. The reviewer may only narrow a memory (`memsift_postprocess::reviewer`).
pub async fn plan_extraction_reviews(app: &App) -> anyhow::Result<u64> {
    if !(app.config.postprocess.enabled && app.config.postprocess.extraction_reviewer) {
        return Ok(0);
    }
    let memories = app.store.memories_to_review(256).await?;
    let mut requests = Vec::new();
    let pending = Pending::default();
    let mut reviewed = Vec::new();
    for memory in memories {
        let (Ok(memory_id), Ok(user_id)) = (MemoryId::parse(&memory.id), UserId::parse(&memory.user_id)) else {
            continue;
        };
        let item = extracted_item(&memory);
        let prompt = app.prompts.get(Purpose::ExtractionReview.as_str())?;
        let request = reviewer::extraction_review_request(prompt, &item);
        // Each review is a run of its own, capped at the one memory it may narrow.
        let run = RunCap {
            run: new_run_id(),
            cap: REVIEW_CAP,
        };
        let subject = RequestSubject {
            memory_id: Some(memory_id),
            ..run.subject()
        };
        if let Some(request) =
            stage_request(app, Purpose::ExtractionReview, user_id, request, subject, &pending).await?
        {
            requests.push(request);
            reviewed.push(memory_id);
        }
    }
    let n = requests.len() as u64;
    if !reviewed.is_empty() {
        let covered = Covered {
            reviewed: &reviewed,
            ..Covered::default()
        };
        app.store
            .plan_stage_requests(&requests, &covered, app.clock.now())
            .await?;
    }
    Ok(n)
}

/// A stored memory in the output contract's shape, as the reviewer is shown it.
fn extracted_item(memory: &memsift_store::ReviewMemory) -> memsift_core::contract::ExtractedItem {
    let mut item = memsift_core::contract::ExtractedItem::new(
        memory.text.clone(),
        memsift_core::status::Temporal::normalize(&memory.temporal),
        Vec::new(),
    );
    item.confidence = memory.confidence;
    item.happens_at = memory.happens_at.map(|at| at.to_rfc3339());
    item.expires_at = memory.expires_at.map(|at| at.to_rfc3339());
    item
}

/// The run and cap a stage request was planned under. Extraction reviews planned before each
/// carried a run of its own stored none: such a review is a run named by its request, with
/// [`REVIEW_CAP`]; any other request without a cap may change nothing.
fn run_cap(stored: &StoredOutput) -> RunCap {
    let subject = &stored.subject;
    let default_cap = match stored.purpose {
        Purpose::ExtractionReview => REVIEW_CAP,
        _ => 0,
    };
    RunCap {
        run: subject.run.clone().unwrap_or_else(|| stored.request_id.to_string()),
        cap: subject.cap.unwrap_or(default_cap),
    }
}

/// Applies a post-processing answer: parse it (tolerantly), validate it against the request's
/// subject, and write through the store's journaled, capped operations. An answer that cannot be
/// used is applied with a note saying why, so it is never retried forever.
pub async fn apply_stage_answer(ctx: &ApplyContext, stored: StoredOutput) -> anyhow::Result<Applied> {
    let request_id = stored.request_id;
    let now = ctx.clock.now();
    let raw = stored
        .raw_output
        .as_deref()
        .with_context(|| format!("request {request_id} has no output yet"))?;
    let subject = &stored.subject;
    let store = &ctx.store;
    // An answer that cannot be used is applied with a note saying why, so it is never retried.
    let no_change = |note: String| async move { store.apply_without_change(request_id, 0, Some(&note), now).await };
    let outcome = match stored.purpose {
        Purpose::Relationship => {
            let memory = subject.memory_id;
            let candidates = &subject.candidates;
            match (memory, relationship::parse_relationship_answer(raw, candidates.len())) {
                (Some(memory), Ok(verdicts)) => {
                    let links: Vec<NewLink> = verdicts
                        .iter()
                        .map(|verdict| NewLink {
                            source: memory,
                            target: candidates[verdict.candidate],
                            kind: verdict.kind.as_str().to_owned(),
                            confidence: verdict.confidence,
                            reasoning: verdict.reasoning.clone(),
                            supersedes_older: verdict.kind.marks_older_superseded(),
                        })
                        .collect();
                    store
                        .apply_links(request_id, stored.user_id, &links, &run_cap(&stored), now)
                        .await?
                }
                (None, _) => no_change("the request names no memory".to_owned()).await?,
                (_, Err(error)) => no_change(error.to_string()).await?,
            }
        }
        Purpose::Consolidation => match consolidation::parse_consolidation_answer(raw) {
            Ok(Some(_)) => store.apply_without_change(request_id, 1, None, now).await?,
            Ok(None) => no_change("keep".to_owned()).await?,
            Err(error) => no_change(error.to_string()).await?,
        },
        Purpose::ConsolidationReview => {
            let proposal = stored.context.proposal.as_deref().unwrap_or_default();
            match consolidation::parse_review_answer(raw) {
                Ok(review) if review.approved && !proposal.is_empty() => {
                    let embeddings = embed_texts(ctx, &[proposal.to_owned()]).await?;
                    let replacement = Replacement {
                        request_id,
                        user_id: stored.user_id,
                        originals: subject.members.clone(),
                        new_texts: vec![proposal.to_owned()],
                        embeddings,
                        kind: "consolidate",
                        reason: review.reasoning.clone(),
                        cap: run_cap(&stored),
                        now,
                    };
                    store.apply_replacement(&replacement).await?
                }
                Ok(review) => {
                    let note = format!("review rejected the proposal: {}", review.reasoning);
                    no_change(note).await?
                }
                Err(error) => no_change(error.to_string()).await?,
            }
        }
        Purpose::Refinement => {
            let Some(memory) = subject.memory_id else {
                let outcome = no_change("the request names no memory".to_owned()).await?;
                return Ok(applied_of(&outcome));
            };
            let original = texts_of(store, stored.user_id, &[memory]).await?.remove(&memory);
            match original {
                None => no_change("the memory is no longer active".to_owned()).await?,
                Some(original) => match refinement::parse_refinement_answer(raw, &original) {
                    Ok(refinement::Refinement::Trim(text)) => {
                        replace(ctx, &stored, vec![memory], vec![text], "refine", "trimmed").await?
                    }
                    Ok(refinement::Refinement::Split(parts)) => {
                        replace(ctx, &stored, vec![memory], parts, "refine", "split").await?
                    }
                    Ok(refinement::Refinement::DoNothing(reason)) => {
                        store
                            .apply_refinement_rejection(
                                request_id,
                                stored.user_id,
                                memory,
                                &format!("do_nothing: {reason}"),
                                now,
                            )
                            .await?
                    }
                    Err(error) => {
                        store
                            .apply_refinement_rejection(request_id, stored.user_id, memory, &error.to_string(), now)
                            .await?
                    }
                },
            }
        }
        Purpose::EntityGc => {
            let entity_id = subject.entity_id.as_deref().unwrap_or_default();
            let candidate_ids = subject.entity_candidates.clone();
            let refs: Vec<entity_gc::EntityRef> = candidate_ids
                .iter()
                .map(|id| entity_gc::EntityRef {
                    id: id.clone(),
                    name: String::new(),
                    kind: String::new(),
                })
                .collect();
            match entity_gc::parse_entity_gc_answer(raw, &refs) {
                Ok(verdict) => {
                    let decision = match verdict {
                        entity_gc::EntityVerdict::Merge { target } => EntityDecision::Merge {
                            target,
                            candidates: candidate_ids,
                        },
                        entity_gc::EntityVerdict::Delete => EntityDecision::Delete,
                        entity_gc::EntityVerdict::Keep => EntityDecision::Keep,
                    };
                    store
                        .apply_entity_decision(request_id, stored.user_id, entity_id, &decision, now)
                        .await?
                }
                Err(error) => no_change(error.to_string()).await?,
            }
        }
        Purpose::Summary => match (stored.segment_id, summary::parse_summary_answer(raw)) {
            (Some(segment_id), Ok(text)) => {
                store
                    .apply_summary(request_id, stored.user_id, segment_id, &text, now)
                    .await?
            }
            (None, _) => no_change("the request names no segment".to_owned()).await?,
            (_, Err(error)) => no_change(error.to_string()).await?,
        },
        Purpose::ExtractionReview => {
            let current = match subject.memory_id {
                Some(id) => store.review_memory(stored.user_id, id).await?.map(|row| (id, row)),
                None => None,
            };
            match (current, reviewer::parse_extraction_review_answer(raw)) {
                (None, _) => no_change("the memory is no longer active".to_owned()).await?,
                (_, Err(error)) => no_change(error.to_string()).await?,
                (Some((memory_id, row)), Ok(review)) => {
                    let original = extracted_item(&row);
                    let narrowed = reviewer::narrow(&original, &review);
                    let expires_at = narrowed
                        .expires_at
                        .as_deref()
                        .and_then(|at| chrono::DateTime::parse_from_rfc3339(at).ok())
                        .map(|at| at.with_timezone(&chrono::Utc))
                        .or(row.expires_at);
                    if narrowed.text != original.text {
                        replace(
                            ctx,
                            &stored,
                            vec![memory_id],
                            vec![narrowed.text.clone()],
                            "review",
                            "narrowed by the extraction reviewer",
                        )
                        .await?
                    } else if narrowed.confidence < row.confidence || expires_at != row.expires_at {
                        store
                            .apply_narrowing(
                                request_id,
                                stored.user_id,
                                memory_id,
                                narrowed.confidence,
                                expires_at,
                                now,
                            )
                            .await?
                    } else {
                        no_change("the reviewer kept it as it is".to_owned()).await?
                    }
                }
            }
        }
        Purpose::Extraction => {
            anyhow::bail!(
                "request {request_id} is a {}; only post-processing answers apply here",
                stored.purpose
            )
        }
    };
    Ok(applied_of(&outcome))
}

async fn embed_texts(ctx: &ApplyContext, texts: &[String]) -> anyhow::Result<Option<(String, Vec<Vec<f32>>)>> {
    match ctx.vectors.embedder().await {
        Ok(embedder) => {
            let vectors = ctx.vectors.embed(texts.to_vec()).await?;
            Ok(Some((embedder.model_id().to_owned(), vectors)))
        }
        // Without an embedder the new memories get vectors from `memsift reembed` later.
        Err(_) => Ok(None),
    }
}

async fn replace(
    ctx: &ApplyContext,
    stored: &StoredOutput,
    originals: Vec<MemoryId>,
    new_texts: Vec<String>,
    kind: &'static str,
    reason: &str,
) -> anyhow::Result<StageOutcome> {
    let embeddings = embed_texts(ctx, &new_texts).await?;
    let replacement = Replacement {
        request_id: stored.request_id,
        user_id: stored.user_id,
        originals,
        new_texts,
        embeddings,
        kind,
        reason: reason.to_owned(),
        cap: run_cap(stored),
        now: ctx.clock.now(),
    };
    Ok(ctx.store.apply_replacement(&replacement).await?)
}

fn applied_of(outcome: &StageOutcome) -> Applied {
    match outcome {
        StageOutcome::Applied(applied) => Applied {
            n_memories: applied.n_memories_created,
            n_stage_changes: u64::from(applied.operation_id.is_some()),
            ..Applied::default()
        },
        StageOutcome::AlreadyApplied => Applied::default(),
    }
}

/// Totals that show what post-processing did to a store, for reports before and after a stage.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct StoreShape {
    /// Active memories.
    pub active_memories: i64,
    /// Archived memories.
    pub archived_memories: i64,
    /// Links by kind.
    pub links_by_kind: BTreeMap<String, i64>,
    /// Active entities.
    pub active_entities: i64,
    /// Live segment summaries.
    pub live_summaries: i64,
}

/// Reads the store's shape.
pub async fn store_shape(app: &App) -> anyhow::Result<StoreShape> {
    let shape = app.store.postprocess_shape().await?;
    Ok(StoreShape {
        active_memories: shape.0,
        archived_memories: shape.1,
        links_by_kind: shape.2,
        active_entities: shape.3,
        live_summaries: shape.4,
    })
}

/// What running one stage did: its plan, the store's shape before and after, and how many
/// answers changed the store.
#[derive(Clone, Debug, Serialize)]
pub struct StageRun {
    /// The plan (on a dry run, all there is).
    pub plan: StagePlan,
    /// Before planning.
    pub before: StoreShape,
    /// After the answers were applied (equal to `before` on a dry run or with `--plan-only`).
    pub after: StoreShape,
    /// Answers that changed the store, each one journal row.
    pub n_changes: u64,
}

impl StageRun {
    /// A few lines for a terminal.
    pub fn describe(&self) -> String {
        let mut out = String::new();
        let plan = &self.plan;
        let verb = if plan.dry_run { "would plan" } else { "planned" };
        out.push_str(&format!(
            "postprocess {}: {verb} {} request(s) for {} user(s){}\n",
            plan.stage,
            plan.n_requests,
            plan.n_users,
            if plan.n_left_by_cap > 0 {
                format!(", {} left for a later run by the per-run cap", plan.n_left_by_cap)
            } else {
                String::new()
            }
        ));
        if let Some(tokens) = &plan.pair_tokens {
            out.push_str(&format!(
                "  input tokens per classified pair ({} pairs in {} requests, tiktoken o200k_base): {:.1} ({} own + {} instruction tokens, billed in full: shorter than any model's minimum cacheable length), against {:.1} with the same instructions sent once per pair\n",
                tokens.n_pairs,
                tokens.n_requests,
                tokens.ours_per_pair(),
                tokens.ours_uncached,
                tokens.ours_cacheable,
                tokens.reference_per_pair(),
            ));
        }
        if plan.dry_run {
            for line in &plan.planned {
                out.push_str(&format!("  {line}\n"));
            }
            return out;
        }
        let (before, after) = (&self.before, &self.after);
        let mut kinds: Vec<&String> = before.links_by_kind.keys().chain(after.links_by_kind.keys()).collect();
        kinds.sort();
        kinds.dedup();
        let links: Vec<String> = kinds
            .iter()
            .map(|kind| {
                format!(
                    "{kind} {}→{}",
                    before.links_by_kind.get(*kind).unwrap_or(&0),
                    after.links_by_kind.get(*kind).unwrap_or(&0)
                )
            })
            .collect();
        out.push_str(&format!(
            "  {} journaled change(s); active memories {}→{}, archived {}→{}, entities {}→{}, summaries {}→{}\n",
            self.n_changes,
            before.active_memories,
            after.active_memories,
            before.archived_memories,
            after.archived_memories,
            before.active_entities,
            after.active_entities,
            before.live_summaries,
            after.live_summaries,
        ));
        if !links.is_empty() {
            out.push_str(&format!("  links: {}\n", links.join(", ")));
        }
        out
    }
}
