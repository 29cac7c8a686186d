//! The one apply path: from a stored raw output to memories (extraction) or to a stage's
//! journaled change (post-processing), shared by every lane, and `memsift replay` over it.
//!
//! Extraction answers run the pure processor (parse, validate, fuzzy-dedupe), then the vector
//! stage (embed the survivors, drop those within cosine 0.92 of the user's nearest memories or of
//! an earlier item), then one store transaction. Post-processing answers go to the stage that
//! planned them. Nothing here decides when to apply: the pipeline's drain does.
//!
//! An extraction answer whose JSON was cut off, whatever its stop reason, keeps every element
//! that closed, and its write also plans the continuation that asks for the rest of its chunk
//! ([`crate::context::ContinuationPlanner`]), in the same transaction.
//!
//! Embedding is most of an apply's time, and a forward pass over many texts costs much less per
//! text than one per answer, so the drain calls [`embed_ahead`] on each page of answers first:
//! one embedding call for every item that could survive, whose vectors the applies then find in
//! [`crate::embedding::Vectors`]' recent vectors. The applies still run one by one, in order,
//! against the store as each one left it, so what is stored is what applying them alone stores.

use std::collections::HashMap;

use anyhow::Context;
use memsift_core::status::{Purpose, RequestStatus};
use memsift_core::{MemoryId, RequestId, UserId};
use memsift_processor::{ProcessInput, ProcessOutput, StopReason, VECTOR_DUPLICATE_THRESHOLD, candidate_keys, process};
use memsift_store::{ApplyInput, ApplyOutcome, ContinuationPlan, ItemEmbeddings, StoredOutput};
use serde::Serialize;

use crate::timings::{Phase, timed};

use crate::context::{Applied, ApplyContext, CutAnswer};
use crate::embedding::EmbedPurpose;

/// Nearest stored memories compared per item in the vector stage; only the best one decides.
const VECTOR_NEIGHBOURS: usize = 5;

/// The one path from a stored raw output to memories, shared by every lane: parse, validate and
/// fuzzy-dedupe (pure), then embed the survivors and drop those within cosine 0.92 of the user's
/// exact nearest memories or of an earlier item, then write them with their vectors exactly once.
pub async fn apply_request_output(ctx: &ApplyContext, request_id: RequestId) -> anyhow::Result<Applied> {
    let stored = {
        let _reads = timed(Phase::Reads);
        ctx.store.requests().stored_output(request_id).await?
    };
    apply_stored_output(ctx, stored).await
}

/// [`apply_request_output`] for an answer already read (by [`embed_ahead`]): the store's apply
/// transaction, not this read, decides whether it is still unapplied.
pub async fn apply_stored_output(ctx: &ApplyContext, stored: StoredOutput) -> anyhow::Result<Applied> {
    let request_id = stored.request_id;
    if stored.purpose != Purpose::Extraction {
        return crate::stages::apply_stage_answer(ctx, stored).await;
    }
    let mut prepared = prepare_output(ctx, stored, false).await?;
    prepared.continuation = plan_rest_of_chunk(ctx, &prepared).await?;
    note_continuation_on_cut_drops(&mut prepared);
    // Counted only when this write lands: an answer another worker applied first is that
    // worker's work, and its drops are in its summary, not this one's.
    let n_dropped = prepared.output.dropped.len() as u64;
    let mut applied = Applied::default();
    match write_output(ctx, prepared, None).await? {
        ApplyOutcome::Applied {
            memory_ids,
            n_duplicates_at_write,
            n_erased_at_write,
            segment_extracted,
            ..
        } => {
            applied.n_memories = memory_ids.len() as u64;
            applied.n_items_dropped = n_dropped + n_duplicates_at_write + n_erased_at_write;
            applied.n_segments_extracted = u64::from(segment_extracted);
        }
        ApplyOutcome::AlreadyApplied => {
            tracing::info!(%request_id, "Request was already applied; nothing written.");
        }
    }
    Ok(applied)
}

/// A stored output run through today's rules, ready to write.
struct PreparedOutput {
    stored: memsift_store::StoredOutput,
    output: ProcessOutput,
    embeddings: Option<ItemEmbeddings>,
    /// The id each item is written under, chosen before the write so a continuation can name it.
    item_ids: Vec<MemoryId>,
    /// What becomes of the rest of the chunk when the answer was cut off.
    continuation: ContinuationPlan,
}

