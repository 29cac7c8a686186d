//! The extraction pipeline: claim closed segments, run their lane, and apply each output once.
//!
//! Every lane ends in [`apply_request_output`], the single place that turns a stored raw output
//! into memories: it reads the request's context snapshot, runs the pure processor, and hands the
//! result to the store's one-transaction apply. Background work is driven step by step
//! ([`run_once`] returns what it did), so tests and `run --until-idle` need no sleeps.

use anyhow::Context;
use chrono::Duration;
use memsift_core::contract::Turn;
use memsift_core::status::{Lane, Purpose};
use memsift_core::{MessageId, RequestId};
use memsift_processor::{ProcessInput, StopReason, process};
use memsift_store::{ApplyInput, ApplyOutcome, ClaimedSegment, NewRequest};
use serde::Serialize;
use serde_json::{Value, json};

use crate::app::App;

/// How many segments one step claims.
const CLAIM_BATCH: i64 = 32;

/// What one step of the pipeline did.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct StepReport {
    /// Open segments closed by the idle timeout.
    pub n_segments_closed: u64,
    /// Segments claimed.
    pub n_segments_claimed: u64,
    /// Segments that became `extracted`.
    pub n_segments_extracted: u64,
    /// Segments whose attempt failed.
    pub n_segments_failed: u64,
    /// Memories written.
    pub n_memories: u64,
    /// Items dropped by the processor or at write.
    pub n_items_dropped: u64,
}

impl StepReport {
    /// Whether the step found nothing to do.
    pub fn is_idle(&self) -> bool {
        self.n_segments_closed == 0 && self.n_segments_claimed == 0
    }

    fn add(&mut self, other: &StepReport) {
        self.n_segments_closed += other.n_segments_closed;
        self.n_segments_claimed += other.n_segments_claimed;
        self.n_segments_extracted += other.n_segments_extracted;
        self.n_segments_failed += other.n_segments_failed;
        self.n_memories += other.n_memories;
        self.n_items_dropped += other.n_items_dropped;
    }
}

/// One step: close idle segments, then claim and extract a batch of closed ones.
pub async fn run_once(app: &App) -> anyhow::Result<StepReport> {
    let now = app.clock.now();
    let mut report = StepReport {
        n_segments_closed: app.store.close_idle_segments(now, app.config.idle_timeout()).await?,
        ..StepReport::default()
    };
    let lease = Duration::seconds(app.config.extraction.claim_lease_secs as i64);
    let claimed = app
        .store
        .claim_segments(&app.worker_id, now, lease, CLAIM_BATCH)
        .await?;
    report.n_segments_claimed = claimed.len() as u64;
    for segment in claimed {
        match extract_segment(app, &segment).await {
            Ok(segment_report) => report.add(&segment_report),
            Err(error) => {
                report.n_segments_failed += 1;
                tracing::warn!(segment_id = %segment.id, attempt = segment.attempt, error = %format!("{error:#}"), "Extraction attempt failed.");
                // Later attempts wait longer: 5, 10, 15 … minutes.
                let retry_after = Duration::minutes(5 * segment.attempt);
                app.store
                    .fail_segment(
                        segment.id,
                        &format!("{error:#}"),
                        app.config.extraction.max_attempts as i64,
                        retry_after,
                        app.clock.now(),
                    )
                    .await?;
            }
        }
    }
    Ok(report)
}

/// Runs steps until one finds nothing to do; returns the totals.
pub async fn run_until_idle(app: &App) -> anyhow::Result<StepReport> {
    let mut total = StepReport::default();
    loop {
        let step = run_once(app).await?;
        if step.is_idle() {
            return Ok(total);
        }
        total.add(&step);
    }
}

/// Extracts one claimed segment through its lane and applies the result.
pub async fn extract_segment(app: &App, segment: &ClaimedSegment) -> anyhow::Result<StepReport> {
    let tier = app.config.billing.default_tier.clone();
    let config_key = format!("{}_{tier}", Purpose::Extraction.as_str());
    app.config.llm_for(Purpose::Extraction, &tier)?;
    let segment_turns = app.store.segment_turns(segment.id).await?;
    let turns: Vec<Turn> = segment_turns
        .iter()
        .map(|segment_turn| segment_turn.turn.clone())
        .collect();
    let turn_map: serde_json::Map<String, Value> = segment_turns
        .iter()
        .map(|segment_turn| {
            (
                segment_turn.turn.label.clone(),
                json!(segment_turn.message_id.to_string()),
            )
        })
        .collect();
    let request = NewRequest {
        id: RequestId::new_v7(),
        purpose: Purpose::Extraction,
        user_id: segment.user_id,
        segment_id: Some(segment.id),
        chunk_index: 0,
        attempt: segment.attempt,
        lane: Lane::Heuristic,
        config_key,
        provider: "heuristic".to_owned(),
        model: None,
        prompt_version: memsift_heuristic::RULES_VERSION.to_owned(),
        context: json!({ "turns": turn_map, "memories": {} }),
    };
    let now = app.clock.now();
    app.store
        .plan_segment_requests(segment.id, std::slice::from_ref(&request), now)
        .await?;
    let raw_output = memsift_heuristic::extract_json(&turns);
    app.store
        .record_output(request.id, &raw_output, Some("end_turn"), now)
        .await?;
    apply_request_output(app, request.id).await
}

/// The one path from a stored raw output to memories, shared by every lane.
pub async fn apply_request_output(app: &App, request_id: RequestId) -> anyhow::Result<StepReport> {
    let stored = app.store.stored_output(request_id).await?;
    let raw_output = stored
        .raw_output
        .as_deref()
        .with_context(|| format!("request {request_id} has no output yet"))?;
    let mut input = ProcessInput {
        raw_text: raw_output,
        stop_reason: stored.stop_reason.as_deref().map(|reason| match reason {
            "end_turn" | "stop" => StopReason::EndTurn,
            "max_tokens" | "length" => StopReason::MaxTokens,
            _ => StopReason::Other,
        }),
        existing_keys: app.store.active_dedupe_keys(stored.user_id).await?,
        ..ProcessInput::default()
    };
    if let Some(turns) = stored.context.get("turns").and_then(Value::as_object) {
        for (label, message_id) in turns {
            let message_id = message_id.as_str().and_then(|id| MessageId::parse(id).ok());
            if let Some(message_id) = message_id {
                input.turns.insert(label.clone(), message_id);
            }
        }
    }
    let output = process(&input);
    let n_dropped = output.dropped.len() as i64;
    let apply = ApplyInput {
        request_id,
        user_id: stored.user_id,
        segment_id: stored.segment_id,
        prompt_version: stored.prompt_version.clone(),
        model: stored.model.clone(),
        items: output.items,
        drops: serde_json::to_value(&output.dropped)?,
        n_dropped,
        now: app.clock.now(),
    };
    let mut report = StepReport {
        n_items_dropped: n_dropped as u64,
        ..StepReport::default()
    };
    match app.store.apply(&apply).await? {
        ApplyOutcome::Applied {
            memory_ids,
            n_duplicates_at_write,
            segment_extracted,
        } => {
            report.n_memories = memory_ids.len() as u64;
            report.n_items_dropped += n_duplicates_at_write;
            report.n_segments_extracted = u64::from(segment_extracted);
        }
        ApplyOutcome::AlreadyApplied => {
            tracing::info!(%request_id, "Request was already applied; nothing written.");
        }
    }
    Ok(report)
}
