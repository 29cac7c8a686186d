//! OpenAI and OpenAI-compatible servers: chat completions, embeddings, Files and Batches.
//!
//! Local servers (Ollama, vLLM, llama.cpp) speak only chat and embeddings; the same client works
//! against them with their base URL and, when they ignore it, no key.

use std::collections::BTreeMap;

use reqwest::Method;
use reqwest::multipart::{Form, Part};
use serde::{Deserialize, Serialize};

use crate::error::{Detail, LlmError};
use crate::http::{AuthStyle, ClientOptions, CreateOutcome, HttpCore};
use crate::jsonl::JsonLines;
use crate::retry::RetryMode;
use crate::usage::TokenUsage;

/// The public endpoint (with `/v1`).
pub const OPENAI_BASE_URL: &str = "https://api.openai.com/v1";
/// The largest batch input file.
pub const BATCH_FILE_MAX_BYTES: usize = 200 * 1024 * 1024;
/// The most requests in one batch input file.
pub const BATCH_MAX_REQUESTS: usize = 50_000;
/// The metadata key under which memsift stores its own batch id, for reconciliation.
pub const BATCH_UUID_METADATA_KEY: &str = "batch_uuid";

/// One chat message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatMessage {
    /// `system`, `developer`, `user`, `assistant`, `tool`.
    pub role: String,
    /// The text.
    pub content: String,
}

impl ChatMessage {
    /// A message with a role.
    pub fn new(role: &str, content: impl Into<String>) -> Self {
        Self {
            role: role.to_owned(),
            content: content.into(),
        }
    }
}

/// A chat completion request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatRequest {
    /// The model.
    pub model: String,
    /// The conversation.
    pub messages: Vec<ChatMessage>,
    /// Output cap.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_completion_tokens: Option<u32>,
    /// Sampling temperature (0–2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    /// `{type: "json_object"}` or a JSON schema.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_format: Option<serde_json::Value>,
}

/// The reply message of a choice.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChoiceMessage {
    /// `assistant`.
    pub role: String,
    /// The text, absent on refusals and tool calls.
    #[serde(default)]
    pub content: Option<String>,
    /// A refusal message.
    #[serde(default)]
    pub refusal: Option<String>,
}

/// One choice.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Choice {
    /// Its index.
    pub index: u32,
    /// The reply.
    pub message: ChoiceMessage,
    /// `stop`, `length` (truncated), `tool_calls`, `content_filter`.
    #[serde(default)]
    pub finish_reason: Option<String>,
}

/// `prompt_tokens_details`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PromptTokensDetails {
    /// Prompt tokens served from the cache.
    #[serde(default)]
    pub cached_tokens: u64,
}

/// Chat usage.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChatUsage {
    /// All prompt tokens, cached included.
    pub prompt_tokens: u64,
    /// Output tokens.
    #[serde(default)]
    pub completion_tokens: u64,
    /// Their sum.
    #[serde(default)]
    pub total_tokens: u64,
    /// The cached share.
    #[serde(default)]
    pub prompt_tokens_details: Option<PromptTokensDetails>,
}

impl From<&ChatUsage> for TokenUsage {
    fn from(usage: &ChatUsage) -> Self {
        let cached = usage.prompt_tokens_details.map_or(0, |details| details.cached_tokens);
        TokenUsage {
            input_tokens: usage.prompt_tokens.saturating_sub(cached),
            output_tokens: usage.completion_tokens,
            cache_read_tokens: cached,
            ..TokenUsage::default()
        }
    }
}

/// A chat completion.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatCompletion {
    /// `chatcmpl-…`.
    pub id: String,
    /// The model that answered.
    pub model: String,
    /// The choices (memsift asks for one).
    pub choices: Vec<Choice>,
    /// Usage; some local servers omit it.
    #[serde(default)]
    pub usage: Option<ChatUsage>,
}

impl ChatCompletion {
    /// The first choice's text.
    pub fn text(&self) -> Option<&str> {
        self.choices.first()?.message.content.as_deref()
    }

    /// Whether the first choice was cut by the token cap.
    pub fn truncated(&self) -> bool {
        self.choices.first().and_then(|choice| choice.finish_reason.as_deref()) == Some("length")
    }

    /// Usage in price-table terms (zero when the server reported none).
    pub fn token_usage(&self) -> TokenUsage {
        self.usage.as_ref().map(TokenUsage::from).unwrap_or_default()
    }
}

