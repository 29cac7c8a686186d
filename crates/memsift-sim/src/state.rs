//! The simulator's shared state and the pieces both providers use: auth, fault decisions,
//! answer generation with token accounting and prompt caching, ids, counters and JSONL bodies.
//!
//! Tokens are counted with a real BPE (`o200k_base`, the one memsift's own budgets use), and the
//! prompt cache follows each model's published rules from the price table: Anthropic caches a
//! marked prefix only from the model's minimum length (below it the request is billed in full and
//! both counters stay 0); OpenAI caches long prompts by itself, in whole steps, without a write.

use std::collections::{BTreeMap, HashMap};
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use memsift_core::config::price_for;
use memsift_core::transcript::parse_turns;
use memsift_tokens::count_tokens;
use rand::rngs::StdRng;
use rand::seq::IndexedRandom;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};

use crate::config::{HttpFault, LostCreateMode, MalformedKind, SimConfig};
use crate::records::{AnthropicBatch, OpenAiBatch, StoredFile};
use crate::responder::{ResponderReply, ResponderRequest};

/// What the simulator has seen: the tests' oracle, also served at `GET /_sim/counters`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counters {
    /// Batches actually created (both providers), including those whose answer was lost.
    pub creates: u64,
    /// Batch retrieves (both providers), including faulted ones.
    pub polls: u64,
    /// Result and file-content downloads that returned content.
    pub result_downloads: u64,
    /// Files stored by upload.
    pub uploads: u64,
    /// Every request received, by endpoint name, faulted or not.
    pub per_endpoint: BTreeMap<String, u64>,
    /// Every injected fault, by name.
    pub faults: BTreeMap<String, u64>,
    /// Requests refused as the provider refuses them (`context_window`, `max_tokens`), by reason.
    #[serde(default)]
    pub refused: BTreeMap<String, u64>,
}

/// Which wire format an error must use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Provider {
    Anthropic,
    OpenAi,
}

pub(crate) struct Shared {
    pub(crate) config: SimConfig,
    pub(crate) base_url: String,
    state: Mutex<State>,
}

pub(crate) struct State {
    pub(crate) rng: StdRng,
    pub(crate) counters: Counters,
    fault_calls: HashMap<&'static str, u32>,
    lost_creates: u32,
    /// Prompt-cache entries: hash of (model, cacheable prefix) → expiry.
    cache: HashMap<u64, DateTime<Utc>>,
    pub(crate) anthropic_batches: Vec<AnthropicBatch>,
    pub(crate) openai_batches: Vec<OpenAiBatch>,
    pub(crate) files: Vec<StoredFile>,
}

