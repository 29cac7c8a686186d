//! Continuations: the request that asks again for the rest of a chunk whose answer was cut off.
//!
//! The apply path asks (`context::ContinuationPlanner`) while it holds the cut answer; the request
//! is built here like a chunk's first one (the extraction prompt, today's date, the turns as
//! `<turn>` elements, routed by the user's tier and reserved against their daily budget) and
//! written by the apply's own transaction. It reads the whole chunk again, with the kept items
//! first among the known memories, so the model does not restate them and the processor's dedupe
//! meets any it does.
//! Its depth (`RequestContext::continuation`) is bounded by `[extraction] max_continuations`, so a
//! model that always stops early ends with its chunk extracted and the reason recorded.

use std::collections::HashSet;
use std::future::Future;
use std::pin::Pin;

use anyhow::Context;
use memsift_core::config::ProviderKind;
use memsift_core::request::{RequestBody, RequestContext, RequestSubject};
use memsift_core::status::{Purpose, Role};
use memsift_core::{MessageId, RequestId};
use memsift_payload::{KnownMemory, PayloadOptions, build_extraction_chunks};
use memsift_store::{ContinuationPlan, NewRequest};

use crate::app::App;
use crate::budget::{Pending, Reserved, reserve};
use crate::context::{ContinuationPlanner, CutAnswer};

impl ContinuationPlanner for App {
    fn plan_continuation<'a>(
        &'a self,
        cut: CutAnswer<'a>,
    ) -> Pin<Box<dyn Future<Output = anyhow::Result<ContinuationPlan>> + 'a>> {
        Box::pin(plan_continuation(self, cut))
    }
}