/// For an answer whose JSON was cut off (whatever the stop reason) and is still to be applied:
/// the continuation that asks for the rest of its chunk, or why there is none.
async fn plan_rest_of_chunk(ctx: &ApplyContext, prepared: &PreparedOutput) -> anyhow::Result<ContinuationPlan> {
    let stored = &prepared.stored;
    if !prepared.output.cut_off || stored.status != RequestStatus::Succeeded {
        return Ok(ContinuationPlan::Complete);
    }
    tracing::info!(
        request_id = %stored.request_id,
        stop_reason = stored.stop_reason.as_deref().unwrap_or("none"),
        n_salvaged = prepared.output.items.len(),
        "The answer's JSON was cut off; its closed items are kept and the rest of its chunk is asked for again."
    );
    let Some(planner) = &ctx.continuations else {
        return Ok(ContinuationPlan::NotContinued(
            "the answer was cut off; nothing here plans continuations, so the rest of its chunk is not extracted"
                .to_owned(),
        ));
    };
    let cut = CutAnswer {
        stored,
        output: &prepared.output,
        item_ids: &prepared.item_ids,
    };
    planner.plan_continuation(cut).await
}

/// Says on the dropped partial element where the rest of its chunk went, for `memsift show`.
fn note_continuation_on_cut_drops(prepared: &mut PreparedOutput) {
    let note = match &prepared.continuation {
        ContinuationPlan::Complete => return,
        ContinuationPlan::Continue(request) => format!("the rest of the chunk goes to request {}", request.id),
        ContinuationPlan::NotContinued(reason) => reason.clone(),
    };
    for drop in &mut prepared.output.dropped {
        if drop.reason == memsift_processor::DropReason::Truncated {
            let detail = drop.detail.take().unwrap_or_default();
            drop.detail = Some(format!("{detail}; {note}"));
        }
    }
}

/// Parses, validates and dedupes a stored raw output against the user's memories as they are now
/// (fuzzy, then vectors); writes nothing.
async fn prepare_output(ctx: &ApplyContext, stored: StoredOutput, replay: bool) -> anyhow::Result<PreparedOutput> {
    let known = KnownKeys {
        store: &ctx.store,
        archived_too: replay,
    };
    let mut output = process_stored(&stored, Some(known)).await?;
    let embeddings = vector_stage(ctx, stored.user_id, &mut output).await?;
    let item_ids = output.items.iter().map(|_| MemoryId::new_v7()).collect();
    Ok(PreparedOutput {
        stored,
        output,
        embeddings,
        item_ids,
        continuation: ContinuationPlan::Complete,
    })
}

/// Where the exact stage against the store reads the user's keys.
struct KnownKeys<'a> {
    store: &'a memsift_store::Store,
    /// Archived memories' keys too: a replay must not bring back a fact that consolidation or an
    /// admin retired.
    archived_too: bool,
}

/// The pure stages (parse, validate, fuzzy dedupe against the user's keys in `known` and the
/// request's known memories) over a stored output, on a blocking thread. Of the user's keys only
/// those the answer's items could match are read: reading every key made each apply cost in
/// proportion to the memories the user already had.
async fn process_stored(stored: &StoredOutput, known: Option<KnownKeys<'_>>) -> anyhow::Result<ProcessOutput> {
    let request_id = stored.request_id;
    let raw_output = stored
        .raw_output
        .clone()
        .with_context(|| format!("request {request_id} has no output yet"))?;
    let mut input = ProcessInput {
        // Set on the blocking thread below, which owns the text.
        raw_text: "",
        stop_reason: stored.stop_reason.as_deref().map(|reason| match reason {
            "end_turn" | "stop" => StopReason::EndTurn,
            "max_tokens" | "length" => StopReason::MaxTokens,
            _ => StopReason::Other,
        }),
        ..ProcessInput::default()
    };
    for (label, message_id) in &stored.context.turns {
        input.turns.insert(label.clone(), *message_id);
    }
    input.assistant_turns = stored.context.assistant_turns.clone();
    for (short, (id, text)) in &stored.context.memories {
        input.known_texts.push((*id, text.clone()));
        input.context.insert(short.clone(), (*id, text.clone()));
    }
    if let Some(known) = known {
        let candidates = {
            let _processing = timed(Phase::Processing);
            let (raw_text, probe) = (raw_output.clone(), input.clone());
            tokio::task::spawn_blocking(move || {
                candidate_keys(&ProcessInput {
                    raw_text: &raw_text,
                    ..probe
                })
            })
            .await
            .context("reading the output's keys ended abnormally")?
        };
        let _reads = timed(Phase::Reads);
        input.existing_keys = known
            .store
            .memories()
            .dedupe_keys_among(stored.user_id, &candidates, known.archived_too)
            .await?;
    }
    let _processing = timed(Phase::Processing);
    // Parsing, repair and fuzzy dedupe are CPU work proportional to the output and the request's
    // context: off the task that serves the API and the watchdog, like chunking.
    let output = tokio::task::spawn_blocking(move || {
        process(&ProcessInput {
            raw_text: &raw_output,
            ..input
        })
    })
    .await
    .context("processing the output ended abnormally")?;
    Ok(output)
}