impl Shared {
    pub(crate) fn new(config: SimConfig, base_url: String) -> Self {
        let rng = StdRng::seed_from_u64(config.faults.seed);
        Self {
            config,
            base_url,
            state: Mutex::new(State {
                rng,
                counters: Counters::default(),
                fault_calls: HashMap::new(),
                lost_creates: 0,
                cache: HashMap::new(),
                anthropic_batches: Vec::new(),
                openai_batches: Vec::new(),
                files: Vec::new(),
            }),
        }
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        // Handlers never hold the lock across an await, and responders are not expected to panic;
        // if one does, the state is still consistent enough for a test double to keep serving.
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub(crate) fn now(&self) -> DateTime<Utc> {
        self.config.clock.now()
    }

    pub(crate) fn counters(&self) -> Counters {
        self.lock().counters.clone()
    }

    /// Counts the call, checks auth, then applies HTTP faults. `Err` is the response to send.
    pub(crate) async fn gate(
        &self,
        endpoint: &'static str,
        provider: Provider,
        headers: &HeaderMap,
    ) -> Result<(), Response> {
        *self
            .lock()
            .counters
            .per_endpoint
            .entry(endpoint.to_owned())
            .or_default() += 1;
        self.check_auth(provider, headers)?;
        let faults = &self.config.faults;
        if let Some(slow) = &faults.slow
            && self.fires("slow", slow, endpoint)
        {
            tokio::time::sleep(Duration::from_millis(slow.delay_ms)).await;
        }
        if let Some(fault) = &faults.rate_limit
            && self.fires("rate_limit", fault, endpoint)
        {
            let response = match provider {
                Provider::Anthropic => anthropic_error(
                    StatusCode::TOO_MANY_REQUESTS,
                    "rate_limit_error",
                    "Number of requests has exceeded your rate limit",
                ),
                Provider::OpenAi => openai_error(
                    StatusCode::TOO_MANY_REQUESTS,
                    "requests",
                    Some("rate_limit_exceeded"),
                    "Rate limit reached for requests. Please try again in 1s.",
                ),
            };
            return Err(with_retry_after(response, fault.retry_after_ms));
        }
        if let Some(fault) = &faults.overloaded
            && self.fires("overloaded", fault, endpoint)
        {
            let response = match provider {
                Provider::Anthropic => anthropic_error(overloaded_status(), "overloaded_error", "Overloaded"),
                Provider::OpenAi => openai_error(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "server_error",
                    None,
                    "The engine is currently overloaded, please try again later",
                ),
            };
            return Err(with_retry_after(response, fault.retry_after_ms));
        }
        if let Some(fault) = &faults.server_error
            && self.fires("server_error", fault, endpoint)
        {
            return Err(internal_error(provider));
        }
        if let Some(fault) = &faults.auth_error
            && self.fires("auth_error", fault, endpoint)
        {
            return Err(unauthorized(provider));
        }
        if let Some(fault) = &faults.not_found
            && self.fires("not_found", fault, endpoint)
        {
            return Err(not_found(provider, "the requested resource"));
        }
        Ok(())
    }

    pub(crate) fn check_auth(&self, provider: Provider, headers: &HeaderMap) -> Result<(), Response> {
        let header = |name: &str| headers.get(name).and_then(|value| value.to_str().ok()).unwrap_or("");
        let accepted =
            |key: &str| !key.is_empty() && self.config.api_key.as_deref().is_none_or(|expected| expected == key);
        match provider {
            Provider::Anthropic => {
                // Newer official SDKs send the key as a bearer token rather than `x-api-key`; take either.
                let bearer = header("authorization").strip_prefix("Bearer ").unwrap_or("");
                if !accepted(header("x-api-key")) && !accepted(bearer) {
                    return Err(unauthorized(provider));
                }
                if header("anthropic-version").is_empty() {
                    return Err(anthropic_error(
                        StatusCode::BAD_REQUEST,
                        "invalid_request_error",
                        "anthropic-version: header is required",
                    ));
                }
            }
            Provider::OpenAi => {
                let key = header("authorization").strip_prefix("Bearer ").unwrap_or("");
                if !accepted(key) {
                    return Err(unauthorized(provider));
                }
            }
        }
        Ok(())
    }

    /// Whether a fault fires on this call: the first N matching calls, then by its seeded share.
    fn fires(&self, name: &'static str, fault: &HttpFault, endpoint: &str) -> bool {
        if !fault.applies_to(endpoint) {
            return false;
        }
        let mut state = self.lock();
        let calls = state.fault_calls.entry(name).or_default();
        *calls += 1;
        if *calls <= fault.skip {
            return false;
        }
        let fires =
            *calls - fault.skip <= fault.first || (fault.share > 0.0 && state.rng.random_bool(fault.share.min(1.0)));
        if fires {
            *state.counters.faults.entry(name.to_owned()).or_default() += 1;
        }
        fires
    }

    /// Whether this create's answer is lost, and how.
    pub(crate) fn lose_create(&self) -> Option<LostCreateMode> {
        let fault = self.config.faults.lost_create.as_ref()?;
        let mut state = self.lock();
        state.lost_creates += 1;
        let fires =
            state.lost_creates <= fault.first || (fault.share > 0.0 && state.rng.random_bool(fault.share.min(1.0)));
        if fires {
            *state.counters.faults.entry("lost_create".to_owned()).or_default() += 1;
        }
        fires.then_some(fault.mode)
    }

    /// A 413 when the body is over the configured limit.
    pub(crate) fn check_size(&self, provider: Provider, length: usize) -> Result<(), Response> {
        match self.config.faults.max_request_bytes {
            Some(limit) if length > limit => {
                *self.lock().counters.faults.entry("too_large".to_owned()).or_default() += 1;
                Err(match provider {
                    Provider::Anthropic => anthropic_error(
                        StatusCode::PAYLOAD_TOO_LARGE,
                        "request_too_large",
                        "Request exceeds the maximum allowed number of bytes.",
                    ),
                    Provider::OpenAi => openai_error(
                        StatusCode::PAYLOAD_TOO_LARGE,
                        "invalid_request_error",
                        None,
                        "Request too large.",
                    ),
                })
            }
            _ => Ok(()),
        }
    }

    /// JSONL text in the configured line ends.
    pub(crate) fn jsonl_text(&self, lines: &[String]) -> Vec<u8> {
        let separator = if self.config.faults.results_crlf { "\r\n" } else { "\n" };
        let mut text = lines.join(separator);
        if !text.is_empty() {
            text.push_str(separator);
        }
        text.into_bytes()
    }

    /// A download body, sent in the configured chunk size so lines straddle reads.
    pub(crate) fn content_body(&self, content: Vec<u8>) -> Response {
        let body = match self.config.faults.results_chunk_bytes {
            Some(size) if size > 0 => {
                let chunks: Vec<Result<bytes::Bytes, std::io::Error>> = content
                    .chunks(size)
                    .map(|chunk| Ok(bytes::Bytes::copy_from_slice(chunk)))
                    .collect();
                Body::from_stream(futures_util::stream::iter(chunks))
            }
            _ => Body::from(content),
        };
        ([("content-type", "application/binary")], body).into_response()
    }
}

/// How a request's system prompt may be cached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PromptCache {
    /// Not at all: Anthropic without a `cache_control` marker.
    Off,
    /// A `cache_control` breakpoint on the system prompt, with the entry's lifetime (Anthropic).
    Marked(chrono::Duration),
    /// The provider caches a long prompt's prefix by itself, without a write charge (OpenAI).
    Automatic,
}