/// The continuation of `cut`, or why there is none (the bound on continuations, a rest of the
/// chunk without a user turn, or a daily budget that defers).
async fn plan_continuation(app: &App, cut: CutAnswer<'_>) -> anyhow::Result<ContinuationPlan> {
    let stored = cut.stored;
    let chunk = stored.chunk_index;
    let depth = stored.context.continuation;
    let max = app.config.extraction.max_continuations;
    if depth >= max {
        return Ok(ContinuationPlan::NotContinued(format!(
            "the answer was cut off and chunk {chunk} was continued {depth} times already ([extraction] \
             max_continuations = {max}): the rest of the chunk is not extracted"
        )));
    }
    let segment_id = stored
        .segment_id
        .with_context(|| format!("extraction request {} has no segment", stored.request_id))?;
    let segment_turns = app.store.segments().segment_turns(segment_id).await?;
    let shown: HashSet<MessageId> = stored.context.turns.values().copied().collect();
    let chunk_turns: Vec<_> = segment_turns
        .into_iter()
        .filter(|turn| shown.contains(&turn.message_id))
        .collect();
    // The whole chunk again: a model's items are not in turn order (grouped by speaker or topic),
    // and a turn can hold several facts, so any turn may still hold one the cut answer never
    // wrote. Measured against reading on from the first turn no kept item cites (BENCHMARKS.md):
    // that saves a sixth of a continuation's tokens and can lose a turn's other facts silently.
    let turns: Vec<_> = chunk_turns
        .iter()
        .map(|turn| (turn.message_id, turn.turn.clone()))
        .collect();
    let assistant_labels: HashSet<String> = turns
        .iter()
        .filter(|(_, turn)| turn.role == Role::Assistant)
        .map(|(_, turn)| turn.label.clone())
        .collect();
    // The kept items first: they are what this model must not write again.
    let kept: Vec<KnownMemory> = cut
        .item_ids
        .iter()
        .zip(&cut.output.items)
        .map(|(id, item)| KnownMemory {
            id: *id,
            text: item.text.clone(),
        })
        .collect();
    let shown_before: Vec<KnownMemory> = stored
        .context
        .memories
        .values()
        .map(|(id, text)| KnownMemory {
            id: *id,
            text: text.clone(),
        })
        .collect();
    let mut payloads = one_chunk_of(app, &turns, kept, shown_before).await?;
    if payloads.len() > 1 {
        // Cannot happen while the turns fitted one request before; said rather than half-done.
        let left_out: Vec<&str> = payloads[1..]
            .iter()
            .flat_map(|payload| payload.turns.keys().map(String::as_str))
            .collect();
        return Ok(ContinuationPlan::NotContinued(format!(
            "the answer was cut off, and chunk {chunk}'s turns no longer fit one request of [batch] \
             chunk_budget_tokens: turns {} are not asked again",
            left_out.join(", ")
        )));
    }
    let Some(payload) = payloads.pop() else {
        return Ok(ContinuationPlan::NotContinued(format!(
            "the answer was cut off, but chunk {chunk} holds no user turn: nothing is left to extract"
        )));
    };
    let now = app.clock.now();
    let tier = app
        .billing
        .tier_of(app.store.users().user_billing_tier(stored.user_id).await?.as_deref());
    let route = app.router.route(Purpose::Extraction, &tier, false, now)?;
    // Priced, allowed and over budget like any request of its purpose.
    let input_tokens = [payload.n_tokens as u64];
    let reserved = reserve(
        app,
        Purpose::Extraction,
        stored.user_id,
        &tier,
        route,
        &input_tokens,
        &Pending::default(),
    )
    .await?;
    let (route, reserved_usd, allowance) = match reserved {
        Reserved::Granted {
            route,
            reservations,
            allowance,
        } => (route, reservations[0], allowance),
        Reserved::Deferred(over) => {
            return Ok(ContinuationPlan::NotContinued(format!(
                "the answer was cut off and the {over}: the rest of chunk {chunk} is not extracted \
                 ([billing] over_budget = \"defer\")"
            )));
        }
    };
    let prompt_version = match route.llm.provider {
        ProviderKind::Heuristic => memsift_heuristic::RULES_VERSION.to_owned(),
        _ => payload.prompt_version.clone(),
    };
    let model = route.recorded_model();
    let memories = payload
        .short_ids
        .iter()
        .map(|(short, id)| {
            let text = payload.known_texts.get(short).cloned().unwrap_or_default();
            (short.clone(), (*id, text))
        })
        .collect();
    Ok(ContinuationPlan::Continue(Box::new(NewRequest {
        id: RequestId::new_v7(),
        purpose: Purpose::Extraction,
        user_id: stored.user_id,
        segment_id: Some(segment_id),
        chunk_index: chunk,
        lane: route.lane,
        config_key: route.config_key,
        provider: route.llm.provider.as_str().to_owned(),
        model,
        prompt_version,
        context: RequestContext {
            assistant_turns: payload
                .turns
                .keys()
                .filter(|label| assistant_labels.contains(label.as_str()))
                .cloned()
                .collect(),
            turns: payload.turns,
            memories,
            continuation: depth + 1,
            ..RequestContext::default()
        },
        request_body: RequestBody {
            system: payload.system_prompt,
            user_message: payload.user_message,
        },
        subject: RequestSubject::default(),
        parent_request_id: Some(stored.request_id),
        reserved_usd,
        max_output_tokens: allowance,
    })))
}

/// The continuation's payload: the chunk's turns, which fitted one request before, with as many
/// known memories as leave them in one request again: the kept items and what the chunk showed
/// before, else the kept items alone, else none (dedupe then meets what the model repeats).
/// No payload when the turns hold no user turn; more than one only if even without known memories
/// they do not fit one request.
async fn one_chunk_of(
    app: &App,
    turns: &[(MessageId, memsift_core::contract::Turn)],
    kept: Vec<KnownMemory>,
    shown_before: Vec<KnownMemory>,
) -> anyhow::Result<Vec<memsift_payload::ExtractionChunk>> {
    let everything: Vec<KnownMemory> = kept.iter().cloned().chain(shown_before).collect();
    let mut chunks = Vec::new();
    for known in [everything, kept, Vec::new()] {
        let prompt = app.prompts.get("extraction")?.clone();
        let now = app.clock.now();
        let options = PayloadOptions {
            chunk_budget_tokens: app.config.batch.chunk_budget_tokens as usize,
            max_known_memories: known.len(),
        };
        let turns = turns.to_vec();
        chunks = tokio::task::spawn_blocking(move || build_extraction_chunks(&prompt, now, &turns, &known, &options))
            .await
            .context("building a continuation's payload ended abnormally")?
            .context("cutting a continuation's turns into a chunk")?
            .chunks;
        if chunks.len() <= 1 {
            break;
        }
    }
    Ok(chunks)
}
