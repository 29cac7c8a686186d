//! Anthropic: the Messages API (immediate lane) and Message Batches (batch lane), wire types and client.

use chrono::{DateTime, Utc};
use reqwest::Method;
use serde::{Deserialize, Serialize};

use crate::error::LlmError;
use crate::http::{AuthStyle, ClientOptions, CreateOutcome, HttpCore};
use crate::jsonl::JsonLines;
use crate::retry::RetryMode;
use crate::usage::TokenUsage;

/// The public endpoint.
pub const ANTHROPIC_BASE_URL: &str = "https://api.anthropic.com";
/// The largest Messages request body.
pub const MESSAGES_MAX_BYTES: usize = 32 * 1024 * 1024;
/// The largest batch create body.
pub const BATCH_MAX_BYTES: usize = 256 * 1024 * 1024;
/// The most requests in one batch.
pub const BATCH_MAX_REQUESTS: usize = 100_000;

/// How long a cache entry lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum CacheTtl {
    /// Five minutes (the provider default): cache write costs 1.25× input.
    #[serde(rename = "5m")]
    FiveMinutes,
    /// One hour: cache write costs 2× input, better for batches that run long.
    #[serde(rename = "1h")]
    OneHour,
}

impl CacheTtl {
    /// Parses `5m` or `1h`.
    pub fn parse(text: &str) -> Option<CacheTtl> {
        match text {
            "5m" => Some(CacheTtl::FiveMinutes),
            "1h" => Some(CacheTtl::OneHour),
            _ => None,
        }
    }
}

/// `cache_control: {type: "ephemeral", ttl}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename = "ephemeral")]
pub struct CacheControl {
    /// The entry's lifetime.
    pub ttl: CacheTtl,
}

/// A text block of the system prompt, optionally a cache breakpoint.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename = "text")]
pub struct SystemBlock {
    /// The text.
    pub text: String,
    /// Makes everything up to and including this block cacheable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_control: Option<CacheControl>,
}

/// Who wrote an input message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MessageRole {
    /// The caller.
    User,
    /// The model (prefill or earlier turns).
    Assistant,
}

/// One input message; memsift sends plain text.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InputMessage {
    /// Who wrote it.
    pub role: MessageRole,
    /// The text.
    pub content: String,
}

impl InputMessage {
    /// A user message.
    pub fn user(content: impl Into<String>) -> Self {
        Self {
            role: MessageRole::User,
            content: content.into(),
        }
    }
}

/// Extended thinking.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ThinkingConfig {
    /// Think with up to `budget_tokens` (≥ 1024, < `max_tokens`).
    Enabled {
        /// The budget.
        budget_tokens: u32,
    },
    /// No thinking.
    Disabled,
}

/// A Messages request body (non-streaming); also the `params` of a batch request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MessageParams {
    /// The model.
    pub model: String,
    /// Output cap (≥ 1).
    pub max_tokens: u32,
    /// System prompt blocks.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub system: Vec<SystemBlock>,
    /// The conversation.
    pub messages: Vec<InputMessage>,
    /// Sampling temperature; never sent together with thinking.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    /// Extended thinking.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking: Option<ThinkingConfig>,
}

/// One content block of a reply.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ContentBlock {
    /// Text.
    Text {
        /// The text.
        text: String,
    },
    /// Thinking, summarised.
    Thinking {
        /// The thinking text.
        thinking: String,
        /// The provider's signature over it.
        #[serde(default)]
        signature: String,
    },
    /// Thinking the provider withheld.
    RedactedThinking {
        /// Opaque data.
        data: String,
    },
    /// A tool call.
    ToolUse {
        /// Call id.
        id: String,
        /// Tool name.
        name: String,
        /// Arguments.
        input: serde_json::Value,
    },
    /// A block type this client does not know (server tools, newer types).
    #[serde(other)]
    Other,
}

/// Why the model stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// A natural end.
    EndTurn,
    /// The output hit `max_tokens`: the text is truncated.
    MaxTokens,
    /// A stop sequence matched.
    StopSequence,
    /// The model called a tool.
    ToolUse,
    /// A long server-tool turn was paused.
    PauseTurn,
    /// The model refused.
    Refusal,
    /// The context window filled up.
    ModelContextWindowExceeded,
    /// A reason this client does not know.
    #[serde(other)]
    Other,
}