/// How long OpenAI keeps an automatic cache entry after its last use.
const AUTOMATIC_CACHE_TTL_MINUTES: i64 = 5;

/// The parts of a request that decide its answer.
#[derive(Debug, Clone)]
pub(crate) struct GenerationRequest {
    pub(crate) model: String,
    pub(crate) system: String,
    /// Whether and how the system prompt may be served from the cache.
    pub(crate) cache: PromptCache,
    pub(crate) user_text: String,
    pub(crate) max_tokens: u32,
}

/// An answer with its token accounting.
#[derive(Debug, Clone)]
pub(crate) struct Generated {
    pub(crate) text: String,
    pub(crate) truncated: bool,
    pub(crate) input_tokens: u64,
    pub(crate) output_tokens: u64,
    pub(crate) cache_write_5m: u64,
    pub(crate) cache_write_1h: u64,
    pub(crate) cache_read: u64,
}

/// Why an answer is an error.
#[derive(Debug, Clone)]
pub(crate) struct GenerationError {
    pub(crate) status: u16,
    pub(crate) kind: String,
    pub(crate) message: String,
}

/// The tokens of `text` in `o200k_base`, at least one: providers never bill an empty part as zero.
pub(crate) fn tokens_of(text: &str) -> u64 {
    (count_tokens(text) as u64).max(1)
}