/// An embeddings request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EmbeddingsRequest {
    /// The model.
    pub model: String,
    /// The texts (no empty strings).
    pub input: Vec<String>,
    /// Output dimensions, for models that support shortening.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dimensions: Option<u32>,
}

/// One embedding.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Embedding {
    /// Index into the request's `input`.
    pub index: usize,
    /// The vector.
    pub embedding: Vec<f32>,
}

/// Embeddings usage.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EmbeddingsUsage {
    /// Input tokens.
    pub prompt_tokens: u64,
    /// The same, for embeddings.
    #[serde(default)]
    pub total_tokens: u64,
}

/// An embeddings response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EmbeddingsResponse {
    /// One per input, in `index` order.
    pub data: Vec<Embedding>,
    /// The model.
    pub model: String,
    /// Usage.
    #[serde(default)]
    pub usage: Option<EmbeddingsUsage>,
}

/// A file object.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FileObject {
    /// `file-…`.
    pub id: String,
    /// Size.
    pub bytes: u64,
    /// Unix seconds.
    pub created_at: i64,
    /// The uploaded name (memsift puts its batch uuid in it, to find orphans).
    pub filename: String,
    /// `batch`, `batch_output`, …
    pub purpose: String,
}

/// A list page (`data`, `first_id`, `last_id`, `has_more`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Page<T> {
    /// The items.
    pub data: Vec<T>,
    /// Whether more follow.
    #[serde(default)]
    pub has_more: bool,
    /// The first id.
    #[serde(default)]
    pub first_id: Option<String>,
    /// The last id: the next page's `after`.
    #[serde(default)]
    pub last_id: Option<String>,
}

/// The eight batch statuses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BatchStatus {
    /// The input file is being checked.
    Validating,
    /// The input file failed validation (`errors` says why).
    Failed,
    /// Running.
    InProgress,
    /// Preparing results.
    Finalizing,
    /// Results are ready (possibly only an error file).
    Completed,
    /// Not finished in 24 h; finished requests are still in the output file.
    Expired,
    /// Cancel asked.
    Cancelling,
    /// Cancelled; partial results may exist.
    Cancelled,
    /// A status this client does not know.
    #[serde(other)]
    Other,
}

impl BatchStatus {
    /// Whether the batch will not change any more.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            BatchStatus::Failed | BatchStatus::Completed | BatchStatus::Expired | BatchStatus::Cancelled
        )
    }
}

/// Batch request counts (do not infer outcomes from them: read the files).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BatchRequestCounts {
    /// All requests.
    pub total: u64,
    /// Succeeded.
    pub completed: u64,
    /// Failed.
    pub failed: u64,
}

/// One validation error.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BatchValidationError {
    /// `invalid_json_line`, `duplicate_custom_id`, `token_limit_exceeded`, …
    #[serde(default)]
    pub code: Option<Detail>,
    /// What went wrong (cut as it is read).
    #[serde(default)]
    pub message: Option<Detail>,
    /// The parameter.
    #[serde(default)]
    pub param: Option<String>,
    /// The input line (1-based).
    #[serde(default)]
    pub line: Option<u64>,
}

/// `errors: {data: [...]}`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BatchErrors {
    /// The errors.
    #[serde(default)]
    pub data: Vec<BatchValidationError>,
}

/// A batch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Batch {
    /// `batch_…`.
    pub id: String,
    /// The endpoint every line targets.
    pub endpoint: String,
    /// The input file.
    pub input_file_id: String,
    /// `24h`.
    pub completion_window: String,
    /// Where it is.
    pub status: BatchStatus,
    /// Successful lines; null until finalised, and null when every line failed.
    #[serde(default)]
    pub output_file_id: Option<String>,
    /// Failed lines.
    #[serde(default)]
    pub error_file_id: Option<String>,
    /// Unix seconds.
    pub created_at: i64,
    /// Unix seconds.
    #[serde(default)]
    pub expires_at: Option<i64>,
    /// Counts.
    #[serde(default)]
    pub request_counts: Option<BatchRequestCounts>,
    /// Validation errors of a failed batch.
    #[serde(default)]
    pub errors: Option<BatchErrors>,
    /// Our metadata (carries [`BATCH_UUID_METADATA_KEY`]).
    #[serde(default)]
    pub metadata: Option<BTreeMap<String, String>>,
}

