//! OpenAI's wire format: chat completions, embeddings, Files and Batches.

use std::collections::HashSet;

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Multipart, Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use base64::Engine;
use chrono::{DateTime, Utc};
use rand::seq::SliceRandom;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::limits;
use crate::records::{OpenAiBatch, Status, StoredFile};
use crate::state::{
    Generated, GenerationRequest, PromptCache, Provider, SharedState, State as SimState, embed, invalid,
    lost_create_response, not_found, openai_error, tokens_of,
};

/// The dimension of simulated embeddings when the request names none.
pub const DEFAULT_EMBEDDING_DIMENSIONS: usize = 384;

fn parse_json(body: &Bytes) -> Result<Value, Response> {
    serde_json::from_slice(body).map_err(|error| invalid(Provider::OpenAi, &format!("body is not valid JSON: {error}")))
}

/// Reads a chat body; `Err` is the 400 message.
fn parse_chat(body: &Value) -> Result<GenerationRequest, String> {
    let model = body
        .get("model")
        .and_then(Value::as_str)
        .ok_or("you must provide a model parameter")?;
    let messages = body
        .get("messages")
        .and_then(Value::as_array)
        .filter(|messages| !messages.is_empty())
        .ok_or("'messages' must contain at least one message")?;
    let mut system = String::new();
    let mut user_text = String::new();
    for message in messages {
        let content = match message.get("content") {
            Some(Value::String(text)) => text.clone(),
            Some(Value::Array(parts)) => parts
                .iter()
                .filter_map(|part| part.get("text")?.as_str())
                .collect::<Vec<_>>()
                .join("\n"),
            _ => String::new(),
        };
        match message.get("role").and_then(Value::as_str) {
            Some("system" | "developer") => system.push_str(&content),
            _ => {
                user_text.push_str(&content);
                user_text.push('\n');
            }
        }
    }
    let max_tokens = body
        .get("max_completion_tokens")
        .or_else(|| body.get("max_tokens"))
        .and_then(Value::as_u64)
        .unwrap_or(4096);
    Ok(GenerationRequest {
        model: model.to_owned(),
        // OpenAI caches prompt prefixes on its own; the system prompt is the stable prefix.
        cache: PromptCache::Automatic,
        system,
        user_text,
        max_tokens: u32::try_from(max_tokens).unwrap_or(u32::MAX),
    })
}

fn completion_json(state: &mut SimState, model: &str, generated: &Generated, created: i64) -> Value {
    // OpenAI bills no cache writes: written and uncached tokens are both plain prompt tokens.
    let prompt = generated.input_tokens + generated.cache_write_5m + generated.cache_write_1h + generated.cache_read;
    json!({
        "id": state.id("chatcmpl-", 29),
        "object": "chat.completion",
        "created": created,
        "model": model,
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": generated.text, "refusal": null, "annotations": []},
            "finish_reason": if generated.truncated { "length" } else { "stop" },
            "logprobs": null,
        }],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": generated.output_tokens,
            "total_tokens": prompt + generated.output_tokens,
            "prompt_tokens_details": {"cached_tokens": generated.cache_read, "audio_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0,
                "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0},
        },
        "service_tier": "default",
        "system_fingerprint": null,
    })
}

/// The answer to one chat body: `Ok(completion)` or `Err((status, error body))`.
fn answer_chat(
    shared: &SharedState,
    state: &mut SimState,
    now: DateTime<Utc>,
    body: &Value,
) -> Result<Value, (u16, Value)> {
    let request = parse_chat(body).map_err(|message| {
        (
            400,
            json!({"error": {"message": message, "type": "invalid_request_error", "param": null, "code": null}}),
        )
    })?;
    if let Err((refusal, cap_param)) = limits::check_chat(&shared.config.prices, &request, body) {
        limits::record(state, &refusal);
        return Err((400, refusal.openai_body(cap_param)));
    }
    match state.generate(&shared.config, now, &request) {
        Ok(generated) => Ok(completion_json(state, &request.model, &generated, now.timestamp())),
        Err(error) => Err((
            error.status,
            json!({"error": {"message": error.message, "type": error.kind, "param": null, "code": null}}),
        )),
    }
}

