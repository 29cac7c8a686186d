//! Running the heuristic and immediate lanes: each planned request answered and recorded, a paused
//! lane's requests held back unspent.

use std::sync::Arc;

use anyhow::Context;
use chrono::{DateTime, Duration, Utc};
use memsift_core::status::{Lane, Purpose, RequestStatus};
use memsift_core::transcript::parse_turns;
use memsift_core::{RequestId, SegmentId};
use memsift_llm::{BreakerState, FaultClass, LaneKey, OpenCause, Permit};
use memsift_routing::{ExecutionOutcome, ExecutionRequest, ExecutionStrategy};
use memsift_store::{RequestUsage, WorkRequest};

use crate::app::App;

use super::{CLAIM_BATCH, StepReport};

/// Executes planned requests of the heuristic or immediate lane (only `segment`'s when given) and
/// records their answers.
pub(super) async fn execute_lane(
    app: &App,
    lane: Lane,
    segment: Option<SegmentId>,
    report: &mut StepReport,
) -> anyhow::Result<()> {
    let lease = app.config.claim_lease();
    let claimed = app
        .store
        .requests()
        .claim_requests_of(segment, lane, &app.worker_id, app.clock.now(), lease, CLAIM_BATCH)
        .await?;
    for request in claimed {
        let llm = match app.resolved_llm(&request.config_key) {
            Ok(llm) => llm,
            // Planned under a configuration that no longer has this key: the request cannot run
            // as planned. It fails as an attempt, so re-planning (or an admin) picks it up.
            Err(error) => {
                let error = format!("{error:#}; the request was planned under another configuration");
                app.store
                    .requests()
                    .record_failure(request.id, RequestStatus::Errored, &error, app.clock.now())
                    .await?;
                continue;
            }
        };
        let system_prompt = request.request_body.system.as_str();
        let user_message = request.request_body.user_message.as_str();
        let turns = parse_turns(user_message);
        // Sent with the output allowance its budget reservation priced, when it has one.
        let capped = llm.with_output_cap(request.max_output_tokens);
        let execution = ExecutionRequest {
            request_id: request.id,
            purpose: request.purpose,
            system_prompt,
            user_message,
            turns: &turns,
            llm: &capped,
        };
        let lane_key = (lane == Lane::Immediate).then(|| LaneKey::of(Lane::Immediate, &llm));
        if let Some(lane_key) = &lane_key
            && let Permit::Blocked(cause) = app.health.acquire(lane_key, app.clock.now())
            && cause.setting_fault
        {
            // Paused for an operator: the request waits for the lane's next probe, unspent.
            hold_request(app, request.id, lane_key, &cause).await?;
            report.n_requests_held += 1;
            continue;
        }
        let outcome = match lane {
            Lane::Heuristic => answer_offline(app, &execution).await?,
            _ => app.immediate.execute(&execution).await,
        };
        record_outcome(app, &request, lane, lane_key.as_ref(), outcome, report).await?;
    }
    Ok(())
}

/// Records what executing `request` on `lane` came to: the answer, or a fault that holds it
/// (unspent) or spends its attempt, feeding the lane's breaker on the way.
async fn record_outcome(
    app: &App,
    request: &WorkRequest,
    lane: Lane,
    lane_key: Option<&LaneKey>,
    outcome: ExecutionOutcome,
    report: &mut StepReport,
) -> anyhow::Result<()> {
    let now = app.clock.now();
    if let (Some(lane_key), Some(signal)) = (lane_key, outcome.health_signal()) {
        app.health.record(lane_key, &signal, now);
    }
    match outcome {
        ExecutionOutcome::Completed {
            raw_output,
            stop_reason,
            usage,
            cost_usd,
            ..
        } => {
            let usage = RequestUsage {
                input_tokens: usage.input_tokens as i64,
                output_tokens: usage.output_tokens as i64,
                cache_creation_tokens: (usage.cache_creation_5m_tokens + usage.cache_creation_1h_tokens) as i64,
                cache_read_tokens: usage.cache_read_tokens as i64,
                cost_usd,
            };
            record_answer(
                app,
                request.id,
                &raw_output,
                stop_reason.as_deref(),
                &usage,
                now,
                report,
            )
            .await?;
        }
        ExecutionOutcome::Failed {
            class: FaultClass::Setting,
            error,
            fix,
        } if lane_key.is_some() => {
            // The lane's breaker opened on this answer: the request waits, unspent.
            let lane_key = lane_key.expect("matched Some");
            let cause = match app.health.state(lane_key, now) {
                BreakerState::Open { cause, .. } | BreakerState::HalfOpen { cause, .. } => cause,
                BreakerState::Closed { .. } => OpenCause {
                    setting_fault: true,
                    reason: error,
                    fix,
                    opened_at: now,
                    cool_down: app.health.policy().cool_down,
                },
            };
            hold_request(app, request.id, lane_key, &cause).await?;
            report.n_requests_held += 1;
        }
        ExecutionOutcome::Failed {
            class: FaultClass::Outage | FaultClass::Retry,
            error,
            ..
        } if lane_key.is_some() => {
            // The provider is unwell or throttling, which says nothing about the request: it waits, unspent,
            // for the lane's next probe (the outage was counted on the breaker above, which
            // opens after a few and then pauses the lane or moves its work to another way).
            let lane_key = lane_key.expect("matched Some");
            let not_before = match app.health.state(lane_key, now) {
                BreakerState::Open { until, .. } => until,
                _ => now + app.health.policy().cool_down,
            };
            let reason = format!("lane {} unwell: {error}; waiting, no attempt spent", lane_key.name());
            app.store.lanes().hold_request(request.id, &reason, not_before).await?;
            report.n_requests_held += 1;
        }
        ExecutionOutcome::Failed { error, class, .. } => {
            record_failed_attempt(app, request, &error, class, now, report).await?;
        }
        ExecutionOutcome::Deferred => {
            // Only the batch lane defers; anything else is a bug in a strategy. The attempt
            // fails with the reason instead of stopping the lane.
            app.store
                .requests()
                .record_failure(
                    request.id,
                    RequestStatus::Errored,
                    &format!("lane {lane} deferred the request; only the batch lane defers"),
                    now,
                )
                .await?;
        }
    }
    Ok(())
}