impl State {
    /// Answers one request: responder, then output faults, then token and cache accounting.
    pub(crate) fn generate(
        &mut self,
        shared_config: &SimConfig,
        now: DateTime<Utc>,
        request: &GenerationRequest,
    ) -> Result<Generated, GenerationError> {
        let turns = parse_turns(&request.user_text);
        let reply = shared_config.responder.respond(&ResponderRequest {
            model: &request.model,
            system: &request.system,
            user_text: &request.user_text,
            turns: &turns,
        });
        let faults = &shared_config.faults;
        if faults.unknown_models.contains(&request.model) {
            self.count_fault("unknown_model");
            return Err(GenerationError {
                status: 404,
                kind: "not_found_error".to_owned(),
                message: format!("model_not_found: model: {} does not exist", request.model),
            });
        }
        let mut text = match reply {
            ResponderReply::Text(text) => text,
            ResponderReply::Error { status, kind, message } => return Err(GenerationError { status, kind, message }),
        };
        if self.roll(faults.duplicate_items_share) {
            text = duplicate_first_item(&text);
            self.count_fault("duplicate_items");
        }
        if self.roll(faults.malformed_share) {
            let kinds: &[MalformedKind] = if faults.malformed_kinds.is_empty() {
                &MalformedKind::ALL
            } else {
                &faults.malformed_kinds
            };
            let kind = *kinds.choose(&mut self.rng).unwrap_or(&MalformedKind::Prose);
            text = malform(&text, kind);
            self.count_fault("malformed");
        }
        if self.roll(faults.nul_share) {
            text = with_nul(&text);
            self.count_fault("nul");
        }
        let mut truncated = false;
        let max_tokens = u64::from(request.max_tokens.max(1));
        if self.roll(faults.truncated_share) {
            text = cut(&text, text.len() / 2);
            truncated = true;
            self.count_fault("truncated");
        } else if self.roll(faults.cut_share) {
            text = cut(&text, text.len() / 2);
            self.count_fault("cut");
        }
        let mut output_tokens = tokens_of(&text);
        if output_tokens > max_tokens {
            text = cut(&text, (max_tokens * 4) as usize);
            truncated = true;
        }
        if truncated {
            output_tokens = max_tokens;
        }

        let system_tokens = if request.system.is_empty() {
            0
        } else {
            tokens_of(&request.system)
        };
        let mut generated = Generated {
            text,
            truncated,
            input_tokens: tokens_of(&request.user_text),
            output_tokens,
            cache_write_5m: 0,
            cache_write_1h: 0,
            cache_read: 0,
        };
        // The tokens of the system prompt a cache entry can hold under the model's rules; a model
        // without rules caches whatever is marked.
        let rule = price_for(&shared_config.prices, &request.model);
        let cacheable = rule.map_or(system_tokens, |rule| rule.cacheable_tokens(system_tokens));
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        (&request.model, &request.system).hash(&mut hasher);
        let key = hasher.finish();
        let hit = self.cache.get(&key).is_some_and(|expiry| *expiry > now);
        match request.cache {
            PromptCache::Marked(ttl) if cacheable > 0 => {
                if hit {
                    generated.cache_read = cacheable;
                } else if ttl > chrono::Duration::minutes(5) {
                    generated.cache_write_1h = cacheable;
                } else {
                    generated.cache_write_5m = cacheable;
                }
                generated.input_tokens += system_tokens - cacheable;
                // A hit refreshes the entry, as the provider's does.
                self.cache.insert(key, now + ttl);
            }
            PromptCache::Automatic if cacheable > 0 => {
                // Written for free on a miss; only a later request reads it.
                if hit {
                    generated.cache_read = cacheable;
                }
                generated.input_tokens += system_tokens - generated.cache_read;
                self.cache
                    .insert(key, now + chrono::Duration::minutes(AUTOMATIC_CACHE_TTL_MINUTES));
            }
            // Unmarked, or a prefix below the model's minimum: billed in full, both counters 0.
            _ => generated.input_tokens += system_tokens,
        }
        Ok(generated)
    }

    pub(crate) fn roll(&mut self, share: f64) -> bool {
        share > 0.0 && self.rng.random_bool(share.min(1.0))
    }

    pub(crate) fn count_fault(&mut self, name: &str) {
        *self.counters.faults.entry(name.to_owned()).or_default() += 1;
    }

