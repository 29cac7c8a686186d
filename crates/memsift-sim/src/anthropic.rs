//! Anthropic's wire format: `POST /v1/messages` and the Message Batches endpoints.

use std::collections::HashSet;

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use rand::seq::SliceRandom;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::limits;
use crate::records::{AnthropicBatch, Counts, ProcessingStatus};
use crate::state::{
    Generated, GenerationRequest, PromptCache, Provider, SharedState, State as SimState, anthropic_error, invalid,
    lost_create_response, not_found,
};

/// Reads a Messages body into what the responder needs; `Err` is the 400 message.
pub(crate) fn parse_params(params: &Value) -> Result<GenerationRequest, String> {
    let model = params
        .get("model")
        .and_then(Value::as_str)
        .ok_or("model: Field required")?;
    let max_tokens = params
        .get("max_tokens")
        .and_then(Value::as_u64)
        .ok_or("max_tokens: Field required")?;
    if max_tokens < 1 {
        return Err("max_tokens: Input should be greater than or equal to 1".to_owned());
    }
    if params.get("stream").and_then(Value::as_bool) == Some(true) {
        return Err("stream: streaming is not supported by this simulator".to_owned());
    }
    let messages = params
        .get("messages")
        .and_then(Value::as_array)
        .filter(|messages| !messages.is_empty())
        .ok_or("messages: at least one message is required")?;
    let mut user_text = String::new();
    for message in messages {
        user_text.push_str(&content_text(message.get("content")));
        user_text.push('\n');
    }
    let (system, cache) = match params.get("system") {
        Some(Value::String(text)) => (text.clone(), PromptCache::Off),
        Some(Value::Array(blocks)) => {
            let text = blocks
                .iter()
                .filter_map(|block| block.get("text")?.as_str())
                .collect::<Vec<_>>()
                .join("\n");
            let cache = blocks
                .iter()
                .filter_map(|block| block.get("cache_control"))
                .next_back()
                .map_or(PromptCache::Off, |control| {
                    PromptCache::Marked(match control.get("ttl").and_then(Value::as_str) {
                        Some("1h") => chrono::Duration::hours(1),
                        _ => chrono::Duration::minutes(5),
                    })
                });
            (text, cache)
        }
        _ => (String::new(), PromptCache::Off),
    };
    Ok(GenerationRequest {
        model: model.to_owned(),
        system,
        cache,
        user_text,
        max_tokens: u32::try_from(max_tokens).unwrap_or(u32::MAX),
    })
}