/// Reads a page of recorded answers and embeds, in one call, the texts of every extraction item
/// that survives the pure stages, so each apply finds its vectors already made; returns the
/// answers read, for the applies to use. Only a warm-up: an answer it cannot read or process,
/// or a failed embedding, is left to its own apply to meet and report.
pub async fn embed_ahead(ctx: &ApplyContext, request_ids: &[RequestId]) -> HashMap<RequestId, StoredOutput> {
    let mut read = HashMap::new();
    let mut texts = Vec::new();
    for &request_id in request_ids {
        let stored = {
            let _reads = timed(Phase::Reads);
            ctx.store.requests().stored_output(request_id).await
        };
        let Ok(stored) = stored else { continue };
        if stored.purpose == Purpose::Extraction && stored.raw_output.is_some() {
            // No dedupe keys: an item they would drop is embedded in vain, which costs less than
            // reading a user's keys once more per answer.
            if let Ok(output) = process_stored(&stored, None).await {
                texts.extend(output.items.into_iter().map(|item| item.text));
            }
        }
        read.insert(request_id, stored);
    }
    let _embedding = timed(Phase::EmbedAnswers);
    if let Err(error) = ctx.vectors.embed(texts, EmbedPurpose::Item).await {
        tracing::debug!(error = %format!("{error:#}"), "Embedding a page of answers ahead failed; each apply embeds its own.");
    }
    read
}

/// An item that survived processing, as the store writes it.
fn new_memory(id: MemoryId, item: memsift_processor::ValidItem) -> memsift_store::NewMemory {
    memsift_store::NewMemory {
        id,
        text: item.text,
        dedupe_key: item.dedupe_key,
        confidence: item.confidence,
        happens_at: item.happens_at,
        expires_at: item.expires_at,
        sensitive: item.sensitive,
        temporal: item.temporal,
        hinted_memory_ids: item.consolidates_memory_ids,
        related_memory_ids: item.related_memory_ids,
        linking_hints: item.linking_hints,
        relationship_type: item.relationship_type,
        entities: item.entities,
        evidence: item.evidence,
    }
}

/// The stored memory a dropped duplicate points at, with the turns it cited; `None` for any other
/// drop (nothing to pass on).
fn duplicate_evidence(drop: &memsift_processor::DroppedItem) -> Option<memsift_store::DuplicateEvidence> {
    use memsift_store::DuplicateOf;
    if drop.evidence.is_empty() {
        return None;
    }
    let of = match (drop.duplicate_of, drop.reason) {
        (Some(memory_id), _) => DuplicateOf::Memory(memory_id),
        (None, memsift_processor::DropReason::DuplicateOfExisting) => {
            DuplicateOf::Key(memsift_core::text::dedupe_key(drop.text.as_deref()?))
        }
        (None, _) => return None,
    };
    Some(memsift_store::DuplicateEvidence {
        of,
        evidence: drop.evidence.clone(),
    })
}

/// Writes a prepared output: exactly once on the normal path, journaled when `replay` says why.
async fn write_output(
    ctx: &ApplyContext,
    prepared: PreparedOutput,
    replay: Option<String>,
) -> anyhow::Result<ApplyOutcome> {
    let PreparedOutput {
        stored,
        output,
        embeddings,
        item_ids,
        continuation,
    } = prepared;
    let apply = ApplyInput {
        request_id: stored.request_id,
        user_id: stored.user_id,
        segment_id: stored.segment_id,
        prompt_version: stored.prompt_version.clone(),
        model: stored.model.clone(),
        n_dropped: output.dropped.len() as i64,
        drops: output.dropped.clone(),
        duplicate_evidence: output.dropped.iter().filter_map(duplicate_evidence).collect(),
        items: item_ids
            .into_iter()
            .zip(output.items)
            .map(|(id, item)| new_memory(id, item))
            .collect(),
        embeddings,
        continuation,
        replay,
        now: ctx.clock.now(),
    };
    let outcome = {
        let _writes = timed(Phase::Writes);
        ctx.store.memories().apply(&apply).await?
    };
    if let (
        ApplyOutcome::Applied {
            memory_ids,
            item_positions,
            memory_version,
            ..
        },
        Some(embeddings),
    ) = (&outcome, &apply.embeddings)
    {
        let written: Vec<(MemoryId, &[f32])> = memory_ids
            .iter()
            .zip(item_positions)
            .map(|(&id, &position)| (id, embeddings.vectors[position].as_slice()))
            .collect();
        ctx.vectors.record_embeddings(stored.user_id, &written, *memory_version);
    }
    Ok(outcome)
}