/// `POST /v1/chat/completions`.
pub(crate) async fn chat_completions(State(shared): State<SharedState>, headers: HeaderMap, body: Bytes) -> Response {
    if let Err(response) = shared.gate("chat.completions", Provider::OpenAi, &headers).await {
        return response;
    }
    if let Err(response) = shared.check_size(Provider::OpenAi, body.len()) {
        return response;
    }
    let body = match parse_json(&body) {
        Ok(body) => body,
        Err(response) => return response,
    };
    let now = shared.now();
    let mut state = shared.lock();
    match answer_chat(&shared, &mut state, now, &body) {
        Ok(completion) => Json(completion).into_response(),
        Err((status, error)) => (
            StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
            Json(error),
        )
            .into_response(),
    }
}

/// The answer to one embeddings body.
fn answer_embeddings(body: &Value) -> Result<Value, String> {
    let model = body
        .get("model")
        .and_then(Value::as_str)
        .ok_or("you must provide a model parameter")?;
    let inputs: Vec<String> = match body.get("input") {
        Some(Value::String(text)) => vec![text.clone()],
        Some(Value::Array(items)) if items.iter().all(Value::is_string) => {
            items.iter().filter_map(Value::as_str).map(str::to_owned).collect()
        }
        // Token arrays: embed their numbers' text, which is still deterministic.
        Some(Value::Array(items)) if items.iter().all(Value::is_number) => {
            vec![Value::Array(items.clone()).to_string()]
        }
        Some(Value::Array(items)) => items.iter().map(Value::to_string).collect(),
        _ => return Err("'input' is a required property".to_owned()),
    };
    if inputs.is_empty() || inputs.len() > 2048 {
        return Err("'input' must hold 1 to 2048 items".to_owned());
    }
    if inputs.iter().any(String::is_empty) {
        return Err("'input' cannot contain an empty string".to_owned());
    }
    let dimensions = body
        .get("dimensions")
        .and_then(Value::as_u64)
        .map_or(DEFAULT_EMBEDDING_DIMENSIONS, |value| value as usize);
    let base64 = body.get("encoding_format").and_then(Value::as_str) == Some("base64");
    let mut tokens = 0;
    let data: Vec<Value> = inputs
        .iter()
        .enumerate()
        .map(|(index, text)| {
            tokens += tokens_of(text);
            let vector = embed(text, dimensions);
            let embedding = if base64 {
                // The SDK asks for base64 by default: little-endian f32s.
                let bytes: Vec<u8> = vector.iter().flat_map(|x| x.to_le_bytes()).collect();
                json!(base64::engine::general_purpose::STANDARD.encode(bytes))
            } else {
                json!(vector)
            };
            json!({"object": "embedding", "index": index, "embedding": embedding})
        })
        .collect();
    Ok(json!({
        "object": "list", "data": data, "model": model,
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    }))
}

/// `POST /v1/embeddings`.
pub(crate) async fn embeddings(State(shared): State<SharedState>, headers: HeaderMap, body: Bytes) -> Response {
    if let Err(response) = shared.gate("embeddings", Provider::OpenAi, &headers).await {
        return response;
    }
    let body = match parse_json(&body) {
        Ok(body) => body,
        Err(response) => return response,
    };
    match answer_embeddings(&body) {
        Ok(answer) => Json(answer).into_response(),
        Err(message) => invalid(Provider::OpenAi, &message),
    }
}

/// `POST /v1/files` (multipart: `purpose`, `file`).
pub(crate) async fn upload_file(
    State(shared): State<SharedState>,
    headers: HeaderMap,
    mut form: Multipart,
) -> Response {
    if let Err(response) = shared.gate("files.create", Provider::OpenAi, &headers).await {
        return response;
    }
    let mut purpose = None;
    let mut file = None;
    loop {
        match form.next_field().await {
            Ok(Some(field)) => match field.name() {
                Some("purpose") => purpose = field.text().await.ok(),
                Some("file") => {
                    let filename = field.file_name().unwrap_or("upload.jsonl").to_owned();
                    match field.bytes().await {
                        Ok(bytes) => file = Some((filename, bytes)),
                        Err(error) => return invalid(Provider::OpenAi, &format!("cannot read the file part: {error}")),
                    }
                }
                _ => {}
            },
            Ok(None) => break,
            Err(error) => return invalid(Provider::OpenAi, &format!("malformed multipart body: {error}")),
        }
    }
    let (Some(purpose), Some((filename, content))) = (purpose, file) else {
        return invalid(Provider::OpenAi, "both 'purpose' and 'file' are required");
    };
    if let Err(response) = shared.check_size(Provider::OpenAi, content.len()) {
        return response;
    }
    let now = shared.now().timestamp();
    let mut state = shared.lock();
    let stored = StoredFile {
        id: state.id("file-", 22),
        filename,
        purpose,
        created_at: now,
        content: content.to_vec(),
    };
    let answer = stored.to_json();
    state.files.push(stored);
    state.counters.uploads += 1;
    Json(answer).into_response()
}