/// One input line: `{custom_id, method, url, body}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BatchInputLine {
    /// Our id, unique in the file.
    pub custom_id: String,
    /// `POST`.
    pub method: String,
    /// The endpoint, equal to the batch's.
    pub url: String,
    /// The request body.
    pub body: serde_json::Value,
}

impl BatchInputLine {
    /// A chat completion line.
    pub fn chat(custom_id: impl Into<String>, request: &ChatRequest) -> Self {
        Self {
            custom_id: custom_id.into(),
            method: "POST".to_owned(),
            url: "/v1/chat/completions".to_owned(),
            body: serde_json::to_value(request).expect("a chat request always serialises: strings and numbers"),
        }
    }
}

/// `response` of an output line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BatchLineResponse {
    /// HTTP status of the request.
    pub status_code: u16,
    /// Provider request id.
    #[serde(default)]
    pub request_id: Option<String>,
    /// The endpoint's answer (or error envelope).
    pub body: serde_json::Value,
}

/// `error` of an output line (`batch_expired`, `batch_cancelled`, …).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BatchLineError {
    /// The code.
    #[serde(default)]
    pub code: Option<Detail>,
    /// The message (cut as it is read).
    #[serde(default)]
    pub message: Option<Detail>,
}

/// One line of an output or error file. Lines come in any order: join on `custom_id`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BatchOutputLine {
    /// `batch_req_…`.
    #[serde(default)]
    pub id: Option<String>,
    /// The request's id.
    pub custom_id: String,
    /// The HTTP-level answer.
    #[serde(default)]
    pub response: Option<BatchLineResponse>,
    /// A failure that is not an HTTP answer.
    #[serde(default)]
    pub error: Option<BatchLineError>,
}

impl BatchOutputLine {
    /// The chat completion, when the line is a 200 answer.
    pub fn chat_completion(&self) -> Option<Result<ChatCompletion, LlmError>> {
        let response = self.response.as_ref().filter(|response| response.status_code == 200)?;
        Some(
            serde_json::from_value(response.body.clone()).map_err(|error| LlmError::Protocol {
                provider: "openai",
                detail: format!("output line {} is not a chat completion: {error}", self.custom_id).into(),
            }),
        )
    }

    /// The failure code: `error.code`, else the body's `error.code`/`type`, else the HTTP status.
    pub fn failure_code(&self) -> Option<String> {
        if let Some(code) = self.error.as_ref().and_then(|error| error.code.clone()) {
            return Some(code.into());
        }
        let response = self.response.as_ref().filter(|response| response.status_code != 200)?;
        let error = response.body.get("error");
        let text = |key: &str| {
            error
                .and_then(|error| error.get(key))
                .and_then(|v| v.as_str())
                .map(|text| Detail::from(text).into())
        };
        Some(
            text("code")
                .or_else(|| text("type"))
                .unwrap_or_else(|| format!("http_{}", response.status_code)),
        )
    }
}

#[derive(Serialize)]
struct CreateBatchBody<'a> {
    input_file_id: &'a str,
    endpoint: &'a str,
    completion_window: &'a str,
    metadata: &'a BTreeMap<String, String>,
}

/// Both batch result files, read together: a `completed` batch may have only an error file and an
/// `expired` one still has an output file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResultFile {
    /// `output_file_id`.
    Output,
    /// `error_file_id`.
    Error,
}

/// The OpenAI (or compatible) client. Its `Debug` shows no key.
#[derive(Debug, Clone)]
pub struct OpenAiClient {
    core: HttpCore,
}

impl OpenAiClient {
    /// A client; the base URL includes `/v1` (default `https://api.openai.com/v1`).
    pub fn new(options: ClientOptions) -> Result<Self, LlmError> {
        Ok(Self {
            core: HttpCore::new("openai", AuthStyle::Bearer, OPENAI_BASE_URL, options)?,
        })
    }

    /// `POST /chat/completions`, retried on transient failures.
    pub async fn chat_completion(&self, request: &ChatRequest) -> Result<ChatCompletion, LlmError> {
        let body = self.core.json_body(request, 32 * 1024 * 1024)?;
        let url = self.core.url("/chat/completions");
        self.core.spend_input_tokens(&body).await;
        self.core
            .call_json(RetryMode::Idempotent, "chat.completions", || {
                HttpCore::with_json(self.core.request(Method::POST, &url), &body)
            })
            .await
    }