    /// A random id in a provider's style: `prefix` then `len` base-62 characters.
    pub(crate) fn id(&mut self, prefix: &str, len: usize) -> String {
        const ALPHABET: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
        let tail: String = (0..len)
            .map(|_| char::from(ALPHABET[self.rng.random_range(0..ALPHABET.len())]))
            .collect();
        format!("{prefix}{tail}")
    }
}

/// Cuts at or below `len` bytes on a character boundary.
fn cut(text: &str, len: usize) -> String {
    let mut end = len.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_owned()
}

/// U+0000 inside the first string value (or at the start), where a model's stray control
/// character would land.
fn with_nul(text: &str) -> String {
    match text.find("\":\"") {
        Some(at) => format!("{}\u{0}{}", &text[..at + 3], &text[at + 3..]),
        None => format!("\u{0}{text}"),
    }
}

fn duplicate_first_item(text: &str) -> String {
    match serde_json::from_str::<Vec<serde_json::Value>>(text) {
        Ok(mut items) if !items.is_empty() => {
            items.insert(1, items[0].clone());
            serde_json::to_string(&items).unwrap_or_else(|_| text.to_owned())
        }
        _ => text.to_owned(),
    }
}

fn malform(text: &str, kind: MalformedKind) -> String {
    match kind {
        MalformedKind::CodeFence => format!("```json\n{text}\n```"),
        MalformedKind::Prose => {
            format!("Here are the memories I found:\n{text}\nLet me know if you need anything else.")
        }
        MalformedKind::TrailingComma => match text.rfind(']') {
            Some(end) if text[..end].trim_end().ends_with('}') => format!("{},{}", &text[..end], &text[end..]),
            _ => format!("{text},"),
        },
        MalformedKind::SingleQuotes => text.replace('"', "'"),
        MalformedKind::Unterminated => cut(text, text.len() * 2 / 3),
    }
}

/// 529, which `http` has no constant for.
pub(crate) fn overloaded_status() -> StatusCode {
    StatusCode::from_u16(529).expect("529 is a valid status code: three digits")
}

/// Anthropic's error envelope with a `request-id` header.
pub(crate) fn anthropic_error(status: StatusCode, kind: &str, message: &str) -> Response {
    let request_id = format!("req_sim{:016x}", rand::random::<u64>());
    let body = serde_json::json!({
        "type": "error",
        "error": {"type": kind, "message": message},
        "request_id": request_id,
    });
    (status, [("request-id", request_id)], axum::Json(body)).into_response()
}

/// OpenAI's error envelope.
pub(crate) fn openai_error(status: StatusCode, kind: &str, code: Option<&str>, message: &str) -> Response {
    let body = serde_json::json!({
        "error": {"message": message, "type": kind, "param": null, "code": code},
    });
    (status, axum::Json(body)).into_response()
}

/// A refused key, in the provider's words.
pub(crate) fn unauthorized(provider: Provider) -> Response {
    match provider {
        Provider::Anthropic => anthropic_error(StatusCode::UNAUTHORIZED, "authentication_error", "invalid x-api-key"),
        Provider::OpenAi => openai_error(
            StatusCode::UNAUTHORIZED,
            "invalid_request_error",
            Some("invalid_api_key"),
            "Incorrect API key provided.",
        ),
    }
}

pub(crate) fn internal_error(provider: Provider) -> Response {
    match provider {
        Provider::Anthropic => anthropic_error(StatusCode::INTERNAL_SERVER_ERROR, "api_error", "Internal server error"),
        Provider::OpenAi => openai_error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "server_error",
            None,
            "The server had an error while processing your request.",
        ),
    }
}

pub(crate) fn not_found(provider: Provider, what: &str) -> Response {
    match provider {
        Provider::Anthropic => anthropic_error(StatusCode::NOT_FOUND, "not_found_error", &format!("{what} not found")),
        Provider::OpenAi => openai_error(
            StatusCode::NOT_FOUND,
            "invalid_request_error",
            None,
            &format!("No such object: {what}"),
        ),
    }
}

