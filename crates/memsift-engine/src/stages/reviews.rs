//! Reviews planned from earlier answers: a consolidation proposal's independent review, and the
//! extraction reviewer's look at each new memory.

use memsift_core::request::{RequestContext, RequestSubject};
use memsift_core::status::Purpose;
use memsift_core::{MemoryId, UserId};
use memsift_postprocess::MemoryText;
use memsift_postprocess::{consolidation, reviewer};
use memsift_store::{Covered, RunCap};

use super::REVIEW_CAP;
use super::request::{Extra, new_run_id, stage_request, stage_request_with, texts_of};
use crate::app::App;
use crate::budget::Pending;

/// Plans the independent review of every applied consolidation proposal that has none yet;
/// returns how many. Runs on every pipeline step, so a crash between proposal and review only
/// delays the review.
pub async fn plan_reviews(app: &App) -> anyhow::Result<u64> {
    let proposals = app.store.stages().proposals_to_review(64).await?;
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
            .stages()
            .plan_stage_requests(&requests, &Covered::default(), app.clock.now())
            .await?;
    }
    Ok(n)
}

/// The switch the extraction reviewer's start is recorded under (`switches`).
const REVIEWER_SWITCH: &str = "extraction_reviewer";

/// With `[postprocess] extraction_reviewer` on, plans one review of every memory extraction
/// wrote since the reviewer was switched on that has none yet; returns how many. Runs on every
/// pipeline step, like the consolidation reviews. Memories older than the switch are the
/// backlog, reviewed only by [`review_backlog`] (turning the reviewer on once sent a paid review
/// of every old memory at once). The reviewer may only narrow (`memsift_postprocess::reviewer`).
pub async fn plan_extraction_reviews(app: &App) -> anyhow::Result<u64> {
    let on = app.config.postprocess.enabled && app.config.postprocess.extraction_reviewer;
    let Some(since) = app
        .store
        .stages()
        .switch_on_since(REVIEWER_SWITCH, on, app.clock.now())
        .await?
    else {
        return Ok(0);
    };
    let memories = app.store.stages().memories_to_review(since, 256).await?;
    let planned = review_requests(app, memories).await?;
    write_reviews(app, &planned).await?;
    Ok(planned.requests.len() as u64)
}

/// What `memsift postprocess review-backlog` plans (or, with `plan_only`, would plan).
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct BacklogPlan {
    /// Memories without a review.
    pub n_memories: u64,
    /// Review requests planned (or that would be).
    pub n_requests: u64,
    /// Their expected cost, with the output each was priced at (reserved against the users'
    /// budgets, when set, at the allowance a budget sends them with).
    pub estimate: crate::budget::Expected,
    /// Nothing was written.
    pub plan_only: bool,
}

/// Plans a review of every memory extraction wrote that has none (`user`'s only, when given),
/// whenever it was written: the backlog the reviewer leaves alone when switched on. With
/// `plan_only` it counts the requests and their estimated cost and writes nothing.
pub async fn review_backlog(app: &App, user: Option<&str>, plan_only: bool) -> anyhow::Result<BacklogPlan> {
    let user_id = match user {
        Some(external) => match app.store.listing().user_id(external).await? {
            Some(id) => Some(id),
            None => anyhow::bail!("no user `{external}`; `memsift users` lists them"),
        },
        None => None,
    };
    let memories = app.store.stages().review_backlog(user_id, i64::MAX).await?;
    let n_memories = memories.len() as u64;
    let planned = review_requests(app, memories).await?;
    if !plan_only {
        write_reviews(app, &planned).await?;
    }
    Ok(BacklogPlan {
        n_memories,
        n_requests: planned.requests.len() as u64,
        estimate: crate::budget::expected_usd(app, &planned.requests).await?,
        plan_only,
    })
}

/// Review requests for `memories`, and the memories they cover.
struct PlannedReviews {
    requests: Vec<memsift_store::NewRequest>,
    reviewed: Vec<MemoryId>,
}

async fn review_requests(app: &App, memories: Vec<memsift_store::ReviewMemory>) -> anyhow::Result<PlannedReviews> {
    let mut planned = PlannedReviews {
        requests: Vec::new(),
        reviewed: Vec::new(),
    };
    let pending = Pending::default();
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
            planned.requests.push(request);
            planned.reviewed.push(memory_id);
        }
    }
    Ok(planned)
}

async fn write_reviews(app: &App, planned: &PlannedReviews) -> anyhow::Result<()> {
    if planned.reviewed.is_empty() {
        return Ok(());
    }
    let covered = Covered {
        reviewed: &planned.reviewed,
        ..Covered::default()
    };
    app.store
        .stages()
        .plan_stage_requests(&planned.requests, &covered, app.clock.now())
        .await?;
    Ok(())
}

/// A stored memory in the output contract's shape, as the reviewer is shown it.
pub(super) fn extracted_item(memory: &memsift_store::ReviewMemory) -> memsift_core::contract::ExtractedItem {
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