/// Cache-write tokens split by TTL.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CacheCreation {
    /// Written with the 5-minute TTL.
    #[serde(default)]
    pub ephemeral_5m_input_tokens: u64,
    /// Written with the 1-hour TTL.
    #[serde(default)]
    pub ephemeral_1h_input_tokens: u64,
}

/// The `usage` object of a Message.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AnthropicUsage {
    /// Uncached input tokens.
    pub input_tokens: u64,
    /// Output tokens.
    pub output_tokens: u64,
    /// Cache-write tokens, all TTLs.
    #[serde(default)]
    pub cache_creation_input_tokens: Option<u64>,
    /// Cache-read tokens.
    #[serde(default)]
    pub cache_read_input_tokens: Option<u64>,
    /// Cache-write tokens by TTL.
    #[serde(default)]
    pub cache_creation: Option<CacheCreation>,
    /// `standard`, `priority` or `batch`.
    #[serde(default)]
    pub service_tier: Option<String>,
}

impl From<&AnthropicUsage> for TokenUsage {
    fn from(usage: &AnthropicUsage) -> Self {
        let written = usage.cache_creation_input_tokens.unwrap_or(0);
        // Older responses have only the total; count it as 5-minute writes, the provider default.
        let (five, hour) = match usage.cache_creation {
            Some(split) => (split.ephemeral_5m_input_tokens, split.ephemeral_1h_input_tokens),
            None => (written, 0),
        };
        TokenUsage {
            input_tokens: usage.input_tokens,
            output_tokens: usage.output_tokens,
            cache_creation_5m_tokens: five,
            cache_creation_1h_tokens: hour,
            cache_read_tokens: usage.cache_read_input_tokens.unwrap_or(0),
        }
    }
}

/// A reply.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    /// `msg_…`.
    pub id: String,
    /// The model that answered.
    pub model: String,
    /// The content blocks.
    pub content: Vec<ContentBlock>,
    /// Why it stopped (always set on non-streaming replies).
    pub stop_reason: Option<StopReason>,
    /// Token usage.
    pub usage: AnthropicUsage,
}

impl Message {
    /// The text blocks joined: what an extraction reply says.
    pub fn text(&self) -> String {
        self.content
            .iter()
            .filter_map(|block| match block {
                ContentBlock::Text { text } => Some(text.as_str()),
                _ => None,
            })
            .collect()
    }

    /// Whether the output was cut by `max_tokens`.
    pub fn truncated(&self) -> bool {
        self.stop_reason == Some(StopReason::MaxTokens)
    }

    /// Usage in price-table terms.
    pub fn token_usage(&self) -> TokenUsage {
        TokenUsage::from(&self.usage)
    }
}

/// One request of a batch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BatchRequest {
    /// Our id for it: `^[a-zA-Z0-9_-]{1,64}$`, unique in the batch.
    pub custom_id: String,
    /// The Messages body.
    pub params: MessageParams,
}

/// Where a batch is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProcessingStatus {
    /// Running.
    InProgress,
    /// Cancel asked; running requests may still finish.
    Canceling,
    /// Done; results are available.
    Ended,
    /// A status this client does not know.
    #[serde(other)]
    Other,
}

/// Request counts; all but `processing` stay 0 until the batch ends.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RequestCounts {
    /// Not finished.
    pub processing: u64,
    /// Succeeded.
    pub succeeded: u64,
    /// Errored.
    pub errored: u64,
    /// Canceled.
    pub canceled: u64,
    /// Expired.
    pub expired: u64,
}

impl RequestCounts {
    /// The batch's size.
    pub fn total(&self) -> u64 {
        self.processing + self.succeeded + self.errored + self.canceled + self.expired
    }
}