/// Stores an answer; one that cannot be stored fails its attempt with the reason, so the other
/// requests go on, unless the store's error is transient.
async fn record_answer(
    app: &App,
    request_id: RequestId,
    raw_output: &str,
    stop_reason: Option<&str>,
    usage: &RequestUsage,
    now: DateTime<Utc>,
    report: &mut StepReport,
) -> anyhow::Result<()> {
    match app
        .store
        .requests()
        .record_answer(request_id, raw_output, stop_reason, usage, now)
        .await
    {
        Ok(_) => report.n_requests_executed += 1,
        Err(error) if error.is_transient() => return Err(error.into()),
        // The answer itself cannot be stored: the attempt fails with the reason, and
        // the other requests go on.
        Err(error) => {
            tracing::warn!(request_id = %request_id, error = %error, "An answer could not be stored; the attempt is marked errored.");
            app.store
                .requests()
                .record_failure(
                    request_id,
                    RequestStatus::Errored,
                    &format!("the answer could not be stored: {error}"),
                    now,
                )
                .await?;
        }
    }
    Ok(())
}

/// Records a failed call that did not pause or hold its lane (a request refused as it is, or a
/// provider fault off a provider lane): refused, it goes dead at once, with its extraction segment.
async fn record_failed_attempt(
    app: &App,
    request: &WorkRequest,
    error: &str,
    class: FaultClass,
    now: DateTime<Utc>,
    report: &mut StepReport,
) -> anyhow::Result<()> {
    // An outage or a throttle is worth another attempt; a request the provider refused
    // as it is will be refused again.
    let retryable = class != FaultClass::Request;
    let status = if retryable {
        RequestStatus::Errored
    } else {
        RequestStatus::Dead
    };
    app.store
        .requests()
        .record_failure(request.id, status, error, now)
        .await?;
    if !retryable {
        // Refused as it is: out of attempts now, like one re-planning finds spent.
        report.n_requests_dead += 1;
    }
    if let (false, Some(segment_id), Purpose::Extraction) = (retryable, request.segment_id, request.purpose) {
        // Retrying cannot help (an invalid request, bad credentials): the segment is
        // dead now, with the reason, for an admin to fix and retry by hand.
        let out_of_attempts = 0;
        app.store
            .segments()
            .fail_segment(segment_id, error, out_of_attempts, Duration::zero(), now)
            .await?;
    }
    Ok(())
}

/// The heuristic lane's answer, computed on a blocking thread: its rules read every turn, which
/// for a megabyte of text is CPU time the task serving the API and the watchdog cannot spare.
async fn answer_offline(app: &App, execution: &ExecutionRequest<'_>) -> anyhow::Result<ExecutionOutcome> {
    let heuristic = Arc::clone(&app.heuristic);
    let (request_id, purpose) = (execution.request_id, execution.purpose);
    let system_prompt = execution.system_prompt.to_owned();
    let user_message = execution.user_message.to_owned();
    let turns = execution.turns.to_vec();
    let llm = execution.llm.clone();
    tokio::task::spawn_blocking(move || {
        heuristic.answer(&ExecutionRequest {
            request_id,
            purpose,
            system_prompt: &system_prompt,
            user_message: &user_message,
            turns: &turns,
            llm: &llm,
        })
    })
    .await
    .context("the heuristic lane ended abnormally")
}

/// Holds a claimed request back while its lane is paused, until the lane's next probe.
async fn hold_request(app: &App, request_id: RequestId, lane_key: &LaneKey, cause: &OpenCause) -> anyhow::Result<()> {
    let now = app.clock.now();
    let not_before = match app.health.state(lane_key, now) {
        BreakerState::Open { until, .. } => until,
        _ => now + cause.cool_down,
    };
    let reason = format!("lane {} paused: {}", lane_key.name(), cause.describe());
    app.store.lanes().hold_request(request_id, &reason, not_before).await?;
    Ok(())
}
