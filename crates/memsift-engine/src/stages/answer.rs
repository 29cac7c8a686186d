//! Applying a post-processing answer: parsed tolerantly, checked against the request's subject,
//! and written through the store's journaled, capped operations.

use anyhow::Context;
use memsift_core::MemoryId;
use memsift_core::status::Purpose;
use memsift_postprocess::{consolidation, entity_gc, refinement, relationship, reviewer, summary};
use memsift_store::{EntityDecision, LinkEnd, Narrowed, NewLink, Replacement, RunCap, StageOutcome, StoredOutput};

use super::REVIEW_CAP;
use super::request::texts_of;
use super::reviews::extracted_item;
use crate::context::{Applied, ApplyContext};
use crate::embedding::EmbedPurpose;

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
    let raw = stored
        .raw_output
        .as_deref()
        .with_context(|| format!("request {request_id} has no output yet"))?;
    let outcome = match stored.purpose {
        Purpose::Relationship => apply_relationship(ctx, &stored, raw).await?,
        Purpose::Consolidation => match consolidation::parse_consolidation_answer(raw) {
            Ok(Some(_)) => {
                ctx.store
                    .stages()
                    .apply_without_change(request_id, 1, None, ctx.clock.now())
                    .await?
            }
            Ok(None) => kept(ctx, &stored, "keep").await?,
            Err(error) => no_change(ctx, &stored, error.to_string()).await?,
        },
        Purpose::ConsolidationReview => apply_consolidation_review(ctx, &stored, raw).await?,
        Purpose::Refinement => apply_refinement(ctx, &stored, raw).await?,
        Purpose::EntityGc => apply_entity_gc(ctx, &stored, raw).await?,
        Purpose::Summary => match (stored.segment_id, summary::parse_summary_answer(raw)) {
            (Some(segment_id), Ok(text)) => {
                ctx.store
                    .stages()
                    .apply_summary(request_id, stored.user_id, segment_id, &text, ctx.clock.now())
                    .await?
            }
            (None, _) => no_change(ctx, &stored, "the request names no segment".to_owned()).await?,
            (_, Err(error)) => no_change(ctx, &stored, error.to_string()).await?,
        },
        Purpose::ExtractionReview => apply_extraction_review(ctx, &stored, raw).await?,
        Purpose::Extraction => {
            anyhow::bail!(
                "request {request_id} is a {}; only post-processing answers apply here",
                stored.purpose
            )
        }
    };
    Ok(applied_of(&outcome))
}

/// Applies an answer that cannot be used (or changes nothing) with a note saying why, so it is
/// never retried.
async fn no_change(ctx: &ApplyContext, stored: &StoredOutput, note: String) -> anyhow::Result<StageOutcome> {
    Ok(ctx
        .store
        .stages()
        .apply_without_change(stored.request_id, 0, Some(&note), ctx.clock.now())
        .await?)
}

/// Applies an answer that keeps its cluster of memories as it is, remembered so the same set is
/// not proposed (and paid for) again until one of its memories changes.
async fn kept(ctx: &ApplyContext, stored: &StoredOutput, note: &str) -> anyhow::Result<StageOutcome> {
    Ok(ctx
        .store
        .stages()
        .apply_kept(stored.request_id, note, ctx.clock.now())
        .await?)
}

async fn apply_relationship(ctx: &ApplyContext, stored: &StoredOutput, raw: &str) -> anyhow::Result<StageOutcome> {
    let candidates = &stored.subject.candidates;
    match (
        stored.subject.memory_id,
        relationship::parse_relationship_answer(raw, candidates.len()),
    ) {
        (Some(memory), Ok(verdicts)) => {
            let links: Vec<NewLink> = verdicts
                .iter()
                .map(|verdict| NewLink {
                    source: memory,
                    target: candidates[verdict.candidate],
                    kind: verdict.kind.as_str().to_owned(),
                    confidence: verdict.confidence,
                    reasoning: verdict.reasoning.clone(),
                    superseded: verdict.kind.superseded_end().map(|end| match end {
                        relationship::SupersededEnd::Memory => LinkEnd::Source,
                        relationship::SupersededEnd::Candidate => LinkEnd::Target,
                    }),
                })
                .collect();
            Ok(ctx
                .store
                .stages()
                .apply_links(
                    stored.request_id,
                    stored.user_id,
                    &links,
                    &run_cap(stored),
                    ctx.clock.now(),
                )
                .await?)
        }
        (None, _) => no_change(ctx, stored, "the request names no memory".to_owned()).await,
        (_, Err(error)) => no_change(ctx, stored, error.to_string()).await,
    }
}

async fn apply_consolidation_review(
    ctx: &ApplyContext,
    stored: &StoredOutput,
    raw: &str,
) -> anyhow::Result<StageOutcome> {
    let proposal = stored.context.proposal.as_deref().unwrap_or_default();
    match consolidation::parse_review_answer(raw) {
        Ok(review) if review.approved && !proposal.is_empty() => {
            let embeddings = embed_texts(ctx, &[proposal.to_owned()]).await?;
            let replacement = Replacement {
                request_id: stored.request_id,
                user_id: stored.user_id,
                originals: stored.subject.members.clone(),
                new_texts: vec![proposal.to_owned()],
                embeddings,
                kind: "consolidate",
                reason: review.reasoning.clone(),
                cap: run_cap(stored),
                now: ctx.clock.now(),
                narrowed: None,
            };
            Ok(ctx.store.stages().apply_replacement(&replacement).await?)
        }
        Ok(review) => {
            let note = format!("review rejected the proposal: {}", review.reasoning);
            kept(ctx, stored, &note).await
        }
        Err(error) => no_change(ctx, stored, error.to_string()).await,
    }
}

