//! `GET /v1/models` and `GET /v1/models/{id}` in both wire formats: the cheapest read of an
//! endpoint, which `memsift check-config --probe` calls.
//!
//! Both providers serve the same paths; a request carrying `anthropic-version` gets Anthropic's
//! shape, any other OpenAI's. Every model is known except the fault plan's `unknown_models`.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::state::{Provider, SharedState, not_found};

/// The models a listing shows.
const LISTED: [&str; 4] = ["claude-haiku-4-5", "claude-sonnet-4-5", "gpt-4o-mini", "gpt-4o"];

fn provider_of(headers: &HeaderMap) -> Provider {
    if headers.contains_key("anthropic-version") {
        Provider::Anthropic
    } else {
        Provider::OpenAi
    }
}

fn model_json(provider: Provider, id: &str) -> Value {
    match provider {
        Provider::Anthropic => json!({
            "type": "model", "id": id, "display_name": id, "created_at": "2025-10-01T00:00:00Z",
        }),
        Provider::OpenAi => json!({"id": id, "object": "model", "created": 1_759_276_800, "owned_by": "memsift-sim"}),
    }
}

/// `GET /v1/models`.
pub(crate) async fn list_models(State(shared): State<SharedState>, headers: HeaderMap) -> Response {
    let provider = provider_of(&headers);
    if let Err(response) = shared.gate("models.list", provider, &headers).await {
        return response;
    }
    let unknown = &shared.config.faults.unknown_models;
    let data: Vec<Value> = LISTED
        .iter()
        .filter(|id| !unknown.iter().any(|model| model == *id))
        .map(|id| model_json(provider, id))
        .collect();
    let body = match provider {
        Provider::Anthropic => json!({
            "data": data, "has_more": false,
            "first_id": data.first().map(|model| model["id"].clone()),
            "last_id": data.last().map(|model| model["id"].clone()),
        }),
        Provider::OpenAi => json!({"object": "list", "data": data}),
    };
    Json(body).into_response()
}

/// `GET /v1/models/{id}`.
pub(crate) async fn retrieve_model(
    State(shared): State<SharedState>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Response {
    let provider = provider_of(&headers);
    if let Err(response) = shared.gate("models.retrieve", provider, &headers).await {
        return response;
    }
    if shared.config.faults.unknown_models.contains(&id) {
        return not_found(provider, &format!("model: {id}"));
    }
    Json(model_json(provider, &id)).into_response()
}