/// What replaying one request under today's rules found, and wrote unless it was a dry run.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ReplayReport {
    /// The request.
    pub request_id: String,
    /// Items today's rules accept that are not stored yet (each written unless `dry_run`).
    pub new_memories: Vec<String>,
    /// Items dropped today, by reason (stored ones show up as duplicates of themselves).
    pub dropped_by_reason: std::collections::BTreeMap<String, u64>,
    /// The journal row, when something was written.
    pub operation_id: Option<String>,
    /// Nothing was written.
    pub dry_run: bool,
}

/// Re-runs parsing, validation and dedupe over an applied request's stored raw output with no
/// provider call, writes only what today's rules accept and the store does not hold yet, and
/// journals it in `operations`. A dry run reports the same without writing.
pub async fn replay_request(ctx: &ApplyContext, request_id: RequestId, dry_run: bool) -> anyhow::Result<ReplayReport> {
    let stored = ctx.store.requests().stored_output(request_id).await?;
    let prepared = prepare_output(ctx, stored, true).await?;
    if prepared.stored.status != RequestStatus::Applied {
        anyhow::bail!(
            "request {request_id} is `{}`: only applied requests are replayed; `memsift run` applies the rest",
            prepared.stored.status
        );
    }
    let mut report = ReplayReport {
        request_id: request_id.to_string(),
        new_memories: prepared.output.items.iter().map(|item| item.text.clone()).collect(),
        dry_run,
        ..ReplayReport::default()
    };
    for drop in &prepared.output.dropped {
        *report
            .dropped_by_reason
            .entry(drop.reason.as_str().to_owned())
            .or_default() += 1;
    }
    if dry_run || prepared.output.items.is_empty() {
        return Ok(report);
    }
    let reason = format!(
        "replay of request {request_id} under today's rules (prompt {})",
        prepared.stored.prompt_version
    );
    if let ApplyOutcome::Applied {
        memory_ids,
        item_positions,
        operation_id,
        ..
    } = write_output(ctx, prepared, Some(reason)).await?
    {
        // A concurrent writer may have stored some items since they were prepared.
        let written: std::collections::HashSet<usize> = item_positions.iter().copied().collect();
        report.new_memories = std::mem::take(&mut report.new_memories)
            .into_iter()
            .enumerate()
            .filter(|(position, _)| written.contains(position))
            .map(|(_, text)| text)
            .collect();
        debug_assert_eq!(report.new_memories.len(), memory_ids.len());
        report.operation_id = operation_id.map(|id| id.to_string());
    }
    Ok(report)
}

/// Embeds the items that survived the pure stages and drops vector duplicates (dedupe against the
/// store); returns the survivors' vectors for the write. Nothing to embed, nothing to compare.
async fn vector_stage(
    ctx: &ApplyContext,
    user_id: UserId,
    output: &mut ProcessOutput,
) -> anyhow::Result<Option<ItemEmbeddings>> {
    if output.items.is_empty() {
        return Ok(None);
    }
    let vectors = {
        let _embedding = timed(Phase::EmbedAnswers);
        ctx.vectors
            .embed(
                output.items.iter().map(|item| item.text.clone()).collect(),
                EmbedPurpose::Item,
            )
            .await?
    };
    let _index = timed(Phase::Index);
    let index = ctx.vectors.fresh_index(&ctx.store, user_id).await?;
    let neighbours = vectors
        .iter()
        .map(|vector| Ok(index.nearest(vector, VECTOR_NEIGHBOURS)?))
        .collect::<anyhow::Result<Vec<Vec<(MemoryId, f32)>>>>()?;
    let mut by_response_index: HashMap<usize, Vec<f32>> = output
        .item_indices
        .iter()
        .copied()
        .zip(vectors.iter().cloned())
        .collect();
    output.apply_vector_stage(&vectors, &neighbours, VECTOR_DUPLICATE_THRESHOLD);
    let kept = output
        .item_indices
        .iter()
        .map(|index| by_response_index.remove(index))
        .collect::<Option<Vec<_>>>()
        .context("the vector stage kept an item it was not given")?;
    Ok(Some(ItemEmbeddings {
        model_id: index.model_id().to_owned(),
        vectors: kept,
    }))
}