pub(crate) fn invalid(provider: Provider, message: &str) -> Response {
    match provider {
        Provider::Anthropic => anthropic_error(StatusCode::BAD_REQUEST, "invalid_request_error", message),
        Provider::OpenAi => openai_error(StatusCode::BAD_REQUEST, "invalid_request_error", None, message),
    }
}

fn with_retry_after(mut response: Response, retry_after_ms: Option<u64>) -> Response {
    if let Some(ms) = retry_after_ms {
        let headers = response.headers_mut();
        if let Ok(value) = HeaderValue::from_str(&ms.to_string()) {
            headers.insert("retry-after-ms", value);
        }
        if let Ok(value) = HeaderValue::from_str(&ms.div_ceil(1000).to_string()) {
            headers.insert("retry-after", value);
        }
    }
    response
}

/// A 200 whose body breaks off: the client gets headers, then a dropped connection.
pub(crate) fn dropped_connection() -> Response {
    let stream = futures_util::stream::once(async {
        Err::<bytes::Bytes, std::io::Error>(std::io::Error::new(
            std::io::ErrorKind::ConnectionReset,
            "simulated dropped connection",
        ))
    });
    (
        StatusCode::OK,
        [("content-type", "application/json")],
        Body::from_stream(stream),
    )
        .into_response()
}

/// The answer to a lost create.
pub(crate) fn lost_create_response(provider: Provider, mode: LostCreateMode) -> Response {
    match mode {
        LostCreateMode::DropConnection => dropped_connection(),
        LostCreateMode::ServerError => internal_error(provider),
    }
}

/// Deterministic embeddings: word and character-trigram feature hashing (FNV-1a), L2-normalised,
/// so similar texts get similar vectors and the same text always the same one.
pub fn embed(text: &str, dimensions: usize) -> Vec<f32> {
    let dimensions = dimensions.max(1);
    let mut vector = vec![0f32; dimensions];
    let lower = text.to_lowercase();
    let mut add = |feature: &str, weight: f32| {
        let hash = fnv1a(feature.as_bytes());
        let index = (hash % dimensions as u64) as usize;
        let sign = if (hash >> 63) == 0 { 1.0 } else { -1.0 };
        vector[index] += sign * weight;
    };
    for word in lower
        .split(|c: char| !c.is_alphanumeric())
        .filter(|word| !word.is_empty())
    {
        add(word, 1.0);
        let chars: Vec<char> = format!(" {word} ").chars().collect();
        for window in chars.windows(3) {
            add(&window.iter().collect::<String>(), 0.5);
        }
    }
    let norm = vector.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        vector.iter_mut().for_each(|x| *x /= norm);
    } else {
        // An empty text still gets a unit vector, so cosine similarity is defined.
        vector[0] = 1.0;
    }
    vector
}

fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |hash, byte| {
        (hash ^ u64::from(*byte)).wrapping_mul(0x0100_0000_01b3)
    })
}