/// A message's content: a string, or text blocks.
fn content_text(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(text)) => text.clone(),
        Some(Value::Array(blocks)) => blocks
            .iter()
            .filter_map(|block| block.get("text")?.as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

fn message_json(state: &mut SimState, model: &str, generated: &Generated, service_tier: &str) -> Value {
    json!({
        "id": state.id("msg_", 24),
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [{"type": "text", "text": generated.text}],
        "stop_reason": if generated.truncated { "max_tokens" } else { "end_turn" },
        "stop_sequence": null,
        "usage": {
            "input_tokens": generated.input_tokens,
            "output_tokens": generated.output_tokens,
            "cache_creation_input_tokens": generated.cache_write_5m + generated.cache_write_1h,
            "cache_read_input_tokens": generated.cache_read,
            "cache_creation": {
                "ephemeral_5m_input_tokens": generated.cache_write_5m,
                "ephemeral_1h_input_tokens": generated.cache_write_1h,
            },
            "service_tier": service_tier,
        },
    })
}

fn parse_body(body: &Bytes) -> Result<Value, Response> {
    serde_json::from_slice(body)
        .map_err(|error| invalid(Provider::Anthropic, &format!("body is not valid JSON: {error}")))
}

/// `POST /v1/messages`.
pub(crate) async fn create_message(State(shared): State<SharedState>, headers: HeaderMap, body: Bytes) -> Response {
    if let Err(response) = shared.gate("messages", Provider::Anthropic, &headers).await {
        return response;
    }
    if let Err(response) = shared.check_size(Provider::Anthropic, body.len()) {
        return response;
    }
    let params = match parse_body(&body) {
        Ok(params) => params,
        Err(response) => return response,
    };
    let request = match parse_params(&params) {
        Ok(request) => request,
        Err(message) => return invalid(Provider::Anthropic, &message),
    };
    let refused = limits::check(&shared.config.prices, &request, Some(u64::from(request.max_tokens)));
    let now = shared.now();
    let mut state = shared.lock();
    if let Err(refusal) = refused {
        limits::record(&mut state, &refusal);
        return invalid(Provider::Anthropic, &refusal.anthropic_message());
    }
    match state.generate(&shared.config, now, &request) {
        Ok(generated) => Json(message_json(&mut state, &request.model, &generated, "standard")).into_response(),
        Err(error) => anthropic_error(
            axum::http::StatusCode::from_u16(error.status).unwrap_or(axum::http::StatusCode::INTERNAL_SERVER_ERROR),
            &error.kind,
            &error.message,
        ),
    }
}

fn valid_custom_id(id: &str) -> bool {
    (1..=64).contains(&id.len()) && id.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// `POST /v1/messages/batches`.
pub(crate) async fn create_batch(State(shared): State<SharedState>, headers: HeaderMap, body: Bytes) -> Response {
    if let Err(response) = shared
        .gate("anthropic.batches.create", Provider::Anthropic, &headers)
        .await
    {
        return response;
    }
    if let Err(response) = shared.check_size(Provider::Anthropic, body.len()) {
        return response;
    }
    let body = match parse_body(&body) {
        Ok(body) => body,
        Err(response) => return response,
    };
    let Some(requests) = body.get("requests").and_then(Value::as_array) else {
        return invalid(Provider::Anthropic, "requests: Field required");
    };
    if requests.is_empty() || requests.len() > 100_000 {
        return invalid(
            Provider::Anthropic,
            "requests: List should have at least 1 item and at most 100000 items",
        );
    }
    let mut seen = HashSet::new();
    let mut stored = Vec::with_capacity(requests.len());
    for (index, request) in requests.iter().enumerate() {
        let custom_id = request.get("custom_id").and_then(Value::as_str).unwrap_or_default();
        if custom_id.len() > 64 {
            return invalid(
                Provider::Anthropic,
                &format!("requests.{index}.custom_id: String should have at most 64 characters"),
            );
        }
        if !valid_custom_id(custom_id) {
            return invalid(
                Provider::Anthropic,
                &format!("requests.{index}.custom_id: String should match pattern '^[a-zA-Z0-9_-]{{1,64}}$'"),
            );
        }
        if !seen.insert(custom_id.to_owned()) {
            return invalid(
                Provider::Anthropic,
                &format!(
                    "requests.{index}.custom_id: duplicate custom_id `{custom_id}`; custom_id must be unique within a batch"
                ),
            );
        }
        // Params are validated only when the batch runs, as the provider does: a bad one is an `errored` result.
        stored.push((
            custom_id.to_owned(),
            request.get("params").cloned().unwrap_or(Value::Null),
        ));
    }
    let now = shared.now();
    let latency =
        chrono::Duration::milliseconds(i64::try_from(shared.config.faults.processing_latency_ms).unwrap_or(i64::MAX));
    let batch_json = {
        let mut state = shared.lock();
        let batch = AnthropicBatch {
            id: state.id("msgbatch_", 24),
            status: ProcessingStatus::InProgress,
            created_at: now,
            expires_at: now + chrono::Duration::hours(24),
            ready_at: now + latency,
            ended_at: None,
            cancel_initiated_at: None,
            requests: stored,
            results: Vec::new(),
            counts: Counts::default(),
            not_found_remaining: shared.config.faults.not_found_after_create,
        };
        let batch_json = batch.to_json(&shared.base_url);
        state.anthropic_batches.push(batch);
        state.counters.creates += 1;
        batch_json
    };
    if let Some(mode) = shared.lose_create() {
        return lost_create_response(Provider::Anthropic, mode);
    }
    Json(batch_json).into_response()
}

/// Why a batch ends.
#[derive(Clone, Copy, PartialEq, Eq)]
enum EndCause {
    Finished,
    Canceled,
    Expired,
}

/// Moves a batch along on the sim's clock.
fn advance(shared: &SharedState, state: &mut SimState, index: usize, now: DateTime<Utc>) {
    let batch = &state.anthropic_batches[index];
    let cause = match batch.status {
        ProcessingStatus::Ended => return,
        // A provider stuck in processing: not even its own expiry ends the batch.
        _ if shared.config.faults.never_end => return,
        _ if now >= batch.expires_at => EndCause::Expired,
        ProcessingStatus::Canceling => EndCause::Canceled,
        ProcessingStatus::InProgress if now >= batch.ready_at => EndCause::Finished,
        ProcessingStatus::InProgress => return,
    };
    let requests = std::mem::take(&mut state.anthropic_batches[index].requests);
    let mut counts = Counts::default();
    let mut lines = Vec::with_capacity(requests.len());
    for (custom_id, params) in &requests {
        let result = result_for(shared, state, now, params, cause);
        match result["type"].as_str() {
            Some("succeeded") => counts.succeeded += 1,
            Some("errored") => counts.errored += 1,
            Some("canceled") => counts.canceled += 1,
            _ => counts.expired += 1,
        }
        lines.push(json!({"custom_id": custom_id, "result": result}).to_string());
    }
    lines.shuffle(&mut state.rng);
    let batch = &mut state.anthropic_batches[index];
    batch.requests = requests;
    batch.results = lines;
    batch.counts = counts;
    batch.status = ProcessingStatus::Ended;
    batch.ended_at = Some(now);
}

fn errored(kind: &str, message: &str) -> Value {
    json!({"type": "errored", "error": {"type": "error", "error": {"type": kind, "message": message}, "request_id": null}})
}

fn result_for(
    shared: &SharedState,
    state: &mut SimState,
    now: DateTime<Utc>,
    params: &Value,
    cause: EndCause,
) -> Value {
    let faults = &shared.config.faults;
    match cause {
        EndCause::Expired => return json!({"type": "expired"}),
        EndCause::Canceled => return json!({"type": "canceled"}),
        EndCause::Finished => {}
    }
    if state.roll(faults.request_errored_share) {
        state.count_fault("request_errored");
        return errored("api_error", "Internal server error");
    }
    if state.roll(faults.request_expired_share) {
        state.count_fault("request_expired");
        return json!({"type": "expired"});
    }
    if state.roll(faults.request_canceled_share) {
        state.count_fault("request_canceled");
        return json!({"type": "canceled"});
    }
    let request = match parse_params(params) {
        Ok(request) => request,
        Err(message) => return errored("invalid_request_error", &message),
    };
    // Checked when the batch runs, as the provider validates params: an errored result.
    if let Err(refusal) = limits::check(&shared.config.prices, &request, Some(u64::from(request.max_tokens))) {
        limits::record(state, &refusal);
        return errored("invalid_request_error", &refusal.anthropic_message());
    }
    match state.generate(&shared.config, now, &request) {
        Ok(generated) => {
            json!({"type": "succeeded", "message": message_json(state, &request.model, &generated, "batch")})
        }
        Err(error) => errored(&error.kind, &error.message),
    }
}

fn find(state: &SimState, id: &str) -> Option<usize> {
    state.anthropic_batches.iter().position(|batch| batch.id == id)
}

/// `GET /v1/messages/batches/{id}`.
pub(crate) async fn retrieve_batch(
    State(shared): State<SharedState>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Response {
    shared.lock().counters.polls += 1;
    if let Err(response) = shared
        .gate("anthropic.batches.retrieve", Provider::Anthropic, &headers)
        .await
    {
        return response;
    }
    let now = shared.now();
    let mut state = shared.lock();
    let Some(index) = find(&state, &id) else {
        return not_found(Provider::Anthropic, &id);
    };
    if state.anthropic_batches[index].not_found_remaining > 0 {
        state.anthropic_batches[index].not_found_remaining -= 1;
        state.count_fault("not_found_after_create");
        return not_found(Provider::Anthropic, &id);
    }
    advance(&shared, &mut state, index, now);
    Json(state.anthropic_batches[index].to_json(&shared.base_url)).into_response()
}

/// Query of the list endpoint.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct ListQuery {
    after_id: Option<String>,
    before_id: Option<String>,
    limit: Option<usize>,
}

/// `GET /v1/messages/batches`, newest first.
pub(crate) async fn list_batches(
    State(shared): State<SharedState>,
    headers: HeaderMap,
    Query(query): Query<ListQuery>,
) -> Response {
    if let Err(response) = shared
        .gate("anthropic.batches.list", Provider::Anthropic, &headers)
        .await
    {
        return response;
    }
    let limit = query.limit.unwrap_or(20).clamp(1, 1000);
    let state = shared.lock();
    let newest_first: Vec<&AnthropicBatch> = state.anthropic_batches.iter().rev().collect();
    let position = |id: &str| newest_first.iter().position(|batch| batch.id == id);
    let (start, end) = match (&query.after_id, &query.before_id) {
        (Some(after), _) => {
            let start = position(after).map_or(newest_first.len(), |index| index + 1);
            (start, (start + limit).min(newest_first.len()))
        }
        (None, Some(before)) => {
            let end = position(before).unwrap_or(0);
            (end.saturating_sub(limit), end)
        }
        (None, None) => (0, limit.min(newest_first.len())),
    };
    let page: Vec<Value> = newest_first[start..end]
        .iter()
        .map(|batch| batch.to_json(&shared.base_url))
        .collect();
    let has_more = if query.before_id.is_some() && query.after_id.is_none() {
        start > 0
    } else {
        end < newest_first.len()
    };
    Json(json!({
        "data": page,
        "has_more": has_more,
        "first_id": page.first().map(|batch| batch["id"].clone()),
        "last_id": page.last().map(|batch| batch["id"].clone()),
    }))
    .into_response()
}

/// `POST /v1/messages/batches/{id}/cancel`.
pub(crate) async fn cancel_batch(
    State(shared): State<SharedState>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Response {
    if let Err(response) = shared
        .gate("anthropic.batches.cancel", Provider::Anthropic, &headers)
        .await
    {
        return response;
    }
    let now = shared.now();
    let mut state = shared.lock();
    let Some(index) = find(&state, &id) else {
        return not_found(Provider::Anthropic, &id);
    };
    let batch = &mut state.anthropic_batches[index];
    if batch.status == ProcessingStatus::InProgress {
        batch.status = ProcessingStatus::Canceling;
        batch.cancel_initiated_at = Some(now);
    }
    Json(batch.to_json(&shared.base_url)).into_response()
}

/// `DELETE /v1/messages/batches/{id}`: only once ended.
pub(crate) async fn delete_batch(
    State(shared): State<SharedState>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Response {
    if let Err(response) = shared
        .gate("anthropic.batches.delete", Provider::Anthropic, &headers)
        .await
    {
        return response;
    }
    let mut state = shared.lock();
    let Some(index) = find(&state, &id) else {
        return not_found(Provider::Anthropic, &id);
    };
    if state.anthropic_batches[index].status != ProcessingStatus::Ended {
        return invalid(
            Provider::Anthropic,
            &format!("Batch {id} cannot be deleted while it is processing; cancel it first"),
        );
    }
    state.anthropic_batches.remove(index);
    Json(json!({"id": id, "type": "message_batch_deleted"})).into_response()
}

/// `GET /v1/messages/batches/{id}/results`: JSONL in shuffled order.
pub(crate) async fn batch_results(
    State(shared): State<SharedState>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Response {
    if let Err(response) = shared
        .gate("anthropic.batches.results", Provider::Anthropic, &headers)
        .await
    {
        return response;
    }
    let lines = {
        let mut state = shared.lock();
        let Some(index) = find(&state, &id) else {
            return not_found(Provider::Anthropic, &id);
        };
        if state.anthropic_batches[index].not_found_remaining > 0 {
            state.anthropic_batches[index].not_found_remaining -= 1;
            state.count_fault("not_found_after_create");
            return not_found(Provider::Anthropic, &id);
        }
        if state.anthropic_batches[index].status != ProcessingStatus::Ended {
            return invalid(
                Provider::Anthropic,
                &format!("Batch {id} has not ended; results are not available yet"),
            );
        }
        if shared.config.faults.results_purged {
            state.count_fault("results_purged");
            return not_found(Provider::Anthropic, &id);
        }
        state.counters.result_downloads += 1;
        (
            state.anthropic_batches[index].results.clone(),
            state.counters.result_downloads,
        )
    };
    shared.results_body(lines.0, lines.1)
}