/// A Message Batch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MessageBatch {
    /// `msgbatch_…`.
    pub id: String,
    /// Where it is.
    pub processing_status: ProcessingStatus,
    /// Counts.
    pub request_counts: RequestCounts,
    /// Created.
    pub created_at: DateTime<Utc>,
    /// Created + 24 h.
    pub expires_at: DateTime<Utc>,
    /// When processing ended.
    #[serde(default)]
    pub ended_at: Option<DateTime<Utc>>,
    /// When a cancel was asked.
    #[serde(default)]
    pub cancel_initiated_at: Option<DateTime<Utc>>,
    /// When results became unavailable.
    #[serde(default)]
    pub archived_at: Option<DateTime<Utc>>,
    /// Absolute URL of the results; null until ended.
    #[serde(default)]
    pub results_url: Option<String>,
}

/// One page of the batch list (newest first).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BatchPage {
    /// The batches.
    pub data: Vec<MessageBatch>,
    /// Whether another page follows.
    pub has_more: bool,
    /// The first id on the page.
    #[serde(default)]
    pub first_id: Option<String>,
    /// The last id on the page: the next page's `after_id`.
    #[serde(default)]
    pub last_id: Option<String>,
}

pub use crate::error::ErrorDetail;

/// The error envelope, as results carry it: the type is at `error.error.type`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorEnvelope {
    /// The error.
    pub error: ErrorDetail,
    /// The provider's request id.
    #[serde(default)]
    pub request_id: Option<String>,
}

/// What happened to one request of a batch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum BatchResult {
    /// Answered (billed).
    Succeeded {
        /// The reply.
        message: Message,
    },
    /// Failed (not billed).
    Errored {
        /// Why.
        error: ErrorEnvelope,
    },
    /// Never sent because the batch was canceled (not billed).
    Canceled,
    /// Never sent within 24 h (not billed).
    Expired,
}

/// One line of a results file. Lines come in any order: join on `custom_id`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BatchResultLine {
    /// The request's id.
    pub custom_id: String,
    /// Its outcome.
    pub result: BatchResult,
}

#[derive(Serialize)]
struct CreateBatchBody<'a> {
    requests: &'a [BatchRequest],
}

#[derive(Deserialize)]
struct Deleted {
    id: String,
}

/// The Anthropic client. Its `Debug` shows no key.
#[derive(Debug, Clone)]
pub struct AnthropicClient {
    core: HttpCore,
}

impl AnthropicClient {
    /// A client; the base URL has no `/v1` (default `https://api.anthropic.com`).
    pub fn new(options: ClientOptions) -> Result<Self, LlmError> {
        Ok(Self {
            core: HttpCore::new("anthropic", AuthStyle::Anthropic, ANTHROPIC_BASE_URL, options)?,
        })
    }

    /// `POST /v1/messages`, retried on transient failures (an immediate call is idempotent for us:
    /// a duplicate only costs tokens, and its result is applied once by request id).
    pub async fn create_message(&self, params: &MessageParams) -> Result<Message, LlmError> {
        let body = self.core.json_body(params, MESSAGES_MAX_BYTES)?;
        let url = self.core.url("/v1/messages");
        self.core.spend_input_tokens(&body).await;
        self.core
            .call_json(RetryMode::Idempotent, "messages.create", || {
                HttpCore::with_json(self.core.request(Method::POST, &url), &body)
            })
            .await
    }

    /// `POST /v1/messages/batches`: one attempt, never retried.
    pub async fn create_batch(&self, requests: &[BatchRequest]) -> CreateOutcome<MessageBatch> {
        if requests.is_empty() || requests.len() > BATCH_MAX_REQUESTS {
            return CreateOutcome::Rejected(LlmError::InvalidRequest {
                provider: "anthropic",
                status: 400,
                detail: format!(
                    "a batch holds 1 to {BATCH_MAX_REQUESTS} requests, not {}",
                    requests.len()
                )
                .into(),
            });
        }
        let body = match self.core.json_body(&CreateBatchBody { requests }, BATCH_MAX_BYTES) {
            Ok(body) => body,
            Err(error) => return CreateOutcome::Rejected(error),
        };
        let url = self.core.url("/v1/messages/batches");
        self.core
            .create(
                "messages.batches.create",
                HttpCore::with_json(self.core.request(Method::POST, &url), &body),
            )
            .await
    }

