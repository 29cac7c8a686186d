//! Planning claimed segments: chunks under a token budget (a turn larger than a chunk in parts,
//! noted on the segment), each routed by its user's tier and reserved against the daily budget.

use std::collections::HashMap;

use anyhow::Context;
use chrono::Duration;
use memsift_core::config::ProviderKind;
use memsift_core::request::{RequestBody, RequestContext, RequestSubject};
use memsift_core::status::{Purpose, Role};
use memsift_core::{MemoryId, RequestId};
use memsift_payload::{KnownMemory, PayloadOptions, build_extraction_chunks};
use memsift_store::{ClaimedSegment, NewRequest};

use crate::app::App;
use crate::budget::{Pending, Reserved, reserve};
use crate::context::is_environment_fault;
use crate::held::MemoryWords;
use crate::timings::{Phase, timed};

use super::{CLAIM_BATCH, StepReport};

/// Claims closed segments and plans one request per chunk through the route of its user's tier.
pub(super) async fn plan_closed_segments(app: &App, report: &mut StepReport) -> anyhow::Result<()> {
    let lease = app.config.claim_lease();
    let started = std::time::Instant::now();
    let claimed = app
        .store
        .segments()
        .claim_segments(&app.worker_id, app.clock.now(), lease, CLAIM_BATCH)
        .await?;
    app.claims.record(started.elapsed(), claimed.len());
    plan_claimed(app, &claimed, report).await
}

/// Plans claimed segments, in order; a segment whose planning fails is failed with the reason
/// (retried later), and an environment fault hands it and the rest back unspent.
pub(super) async fn plan_claimed(app: &App, claimed: &[ClaimedSegment], report: &mut StepReport) -> anyhow::Result<()> {
    for (position, segment) in claimed.iter().enumerate() {
        match plan_segment(app, segment).await {
            Ok(n_requests) => {
                report.n_segments_planned += 1;
                report.n_requests_planned += n_requests;
            }
            Err(error) if is_environment_fault(&error) => {
                // Not the segment's fault: hand this one and the rest back without an attempt.
                let reason = format!("waiting: {error:#}");
                for waiting in &claimed[position..] {
                    app.store
                        .segments()
                        .defer_segment(waiting.id, app.clock.now(), &reason)
                        .await?;
                }
                return Err(error.context(format!(
                    "planning segment {} stopped; it and the other claimed segments wait, no attempt counted",
                    segment.id
                )));
            }
            Err(error) => {
                report.n_segments_failed += 1;
                tracing::warn!(segment_id = %segment.id, attempt = segment.attempt, error = %format!("{error:#}"), "Planning a segment failed.");
                // Later attempts wait longer: 5, 10, 15 … minutes.
                let retry_after = Duration::minutes(5 * segment.attempt);
                let max_attempts = app.config.extraction.max_attempts as i64;
                app.store
                    .segments()
                    .fail_segment(
                        segment.id,
                        &format!("{error:#}"),
                        max_attempts,
                        retry_after,
                        app.clock.now(),
                    )
                    .await?;
            }
        }
    }
    Ok(())
}