fn find_file(state: &SimState, id: &str) -> Option<usize> {
    state.files.iter().position(|file| file.id == id)
}

/// `GET /v1/files/{id}`.
pub(crate) async fn retrieve_file(
    State(shared): State<SharedState>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Response {
    if let Err(response) = shared.gate("files.retrieve", Provider::OpenAi, &headers).await {
        return response;
    }
    let state = shared.lock();
    match find_file(&state, &id) {
        Some(index) => Json(state.files[index].to_json()).into_response(),
        None => not_found(Provider::OpenAi, &id),
    }
}

/// `DELETE /v1/files/{id}`.
pub(crate) async fn delete_file(
    State(shared): State<SharedState>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Response {
    if let Err(response) = shared.gate("files.delete", Provider::OpenAi, &headers).await {
        return response;
    }
    let mut state = shared.lock();
    match find_file(&state, &id) {
        Some(index) => {
            state.files.remove(index);
            Json(json!({"id": id, "object": "file", "deleted": true})).into_response()
        }
        None => not_found(Provider::OpenAi, &id),
    }
}

/// `GET /v1/files/{id}/content`.
pub(crate) async fn file_content(
    State(shared): State<SharedState>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Response {
    if let Err(response) = shared.gate("files.content", Provider::OpenAi, &headers).await {
        return response;
    }
    let content = {
        let mut state = shared.lock();
        let Some(index) = find_file(&state, &id) else {
            return not_found(Provider::OpenAi, &id);
        };
        let file = &state.files[index];
        let results = file.purpose == "batch_output";
        if results && shared.config.faults.results_purged {
            state.count_fault("results_purged");
            return not_found(Provider::OpenAi, &id);
        }
        let content = file.content.clone();
        state.counters.result_downloads += 1;
        (content, results.then_some(state.counters.result_downloads))
    };
    match content {
        (content, Some(download)) => {
            let lines = String::from_utf8_lossy(&content)
                .lines()
                .filter(|line| !line.trim().is_empty())
                .map(str::to_owned)
                .collect();
            shared.results_body(lines, download)
        }
        (content, None) => shared.content_body(content),
    }
}

/// Query of the list endpoints.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct ListQuery {
    after: Option<String>,
    limit: Option<usize>,
    purpose: Option<String>,
}

fn page(items: Vec<Value>, after: Option<&str>, limit: usize) -> Value {
    let start = after
        .and_then(|after| items.iter().position(|item| item["id"] == after))
        .map_or(0, |index| index + 1);
    let end = (start + limit).min(items.len());
    let data = items.get(start..end).map(<[Value]>::to_vec).unwrap_or_default();
    json!({
        "object": "list",
        "first_id": data.first().map(|item| item["id"].clone()),
        "last_id": data.last().map(|item| item["id"].clone()),
        "has_more": end < items.len(),
        "data": data,
    })
}

/// `GET /v1/files`, newest first.
pub(crate) async fn list_files(
    State(shared): State<SharedState>,
    headers: HeaderMap,
    Query(query): Query<ListQuery>,
) -> Response {
    if let Err(response) = shared.gate("files.list", Provider::OpenAi, &headers).await {
        return response;
    }
    let state = shared.lock();
    let items: Vec<Value> = state
        .files
        .iter()
        .rev()
        .filter(|file| query.purpose.as_deref().is_none_or(|purpose| file.purpose == purpose))
        .map(StoredFile::to_json)
        .collect();
    Json(page(
        items,
        query.after.as_deref(),
        query.limit.unwrap_or(10_000).clamp(1, 10_000),
    ))
    .into_response()
}

const ENDPOINTS: &[&str] = &["/v1/chat/completions", "/v1/embeddings"];

/// `POST /v1/batches`.
pub(crate) async fn create_batch(State(shared): State<SharedState>, headers: HeaderMap, body: Bytes) -> Response {
    if let Err(response) = shared.gate("openai.batches.create", Provider::OpenAi, &headers).await {
        return response;
    }
    let body = match parse_json(&body) {
        Ok(body) => body,
        Err(response) => return response,
    };
    let text = |key: &str| body.get(key).and_then(Value::as_str).map(str::to_owned);
    let (Some(input_file_id), Some(endpoint)) = (text("input_file_id"), text("endpoint")) else {
        return invalid(Provider::OpenAi, "input_file_id and endpoint are required");
    };
    if text("completion_window").as_deref() != Some("24h") {
        return invalid(Provider::OpenAi, "completion_window must be '24h'");
    }
    if !ENDPOINTS.contains(&endpoint.as_str()) {
        return invalid(
            Provider::OpenAi,
            &format!("endpoint {endpoint} is not supported by this simulator"),
        );
    }
    let metadata = body.get("metadata").cloned().unwrap_or(Value::Null);
    if metadata.as_object().is_some_and(|pairs| pairs.len() > 16) {
        return invalid(Provider::OpenAi, "metadata holds at most 16 pairs");
    }
    let now = shared.now();
    let latency =
        chrono::Duration::milliseconds(i64::try_from(shared.config.faults.processing_latency_ms).unwrap_or(i64::MAX));
    let answer = {
        let mut state = shared.lock();
        if find_file(&state, &input_file_id).is_none() {
            return invalid(Provider::OpenAi, &format!("Invalid input_file_id: {input_file_id}"));
        }
        let batch = OpenAiBatch {
            id: state.id("batch_", 24),
            endpoint,
            input_file_id,
            status: Status::Validating,
            created_at: now,
            ready_at: now + latency,
            in_progress_at: None,
            finalizing_at: None,
            completed_at: None,
            failed_at: None,
            expired_at: None,
            cancelling_at: None,
            cancelled_at: None,
            metadata,
            requests: Vec::new(),
            pending_files: (None, None),
            output_file_id: None,
            error_file_id: None,
            total: 0,
            completed: 0,
            failed: 0,
            errors: Vec::new(),
            ends_expired: false,
            not_found_remaining: shared.config.faults.not_found_after_create,
        };
        let answer = batch.to_json();
        state.openai_batches.push(batch);
        state.counters.creates += 1;
        answer
    };
    if let Some(mode) = shared.lose_create() {
        return lost_create_response(Provider::OpenAi, mode);
    }
    Json(answer).into_response()
}

/// Checks the input file the way the provider does while `validating`.
fn validate_input(content: &[u8], endpoint: &str) -> Result<Vec<(String, Value)>, Vec<Value>> {
    let text = String::from_utf8_lossy(content);
    let mut errors = Vec::new();
    let mut requests = Vec::new();
    let mut seen = HashSet::new();
    for (number, line) in text.split('\n').enumerate() {
        let line = line.trim_end_matches('\r');
        if line.trim().is_empty() {
            continue;
        }
        let line_number = number + 1;
        let error =
            |code: &str, message: String| json!({"code": code, "message": message, "param": null, "line": line_number});
        let Ok(value) = serde_json::from_str::<Value>(line) else {
            errors.push(error(
                "invalid_json_line",
                format!("This line is not parseable as valid JSON (line {line_number})."),
            ));
            continue;
        };
        let custom_id = value
            .get("custom_id")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        if value.get("url").and_then(Value::as_str) != Some(endpoint) {
            errors.push(error(
                "url_mismatch",
                format!("The url for this request does not match the batch endpoint {endpoint}."),
            ));
        } else if !seen.insert(custom_id.clone()) {
            errors.push(error(
                "duplicate_custom_id",
                "The custom_id for this request is a duplicate of another request. The custom_id parameter must be unique for each request in a batch.".to_owned(),
            ));
        } else {
            requests.push((custom_id, value.get("body").cloned().unwrap_or(Value::Null)));
        }
    }
    if requests.is_empty() && errors.is_empty() {
        errors.push(
            json!({"code": "empty_file", "message": "The batch input file is empty.", "param": null, "line": null}),
        );
    }
    if requests.len() > 50_000 {
        errors.push(json!({"code": "too_many_tasks", "message": "The batch holds more than 50000 requests.", "param": null, "line": null}));
    }
    if errors.is_empty() { Ok(requests) } else { Err(errors) }
}

/// How one line of a batch ended.
enum LineOutcome {
    Succeeded(Value),
    Failed(Value),
}

fn error_line(state: &mut SimState, custom_id: &str, code: &str, message: &str) -> Value {
    json!({"id": state.id("batch_req_", 24), "custom_id": custom_id, "response": null,
           "error": {"code": code, "message": message}})
}

fn run_line(
    shared: &SharedState,
    state: &mut SimState,
    now: DateTime<Utc>,
    endpoint: &str,
    custom_id: &str,
    body: &Value,
) -> (LineOutcome, bool) {
    let faults = &shared.config.faults;
    if state.roll(faults.request_expired_share) {
        state.count_fault("request_expired");
        let line = error_line(
            state,
            custom_id,
            "batch_expired",
            "This request could not be executed before the completion window expired.",
        );
        return (LineOutcome::Failed(line), true);
    }
    if state.roll(faults.request_canceled_share) {
        state.count_fault("request_canceled");
        let line = error_line(
            state,
            custom_id,
            "batch_cancelled",
            "This request was cancelled before it ran.",
        );
        return (LineOutcome::Failed(line), false);
    }
    let answer = if state.roll(faults.request_errored_share) {
        state.count_fault("request_errored");
        Err((
            500,
            json!({"error": {"message": "The server had an error while processing your request.", "type": "server_error", "param": null, "code": null}}),
        ))
    } else if endpoint == "/v1/embeddings" {
        answer_embeddings(body).map_err(|message| {
            (
                400,
                json!({"error": {"message": message, "type": "invalid_request_error", "param": null, "code": null}}),
            )
        })
    } else {
        answer_chat(shared, state, now, body)
    };
    let request_id = state.id("req_", 32);
    let id = state.id("batch_req_", 24);
    let (status, body, ok) = match answer {
        Ok(body) => (200, body, true),
        Err((status, body)) => (status, body, false),
    };
    let line = json!({"id": id, "custom_id": custom_id,
                      "response": {"status_code": status, "request_id": request_id, "body": body}, "error": null});
    (
        if ok {
            LineOutcome::Succeeded(line)
        } else {
            LineOutcome::Failed(line)
        },
        false,
    )
}

/// Moves a batch one step along its status walk, on the sim's clock.
fn advance(shared: &SharedState, state: &mut SimState, index: usize, now: DateTime<Utc>) {
    let at = now.timestamp();
    let batch = &state.openai_batches[index];
    let expired = now >= batch.created_at + chrono::Duration::hours(24);
    if shared.config.faults.never_end && batch.status == Status::InProgress {
        return;
    }
    match batch.status {
        Status::Validating => {
            let input_file_id = batch.input_file_id.clone();
            let endpoint = batch.endpoint.clone();
            let content = find_file(state, &input_file_id)
                .map(|file| state.files[file].content.clone())
                .unwrap_or_default();
            let batch = &mut state.openai_batches[index];
            match validate_input(&content, &endpoint) {
                Ok(requests) => {
                    batch.total = requests.len() as u64;
                    batch.requests = requests;
                    batch.status = Status::InProgress;
                    batch.in_progress_at = Some(at);
                }
                Err(errors) => {
                    batch.errors = errors;
                    batch.status = Status::Failed;
                    batch.failed_at = Some(at);
                }
            }
        }
        Status::InProgress if expired => finalize(shared, state, index, now, Some("batch_expired")),
        Status::InProgress if now >= batch.ready_at => finalize(shared, state, index, now, None),
        Status::Cancelling => {
            // Cancelled while still validating: the lines were never read, so read them now to
            // write one `batch_cancelled` line each.
            if batch.total == 0 {
                let content = find_file(state, &batch.input_file_id.clone())
                    .map(|file| state.files[file].content.clone())
                    .unwrap_or_default();
                let endpoint = state.openai_batches[index].endpoint.clone();
                let requests = validate_input(&content, &endpoint).unwrap_or_default();
                let batch = &mut state.openai_batches[index];
                batch.total = requests.len() as u64;
                batch.requests = requests;
            }
            finalize(shared, state, index, now, Some("batch_cancelled"));
            let batch = &mut state.openai_batches[index];
            batch.status = Status::Cancelled;
            batch.cancelled_at = Some(at);
            publish_files(batch);
        }
        Status::Finalizing => {
            let batch = &mut state.openai_batches[index];
            if batch.ends_expired {
                batch.status = Status::Expired;
                batch.expired_at = Some(at);
            } else {
                batch.status = Status::Completed;
                batch.completed_at = Some(at);
            }
            publish_files(batch);
        }
        Status::InProgress | Status::Failed | Status::Completed | Status::Expired | Status::Cancelled => {}
    }
}

fn publish_files(batch: &mut OpenAiBatch) {
    batch.output_file_id = batch.pending_files.0.take();
    batch.error_file_id = batch.pending_files.1.take();
}

/// Runs every request (or marks them all `unrun`) and writes the output and error files.
fn finalize(shared: &SharedState, state: &mut SimState, index: usize, now: DateTime<Utc>, unrun: Option<&str>) {
    let requests = std::mem::take(&mut state.openai_batches[index].requests);
    let endpoint = state.openai_batches[index].endpoint.clone();
    let mut output = Vec::new();
    let mut errors = Vec::new();
    let mut ends_expired = unrun == Some("batch_expired");
    for (custom_id, body) in &requests {
        let outcome = match unrun {
            Some("batch_expired") => LineOutcome::Failed(error_line(
                state,
                custom_id,
                "batch_expired",
                "This request could not be executed before the completion window expired.",
            )),
            Some(code) => LineOutcome::Failed(error_line(
                state,
                custom_id,
                code,
                "This request was cancelled before it ran.",
            )),
            None => {
                let (outcome, expired) = run_line(shared, state, now, &endpoint, custom_id, body);
                ends_expired |= expired;
                outcome
            }
        };
        match outcome {
            LineOutcome::Succeeded(line) => output.push(line.to_string()),
            LineOutcome::Failed(line) => errors.push(line.to_string()),
        }
    }
    output.shuffle(&mut state.rng);
    errors.shuffle(&mut state.rng);
    let batch_id = state.openai_batches[index].id.clone();
    let store = |state: &mut SimState, lines: &[String], kind: &str| -> Option<String> {
        if lines.is_empty() {
            return None;
        }
        let id = state.id("file-", 22);
        state.files.push(StoredFile {
            id: id.clone(),
            filename: format!("{batch_id}_{kind}.jsonl"),
            purpose: "batch_output".to_owned(),
            created_at: now.timestamp(),
            content: shared.jsonl_text(lines),
        });
        Some(id)
    };
    let output_file = store(state, &output, "output");
    let error_file = store(state, &errors, "error");
    let batch = &mut state.openai_batches[index];
    batch.requests = requests;
    batch.completed = output.len() as u64;
    batch.failed = errors.len() as u64;
    batch.pending_files = (output_file, error_file);
    batch.ends_expired = ends_expired;
    batch.status = Status::Finalizing;
    batch.finalizing_at = Some(now.timestamp());
}

fn find_batch(state: &SimState, id: &str) -> Option<usize> {
    state.openai_batches.iter().position(|batch| batch.id == id)
}

/// `GET /v1/batches/{id}`.
pub(crate) async fn retrieve_batch(
    State(shared): State<SharedState>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Response {
    shared.lock().counters.polls += 1;
    if let Err(response) = shared.gate("openai.batches.retrieve", Provider::OpenAi, &headers).await {
        return response;
    }
    let now = shared.now();
    let mut state = shared.lock();
    let Some(index) = find_batch(&state, &id) else {
        return not_found(Provider::OpenAi, &id);
    };
    if state.openai_batches[index].not_found_remaining > 0 {
        state.openai_batches[index].not_found_remaining -= 1;
        state.count_fault("not_found_after_create");
        return not_found(Provider::OpenAi, &id);
    }
    advance(&shared, &mut state, index, now);
    Json(state.openai_batches[index].to_json()).into_response()
}

/// `GET /v1/batches`, newest first.
pub(crate) async fn list_batches(
    State(shared): State<SharedState>,
    headers: HeaderMap,
    Query(query): Query<ListQuery>,
) -> Response {
    if let Err(response) = shared.gate("openai.batches.list", Provider::OpenAi, &headers).await {
        return response;
    }
    let state = shared.lock();
    let items: Vec<Value> = state.openai_batches.iter().rev().map(OpenAiBatch::to_json).collect();
    Json(page(
        items,
        query.after.as_deref(),
        query.limit.unwrap_or(20).clamp(1, 100),
    ))
    .into_response()
}

/// `POST /v1/batches/{id}/cancel`.
pub(crate) async fn cancel_batch(
    State(shared): State<SharedState>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Response {
    if let Err(response) = shared.gate("openai.batches.cancel", Provider::OpenAi, &headers).await {
        return response;
    }
    let now = shared.now().timestamp();
    let mut state = shared.lock();
    let Some(index) = find_batch(&state, &id) else {
        return not_found(Provider::OpenAi, &id);
    };
    let batch = &mut state.openai_batches[index];
    if batch.status.is_terminal() {
        return openai_error(
            StatusCode::CONFLICT,
            "invalid_request_error",
            None,
            &format!("Cannot cancel a batch with status '{}'.", batch.status.as_str()),
        );
    }
    if batch.status != Status::Finalizing {
        batch.status = Status::Cancelling;
        batch.cancelling_at = Some(now);
    }
    Json(batch.to_json()).into_response()
}