pub(crate) type SharedState = Arc<Shared>;

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use proptest::prelude::*;

    use super::*;
    use crate::ScriptedResponder;

    fn state() -> (SimConfig, State) {
        let config = SimConfig::new(Arc::new(ScriptedResponder::new()));
        let shared = Shared::new(config.clone(), "http://sim".to_owned());
        let state = shared.state.into_inner().unwrap();
        (config, state)
    }

    fn request(model: &str, system: &str, cache: PromptCache) -> GenerationRequest {
        GenerationRequest {
            model: model.to_owned(),
            system: system.to_owned(),
            cache,
            user_text: "<turn label=\"t1\">hi</turn>".to_owned(),
            max_tokens: 1024,
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// Whatever the prefix length and model, the counters are what the provider's rules say:
        /// nothing below the model's minimum, the cacheable part written then read in its units,
        /// and every prompt token billed exactly once.
        #[test]
        fn cache_counters_follow_each_models_published_rules(
            words in 1usize..1_500,
            model in prop::sample::select(vec!["claude-haiku-4-5", "claude-sonnet-4-5-20250929", "gpt-4o-mini"]),
            hour in any::<bool>(),
        ) {
            let (config, mut state) = state();
            let now = Utc::now();
            let system = "memory extraction rules ".repeat(words);
            let rule = price_for(&config.prices, model).unwrap();
            let system_tokens = tokens_of(&system);
            let cacheable = rule.cacheable_tokens(system_tokens);
            let cache = if rule.automatic_cache {
                PromptCache::Automatic
            } else if hour {
                PromptCache::Marked(chrono::Duration::hours(1))
            } else {
                PromptCache::Marked(chrono::Duration::minutes(5))
            };
            let first = state.generate(&config, now, &request(model, &system, cache)).unwrap();
            let second = state.generate(&config, now, &request(model, &system, cache)).unwrap();
            let prompt = |g: &Generated| g.input_tokens + g.cache_write_5m + g.cache_write_1h + g.cache_read;
            prop_assert_eq!(prompt(&first), prompt(&second));
            prop_assert_eq!(prompt(&first), system_tokens + tokens_of("<turn label=\"t1\">hi</turn>"));
            prop_assert_eq!(first.cache_read, 0);
            prop_assert_eq!(second.cache_read, cacheable);
            let written = first.cache_write_5m + first.cache_write_1h;
            if rule.automatic_cache {
                prop_assert_eq!(written, 0, "OpenAI bills no cache write");
            } else {
                prop_assert_eq!(written, cacheable);
                prop_assert_eq!(second.cache_write_5m + second.cache_write_1h, 0);
            }
            if system_tokens < rule.min_cacheable_tokens {
                prop_assert_eq!((written, second.cache_read), (0, 0));
            }
            prop_assert_eq!(second.cache_read % rule.cache_step_tokens, 0);
        }
    }

    #[test]
    fn an_unmarked_prompt_is_never_cached_however_long() {
        let (config, mut state) = state();
        let now = Utc::now();
        let system = "memory extraction rules ".repeat(3_000);
        for _ in 0..2 {
            let generated = state
                .generate(&config, now, &request("claude-sonnet-4-5", &system, PromptCache::Off))
                .unwrap();
            assert_eq!(
                (generated.cache_write_5m, generated.cache_write_1h, generated.cache_read),
                (0, 0, 0)
            );
        }
    }

    #[test]
    fn embeddings_are_deterministic_unit_vectors_and_similar_texts_are_close() {
        let a = embed("I adopted a dog named Rex", 384);
        let b = embed("I adopted a dog named Rex", 384);
        let c = embed("my dog Rex", 384);
        let d = embed("quarterly tax filing deadline", 384);
        assert_eq!(a, b);
        assert_eq!(a.len(), 384);
        let norm: f32 = a.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-5);
        let cosine = |x: &[f32], y: &[f32]| x.iter().zip(y).map(|(p, q)| p * q).sum::<f32>();
        assert!(cosine(&a, &c) > cosine(&a, &d));
    }

    #[test]
    fn a_nul_lands_inside_the_first_string_or_at_the_start() {
        assert_eq!(with_nul(r#"[{"text":"a"}]"#), "[{\"text\":\"\u{0}a\"}]");
        assert_eq!(with_nul("plain"), "\u{0}plain");
    }

    #[test]
    fn each_malformation_breaks_strict_json_and_keeps_the_items() {
        let text = r#"[{"text":"a"},{"text":"b"}]"#;
        for kind in MalformedKind::ALL {
            let broken = malform(text, kind);
            assert!(
                serde_json::from_str::<serde_json::Value>(&broken).is_err(),
                "{kind:?}: {broken}"
            );
        }
        assert_eq!(
            malform(text, MalformedKind::TrailingComma),
            r#"[{"text":"a"},{"text":"b"},]"#
        );
        assert_eq!(
            duplicate_first_item(text),
            r#"[{"text":"a"},{"text":"a"},{"text":"b"}]"#
        );
    }
}