/// Builds a claimed segment's chunks and records one planned request per chunk; returns how many.
///
/// The chunks reserve their estimated cost against the user's daily budget together: all of them
/// fit and go the tier's route, or none is reserved and the segment follows `[billing]
/// over_budget` (the offline lane, or waiting for the next day).
pub async fn plan_segment(app: &App, segment: &ClaimedSegment) -> anyhow::Result<u64> {
    let now = app.clock.now();
    let tier = app
        .billing
        .tier_of(app.store.users().user_billing_tier(segment.user_id).await?.as_deref());
    let route = app.router.route(Purpose::Extraction, &tier, false, now)?;
    let segment_turns = app.store.segments().segment_turns(segment.id).await?;
    let turns: Vec<_> = segment_turns
        .iter()
        .map(|turn| (turn.message_id, turn.turn.clone()))
        .collect();
    let known = memory_context(app, segment, &segment_turns).await?;
    // The assistant's turns are shown for context but are never evidence; the processor checks
    // each item's citations against these.
    let assistant_labels: std::collections::HashSet<&str> = segment_turns
        .iter()
        .filter(|turn| turn.turn.role == memsift_core::status::Role::Assistant)
        .map(|turn| turn.turn.label.as_str())
        .collect();
    let prompt = app.prompts.get("extraction")?.clone();
    let extraction_prompt_version = prompt.version.clone();
    let options = PayloadOptions {
        chunk_budget_tokens: app.config.batch.chunk_budget_tokens as usize,
        max_known_memories: app.config.batch.max_known_memories as usize,
    };
    // Chunking counts the tokens of the whole segment: for a megabyte of text, CPU time that the
    // task serving the API and the watchdog pings cannot spare, so it runs on a blocking thread.
    let worker_id = app.worker_id.clone();
    let budget = options.chunk_budget_tokens;
    let chunking = tokio::task::spawn_blocking(move || {
        crate::app::worker_fail_point("pipeline::chunking", &worker_id);
        build_extraction_chunks(&prompt, now, &turns, &known, &options)
    })
    .await
    .context("chunking the segment ended abnormally")?
    .context("cutting the segment into chunks")?;
    // A turn larger than a chunk went in parts: said on the segment, where an admin looks.
    let note = chunking.note(budget);
    if let Some(note) = &note {
        tracing::info!(segment_id = %segment.id, note = %note, "A turn larger than a chunk is sent in parts.");
    }
    let chunks = chunking.chunks;
    if chunks.is_empty() {
        app.store.segments().finish_empty_segment(segment.id, now).await?;
        return Ok(0);
    }
    let input_tokens: Vec<u64> = chunks.iter().map(|chunk| chunk.n_tokens as u64).collect();
    let (route, estimates, allowance) = match reserve(
        app,
        Purpose::Extraction,
        segment.user_id,
        &tier,
        route,
        &input_tokens,
        &Pending::default(),
    )
    .await?
    {
        Reserved::Granted {
            route,
            reservations,
            allowance,
        } => (route, reservations, allowance),
        Reserved::Deferred(over) => {
            let tomorrow = (now.date_naive() + chrono::Days::new(1))
                .and_hms_opt(0, 0, 0)
                .expect("midnight exists")
                .and_utc();
            app.store
                .segments()
                .defer_segment(segment.id, tomorrow, &format!("{over}; deferred to {tomorrow}"))
                .await?;
            return Ok(0);
        }
    };
    let prompt_version = match route.llm.provider {
        ProviderKind::Heuristic => memsift_heuristic::RULES_VERSION.to_owned(),
        _ => extraction_prompt_version,
    };
    let requests: Vec<NewRequest> = chunks
        .iter()
        .zip(&estimates)
        .map(|(chunk, estimate)| {
            let memories = chunk
                .short_ids
                .iter()
                .map(|(short, id)| {
                    let text = chunk.known_texts.get(short).cloned().unwrap_or_default();
                    (short.clone(), (*id, text))
                })
                .collect();
            NewRequest {
                id: RequestId::new_v7(),
                purpose: Purpose::Extraction,
                user_id: segment.user_id,
                segment_id: Some(segment.id),
                chunk_index: chunk.chunk_index as i64,
                lane: route.lane,
                config_key: route.config_key.clone(),
                provider: route.llm.provider.as_str().to_owned(),
                model: route.recorded_model(),
                prompt_version: prompt_version.clone(),
                context: RequestContext {
                    turns: chunk.turns.clone(),
                    assistant_turns: chunk
                        .turns
                        .keys()
                        .filter(|label| assistant_labels.contains(label.as_str()))
                        .cloned()
                        .collect(),
                    memories,
                    ..RequestContext::default()
                },
                request_body: RequestBody {
                    system: chunk.system_prompt.clone(),
                    user_message: chunk.user_message.clone(),
                },
                subject: RequestSubject::default(),
                parent_request_id: None,
                reserved_usd: *estimate,
                max_output_tokens: allowance,
            }
        })
        .collect();
    let planned = app
        .store
        .requests()
        .plan_claimed_segment(segment.id, &app.worker_id, &requests, note.as_deref(), now)
        .await?;
    if !planned {
        // This worker stalled past its claim's lease and another took the segment over: its
        // plan stands, this one is dropped (with the budget it reserved, which rides on it).
        tracing::warn!(segment_id = %segment.id, "The segment's claim lapsed while it was planned; another worker has it, so this plan is dropped.");
        return Ok(0);
    }
    Ok(requests.len() as u64)
}