    /// `POST /embeddings`, retried on transient failures; the vectors come back sorted by `index`.
    pub async fn embeddings(&self, request: &EmbeddingsRequest) -> Result<EmbeddingsResponse, LlmError> {
        let body = self.core.json_body(request, 32 * 1024 * 1024)?;
        let url = self.core.url("/embeddings");
        let mut response: EmbeddingsResponse = self
            .core
            .call_json(RetryMode::Idempotent, "embeddings", || {
                HttpCore::with_json(self.core.request(Method::POST, &url), &body)
            })
            .await?;
        response.data.sort_by_key(|embedding| embedding.index);
        Ok(response)
    }

    /// `POST /files` with `purpose=batch`: one attempt, never retried (an orphan upload is found
    /// later by its filename).
    pub async fn upload_batch_file(&self, filename: &str, lines: &[BatchInputLine]) -> CreateOutcome<FileObject> {
        if lines.is_empty() || lines.len() > BATCH_MAX_REQUESTS {
            return CreateOutcome::Rejected(LlmError::InvalidRequest {
                provider: "openai",
                status: 400,
                detail: format!(
                    "a batch file holds 1 to {BATCH_MAX_REQUESTS} lines, not {}",
                    lines.len()
                )
                .into(),
            });
        }
        let mut content = Vec::new();
        for line in lines {
            // Vec writes cannot fail and the line types always serialise.
            serde_json::to_writer(&mut content, line).expect("batch input lines serialise to a Vec");
            content.push(b'\n');
        }
        self.upload_file(filename, "batch", content).await
    }

    /// `POST /files` (multipart) with any purpose and raw content: one attempt, never retried.
    pub async fn upload_file(&self, filename: &str, purpose: &str, content: Vec<u8>) -> CreateOutcome<FileObject> {
        if content.len() > BATCH_FILE_MAX_BYTES {
            return CreateOutcome::Rejected(LlmError::TooLarge {
                provider: "openai",
                detail: format!("file is {} bytes, the limit is {BATCH_FILE_MAX_BYTES}", content.len()).into(),
            });
        }
        let form = Form::new()
            .text("purpose", purpose.to_owned())
            .part("file", Part::bytes(content).file_name(filename.to_owned()));
        let url = self.core.url("/files");
        self.core
            .create("files.create", self.core.request(Method::POST, &url).multipart(form))
            .await
    }

    /// `GET /files/{id}`.
    pub async fn retrieve_file(&self, file_id: &str) -> Result<FileObject, LlmError> {
        let url = self.core.url(&format!("/files/{file_id}"));
        self.core
            .call_json(RetryMode::KnownId, "files.retrieve", || {
                self.core.request(Method::GET, &url)
            })
            .await
    }

    /// `GET /files?purpose=…&after=…&limit=…`, to find orphaned uploads.
    pub async fn list_files(
        &self,
        purpose: Option<&str>,
        after: Option<&str>,
        limit: u32,
    ) -> Result<Page<FileObject>, LlmError> {
        let mut url = format!("{}?limit={}", self.core.url("/files"), limit.clamp(1, 10_000));
        if let Some(purpose) = purpose {
            url.push_str(&format!("&purpose={purpose}"));
        }
        if let Some(after) = after {
            url.push_str(&format!("&after={after}"));
        }
        self.core
            .call_json(RetryMode::Idempotent, "files.list", || {
                self.core.request(Method::GET, &url)
            })
            .await
    }

    /// `DELETE /files/{id}`.
    pub async fn delete_file(&self, file_id: &str) -> Result<(), LlmError> {
        let url = self.core.url(&format!("/files/{file_id}"));
        let _: serde_json::Value = self
            .core
            .call_json(RetryMode::Idempotent, "files.delete", || {
                self.core.request(Method::DELETE, &url)
            })
            .await?;
        Ok(())
    }

    /// `GET /files/{id}/content` as a stream of JSONL records.
    pub async fn file_lines<T>(&self, file_id: &str) -> Result<JsonLines<T>, LlmError>
    where
        T: serde::de::DeserializeOwned + Send + 'static,
    {
        let url = self.core.url(&format!("/files/{file_id}/content"));
        self.core
            .call_lines(RetryMode::KnownId, "files.content", || self.core.download(&url))
            .await
    }