    /// `GET /v1/messages/batches/{id}`; a 404 is retried for a while, as providers return it
    /// briefly after create.
    pub async fn retrieve_batch(&self, batch_id: &str) -> Result<MessageBatch, LlmError> {
        let url = self.core.url(&format!("/v1/messages/batches/{batch_id}"));
        self.core
            .call_json(RetryMode::KnownId, "messages.batches.retrieve", || {
                self.core.request(Method::GET, &url)
            })
            .await
    }

    /// `GET /v1/models/{model}`: the cheapest read that proves the key, the base URL and the model
    /// at once (`memsift check-config --probe`).
    pub async fn retrieve_model(&self, model: &str) -> Result<serde_json::Value, LlmError> {
        let url = self.core.url(&format!("/v1/models/{model}"));
        self.core
            .call_json(RetryMode::Idempotent, "models.retrieve", || {
                self.core.request(Method::GET, &url)
            })
            .await
    }

    /// `GET /v1/messages/batches`, newest first; pass the previous page's `last_id` as `after_id`.
    pub async fn list_batches(&self, after_id: Option<&str>, limit: u32) -> Result<BatchPage, LlmError> {
        let mut url = format!(
            "{}?limit={}",
            self.core.url("/v1/messages/batches"),
            limit.clamp(1, 1000)
        );
        if let Some(after_id) = after_id {
            url.push_str("&after_id=");
            url.push_str(after_id);
        }
        self.core
            .call_json(RetryMode::Idempotent, "messages.batches.list", || {
                self.core.request(Method::GET, &url)
            })
            .await
    }

    /// Every batch created at or after `since`, paging until an older one appears (the list is newest first).
    pub async fn list_batches_since(&self, since: DateTime<Utc>) -> Result<Vec<MessageBatch>, LlmError> {
        let mut found = Vec::new();
        let mut after_id: Option<String> = None;
        loop {
            let page = self.list_batches(after_id.as_deref(), 100).await?;
            let reached_older = page.data.iter().any(|batch| batch.created_at < since);
            found.extend(page.data.into_iter().filter(|batch| batch.created_at >= since));
            if reached_older || !page.has_more || page.last_id.is_none() {
                return Ok(found);
            }
            after_id = page.last_id;
        }
    }

    /// `POST /v1/messages/batches/{id}/cancel`. Retried: asking twice is harmless.
    pub async fn cancel_batch(&self, batch_id: &str) -> Result<MessageBatch, LlmError> {
        let url = self.core.url(&format!("/v1/messages/batches/{batch_id}/cancel"));
        self.core
            .call_json(RetryMode::KnownId, "messages.batches.cancel", || {
                self.core.request(Method::POST, &url)
            })
            .await
    }

    /// `DELETE /v1/messages/batches/{id}`; only an ended batch can be deleted.
    pub async fn delete_batch(&self, batch_id: &str) -> Result<(), LlmError> {
        let url = self.core.url(&format!("/v1/messages/batches/{batch_id}"));
        let deleted: Deleted = self
            .core
            .call_json(RetryMode::Idempotent, "messages.batches.delete", || {
                self.core.request(Method::DELETE, &url)
            })
            .await?;
        if deleted.id != batch_id {
            return Err(LlmError::Protocol {
                provider: "anthropic",
                detail: format!("deleting {batch_id} answered for {}", deleted.id).into(),
            });
        }
        Ok(())
    }

    /// The results of an ended batch as a stream of lines, read from its `results_url` (absolute,
    /// never rebuilt from the id). Lines arrive in any order.
    pub async fn batch_results(&self, batch: &MessageBatch) -> Result<JsonLines<BatchResultLine>, LlmError> {
        let Some(url) = batch.results_url.clone() else {
            return Err(LlmError::Usage {
                provider: "anthropic",
                detail: format!(
                    "batch {} has no results_url yet (status {:?}); poll until it has ended",
                    batch.id, batch.processing_status
                )
                .into(),
            });
        };
        self.core
            .call_lines(RetryMode::KnownId, "messages.batches.results", || {
                self.core.download(&url)
            })
            .await
    }
}