/// The known memories shown with a segment, most relevant first: those its turns referenced (the
/// host application's retrieval hits), then the user's memories most similar to what the user
/// said ([`similar_memories`]). The payload caps the list.
async fn memory_context(
    app: &App,
    segment: &ClaimedSegment,
    turns: &[memsift_store::SegmentTurn],
) -> anyhow::Result<Vec<KnownMemory>> {
    let mut known = app.store.segments().referenced_memories(segment.id).await?;
    let n_similar = app.config.extraction.similar_memories as usize;
    let room = (app.config.batch.max_known_memories as usize).saturating_sub(known.len());
    let said: Vec<&memsift_store::SegmentTurn> = turns
        .iter()
        .filter(|turn| turn.turn.role == Role::User && !turn.turn.content.trim().is_empty())
        .collect();
    if n_similar > 0 && room > 0 && !said.is_empty() {
        let _similar = timed(Phase::PlanningSimilar);
        let ranked = similar_memories(app, segment, &said, n_similar).await?;
        let ids: Vec<MemoryId> = ranked
            .into_iter()
            .filter(|id| !known.iter().any(|(shown, _)| shown == id))
            .take(n_similar.min(room))
            .collect();
        known.extend(app.store.segments().active_memory_texts(segment.user_id, &ids).await?);
    }
    Ok(known.into_iter().map(|(id, text)| KnownMemory { id, text }).collect())
}

/// The user's memories nearest what the user said in the segment, best first, at most
/// `n_similar` per turn. Planning embeds nothing: when search indexing has stored a vector of
/// every one of these turns (the daemon indexes turns as they arrive, long before a segment
/// closes), each memory counts its best cosine to them; otherwise (a backlog just imported, turn
/// vectors off) BM25 over the user's memory lexicon ranks them, each turn's matches fused by rank,
/// so a segment's first request never waits for its turns to be embedded.
async fn similar_memories(
    app: &App,
    segment: &ClaimedSegment,
    said: &[&memsift_store::SegmentTurn],
    n_similar: usize,
) -> anyhow::Result<Vec<MemoryId>> {
    let ids: Vec<_> = said.iter().map(|turn| turn.message_id).collect();
    let mut best: HashMap<MemoryId, f64> = HashMap::new();
    if let Some(vectors) = app.vectors.stored_turn_vectors(&app.store, segment.id, &ids).await? {
        let index = app.vectors.fresh_index(&app.store, segment.user_id).await?;
        for vector in &vectors {
            for (neighbour, similarity) in index.nearest(vector, n_similar)? {
                let score = best.entry(neighbour).or_insert(f64::MIN);
                *score = score.max(f64::from(similarity));
            }
        }
    } else {
        let version = app.store.vectors().memory_version(segment.user_id).await?;
        let words = app
            .held
            .current::<MemoryWords>(&app.store, segment.user_id, &(), version)
            .await?;
        for turn in said {
            let terms = crate::search::query::terms(&turn.turn.content);
            for (rank, (id, _)) in words.lexicon.search(&terms, n_similar).into_iter().enumerate() {
                *best.entry(id).or_default() += 1.0 / (SIMILAR_RRF_K + rank as f64 + 1.0);
            }
        }
    }
    let mut ranked: Vec<(MemoryId, f64)> = best.into_iter().collect();
    ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    Ok(ranked.into_iter().map(|(id, _)| id).collect())
}

/// Reciprocal rank fusion's `k` for the turns' BM25 lists: a memory several turns match outranks
/// one that a single turn matches best.
const SIMILAR_RRF_K: f64 = 60.0;