    /// One result file of a batch as a stream; `Ok(None)` when the batch has no such file (a
    /// `completed` batch whose lines all failed has no output file).
    pub async fn batch_result_lines(
        &self,
        batch: &Batch,
        which: ResultFile,
    ) -> Result<Option<JsonLines<BatchOutputLine>>, LlmError> {
        let file_id = match which {
            ResultFile::Output => batch.output_file_id.as_deref(),
            ResultFile::Error => batch.error_file_id.as_deref(),
        };
        match file_id {
            Some(file_id) => self.file_lines(file_id).await.map(Some),
            None => Ok(None),
        }
    }

    /// `POST /batches` with our id in `metadata`: one attempt, never retried.
    pub async fn create_batch(
        &self,
        input_file_id: &str,
        endpoint: &str,
        metadata: &BTreeMap<String, String>,
    ) -> CreateOutcome<Batch> {
        let body = CreateBatchBody {
            input_file_id,
            endpoint,
            completion_window: "24h",
            metadata,
        };
        let body = match self.core.json_body(&body, 1024 * 1024) {
            Ok(body) => body,
            Err(error) => return CreateOutcome::Rejected(error),
        };
        let url = self.core.url("/batches");
        self.core
            .create(
                "batches.create",
                HttpCore::with_json(self.core.request(Method::POST, &url), &body),
            )
            .await
    }

    /// `GET /batches/{id}`; a 404 is retried for a while after create.
    pub async fn retrieve_batch(&self, batch_id: &str) -> Result<Batch, LlmError> {
        let url = self.core.url(&format!("/batches/{batch_id}"));
        self.core
            .call_json(RetryMode::KnownId, "batches.retrieve", || {
                self.core.request(Method::GET, &url)
            })
            .await
    }

    /// `GET /models/{model}`: the cheapest read that proves the key, the base URL and the model at
    /// once on OpenAI (`memsift check-config --probe`).
    pub async fn retrieve_model(&self, model: &str) -> Result<serde_json::Value, LlmError> {
        let url = self.core.url(&format!("/models/{model}"));
        self.core
            .call_json(RetryMode::Idempotent, "models.retrieve", || {
                self.core.request(Method::GET, &url)
            })
            .await
    }

    /// `GET /models`: the ids of every model the server offers (the probe of OpenAI-compatible
    /// servers, which do not all serve a single model by id).
    pub async fn list_models(&self) -> Result<Vec<String>, LlmError> {
        #[derive(serde::Deserialize)]
        struct Listed {
            id: String,
        }
        let url = self.core.url("/models");
        let page: Page<Listed> = self
            .core
            .call_json(RetryMode::Idempotent, "models.list", || {
                self.core.request(Method::GET, &url)
            })
            .await?;
        Ok(page.data.into_iter().map(|model| model.id).collect())
    }

    /// `GET /batches?after=…&limit=…` (limit 1–100).
    pub async fn list_batches(&self, after: Option<&str>, limit: u32) -> Result<Page<Batch>, LlmError> {
        let mut url = format!("{}?limit={}", self.core.url("/batches"), limit.clamp(1, 100));
        if let Some(after) = after {
            url.push_str(&format!("&after={after}"));
        }
        self.core
            .call_json(RetryMode::Idempotent, "batches.list", || {
                self.core.request(Method::GET, &url)
            })
            .await
    }

    /// Pages through the batch list for the one whose metadata carries `batch_uuid`, stopping at
    /// batches created before `since` (unix seconds).
    pub async fn find_batch_by_uuid(&self, batch_uuid: &str, since: i64) -> Result<Option<Batch>, LlmError> {
        let mut after: Option<String> = None;
        loop {
            let page = self.list_batches(after.as_deref(), 100).await?;
            for batch in &page.data {
                let tagged = batch
                    .metadata
                    .as_ref()
                    .and_then(|metadata| metadata.get(BATCH_UUID_METADATA_KEY))
                    .is_some_and(|value| value == batch_uuid);
                if tagged {
                    return Ok(Some(batch.clone()));
                }
            }
            let reached_older = page.data.iter().any(|batch| batch.created_at < since);
            if reached_older || !page.has_more || page.last_id.is_none() {
                return Ok(None);
            }
            after = page.last_id;
        }
    }

    /// `POST /batches/{id}/cancel`. Retried: asking twice is harmless.
    pub async fn cancel_batch(&self, batch_id: &str) -> Result<Batch, LlmError> {
        let url = self.core.url(&format!("/batches/{batch_id}/cancel"));
        self.core
            .call_json(RetryMode::KnownId, "batches.cancel", || {
                self.core.request(Method::POST, &url)
            })
            .await
    }
}
