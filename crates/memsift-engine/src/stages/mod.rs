//! The post-processing stages on the pipeline: plan each stage's requests (relationships,
//! consolidation, refinement, entity GC, segment summaries) through the same router, lanes and
//! batch coordinator as extraction, and apply their answers through the store's journaled writes.
//!
//! Planning picks candidates and routes one request per unit of work; nothing changes until an
//! answer is applied. A consolidation is two requests: the proposal, then (planned by the next
//! step from the applied proposal, so a crash in between loses nothing) an independent review;
//! only an approved review changes memories. `--dry-run` plans nothing and prints what would be.

mod answer;
mod plan;
mod request;
mod reviews;
mod shape;

use std::collections::HashSet;

use memsift_core::UserId;
use memsift_core::status::Purpose;
use memsift_store::{Covered, RunCap};
use serde::Serialize;

use crate::app::App;
use crate::budget::Pending;

pub use answer::apply_stage_answer;
pub use reviews::{BacklogPlan, plan_extraction_reviews, plan_reviews, review_backlog};
pub use shape::{StageRun, StoreShape, store_shape};

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
    /// Consolidation only: clusters not asked about again because an earlier answer kept that
    /// very set of memories as it was.
    pub n_kept: u64,
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
        Some(external) => match app.store.listing().user_id(external).await? {
            Some(id) => vec![(id, external.to_owned())],
            None => anyhow::bail!("no user `{external}`; `memsift users` lists them"),
        },
        None => app.store.stages().users_with_memories().await?,
    };
    if stage == Stage::Summaries {
        let wanted: HashSet<UserId> = users.iter().map(|(id, _)| *id).collect();
        plan.n_users = wanted.len() as u64;
        plan::plan_summaries(app, &wanted, dry_run, &mut plan).await?;
        return Ok(plan);
    }
    let pending = Pending::default();
    for (user_id, external) in users {
        plan.n_users += 1;
        let active = usize::try_from(app.store.stages().active_memory_count(user_id).await?).unwrap_or(0);
        let cap = RunCap {
            run: request::new_run_id(),
            cap: memsift_store::share_cap(app.config.postprocess.max_share_per_run, active) as i64,
        };
        let unit = request::UserRun {
            user_id,
            external: &external,
            cap: &cap,
            pending: &pending,
        };
        let requests = match stage {
            Stage::Relationships => plan::plan_relationships(app, &unit, &mut plan).await?,
            Stage::Consolidation => plan::plan_consolidation(app, &unit, &mut plan).await?,
            Stage::Refinement => plan::plan_refinement(app, &unit, &mut plan).await?,
            Stage::EntityGc => plan::plan_entity_gc(app, &unit, &mut plan).await?,
            Stage::Summaries => unreachable!("summaries are planned per segment above"),
        };
        plan.n_requests += requests.requests.len() as u64;
        if !dry_run {
            app.store
                .stages()
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