async fn apply_refinement(ctx: &ApplyContext, stored: &StoredOutput, raw: &str) -> anyhow::Result<StageOutcome> {
    let Some(memory) = stored.subject.memory_id else {
        return no_change(ctx, stored, "the request names no memory".to_owned()).await;
    };
    let Some(original) = texts_of(&ctx.store, stored.user_id, &[memory]).await?.remove(&memory) else {
        return no_change(ctx, stored, "the memory is no longer active".to_owned()).await;
    };
    let rejection = match refinement::parse_refinement_answer(raw, &original) {
        Ok(refinement::Refinement::Trim(text)) => {
            return replace(ctx, stored, vec![memory], vec![text], "refine", "trimmed").await;
        }
        Ok(refinement::Refinement::Split(parts)) => {
            return replace(ctx, stored, vec![memory], parts, "refine", "split").await;
        }
        Ok(refinement::Refinement::DoNothing(reason)) => format!("do_nothing: {reason}"),
        Err(error) => error.to_string(),
    };
    Ok(ctx
        .store
        .stages()
        .apply_refinement_rejection(stored.request_id, stored.user_id, memory, &rejection, ctx.clock.now())
        .await?)
}

async fn apply_entity_gc(ctx: &ApplyContext, stored: &StoredOutput, raw: &str) -> anyhow::Result<StageOutcome> {
    let entity_id = stored.subject.entity_id.as_deref().unwrap_or_default();
    let candidate_ids = stored.subject.entity_candidates.clone();
    let refs: Vec<entity_gc::EntityRef> = candidate_ids
        .iter()
        .map(|id| entity_gc::EntityRef {
            id: id.clone(),
            name: String::new(),
            kind: String::new(),
        })
        .collect();
    let verdict = match entity_gc::parse_entity_gc_answer(raw, &refs) {
        Ok(verdict) => verdict,
        Err(error) => return no_change(ctx, stored, error.to_string()).await,
    };
    let decision = match verdict {
        entity_gc::EntityVerdict::Merge { target } => EntityDecision::Merge {
            target,
            candidates: candidate_ids,
        },
        entity_gc::EntityVerdict::Delete => EntityDecision::Delete,
        entity_gc::EntityVerdict::Keep => EntityDecision::Keep,
    };
    Ok(ctx
        .store
        .stages()
        .apply_entity_decision(stored.request_id, stored.user_id, entity_id, &decision, ctx.clock.now())
        .await?)
}

/// The extraction reviewer may only narrow: a shorter text replaces the memory; a lower
/// confidence or an earlier expiry is written onto it.
async fn apply_extraction_review(ctx: &ApplyContext, stored: &StoredOutput, raw: &str) -> anyhow::Result<StageOutcome> {
    let current = match stored.subject.memory_id {
        Some(id) => ctx
            .store
            .stages()
            .review_memory(stored.user_id, id)
            .await?
            .map(|row| (id, row)),
        None => None,
    };
    let (memory_id, row, review) = match (current, reviewer::parse_extraction_review_answer(raw)) {
        (None, _) => return no_change(ctx, stored, "the memory is no longer active".to_owned()).await,
        (_, Err(error)) => return no_change(ctx, stored, error.to_string()).await,
        (Some((memory_id, row)), Ok(review)) => (memory_id, row, review),
    };
    let original = extracted_item(&row);
    let narrowed = reviewer::narrow(&original, &review);
    let expires_at = narrowed
        .expires_at
        .as_deref()
        .and_then(|at| chrono::DateTime::parse_from_rfc3339(at).ok())
        .map(|at| at.with_timezone(&chrono::Utc))
        .or(row.expires_at);
    if narrowed.text != original.text {
        // The shorter text comes with the reviewer's confidence and expiry, never the original's:
        // a narrowing is all of what the reviewer narrowed.
        let narrowing = Narrowed {
            confidence: narrowed.confidence.min(row.confidence),
            expires_at,
        };
        let embeddings = embed_texts(ctx, std::slice::from_ref(&narrowed.text)).await?;
        let replacement = Replacement {
            request_id: stored.request_id,
            user_id: stored.user_id,
            originals: vec![memory_id],
            new_texts: vec![narrowed.text.clone()],
            embeddings,
            kind: "review",
            reason: "narrowed by the extraction reviewer".to_owned(),
            cap: run_cap(stored),
            now: ctx.clock.now(),
            narrowed: Some(narrowing),
        };
        Ok(ctx.store.stages().apply_replacement(&replacement).await?)
    } else if narrowed.confidence < row.confidence || expires_at != row.expires_at {
        Ok(ctx
            .store
            .stages()
            .apply_narrowing(
                stored.request_id,
                stored.user_id,
                memory_id,
                narrowed.confidence,
                expires_at,
                ctx.clock.now(),
            )
            .await?)
    } else {
        no_change(ctx, stored, "the reviewer kept it as it is".to_owned()).await
    }
}

async fn embed_texts(ctx: &ApplyContext, texts: &[String]) -> anyhow::Result<Option<(String, Vec<Vec<f32>>)>> {
    match ctx.vectors.embedder().await {
        Ok(embedder) => {
            let vectors = ctx.vectors.embed(texts.to_vec(), EmbedPurpose::Item).await?;
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
        narrowed: None,
    };
    Ok(ctx.store.stages().apply_replacement(&replacement).await?)
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
