//! The HTTP plumbing both provider clients share: auth headers, the rate limiter, retries,
//! error classification, and the never-retried create path.

use std::time::Duration;

use bytes::Bytes;
use reqwest::header::{CONTENT_TYPE, HeaderMap};
use reqwest::{Method, RequestBuilder, Response};
use secrecy::{ExposeSecret, SecretString};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::error::LlmError;
use crate::jsonl::{JsonLines, ReadLimits, decode_lines};
use crate::ratelimit::{LimitKey, RateLimiter};
use crate::retry::{RetryMode, RetryPolicy};

/// What every client is built from.
#[derive(Debug, Clone)]
pub struct ClientOptions {
    /// Base URL. Anthropic: without `/v1` (`https://api.anthropic.com`); OpenAI and compatible
    /// servers: with it (`https://api.openai.com/v1`, `http://localhost:11434/v1`). `None`: the public endpoint.
    pub base_url: Option<String>,
    /// The key; `None` only for local OpenAI-compatible servers that ignore it.
    pub api_key: Option<SecretString>,
    /// The model, which with the provider names this client's rate-limit budget.
    pub model: String,
    /// Limit on one whole request (connect to last byte); results downloads use `download_timeout`.
    pub request_timeout: Duration,
    /// Limit on a results or file download, which can be hundreds of megabytes.
    pub download_timeout: Duration,
    /// Bounds on every body read: line length, body size, the pause between bytes.
    pub read_limits: ReadLimits,
    /// Retry policy for reads and immediate calls.
    pub retry: RetryPolicy,
    /// The process-wide limiter.
    pub limiter: RateLimiter,
}

impl ClientOptions {
    /// Options with default timeouts, retries and a private limiter.
    pub fn new(base_url: Option<String>, api_key: Option<SecretString>, model: impl Into<String>) -> Self {
        Self {
            base_url,
            api_key,
            model: model.into(),
            request_timeout: Duration::from_secs(600),
            download_timeout: Duration::from_secs(3600),
            read_limits: ReadLimits::default(),
            retry: RetryPolicy::default(),
            limiter: RateLimiter::default(),
        }
    }
}

/// The result of a call that must not be retried blindly (batch create, file upload).
#[derive(Debug, Clone, PartialEq)]
pub enum CreateOutcome<T> {
    /// The provider created it.
    Created(T),
    /// The provider definitely did not create it (4xx, 429, 529, or the connection never opened):
    /// fix the request or try again later.
    Rejected(LlmError),
    /// It may or may not exist (timeout, dropped connection, 5xx, unreadable 2xx): reconcile
    /// through the list endpoint before creating again.
    Unknown(LlmError),
}

impl<T> CreateOutcome<T> {
    /// The created object, if any.
    pub fn created(self) -> Option<T> {
        match self {
            CreateOutcome::Created(value) => Some(value),
            _ => None,
        }
    }

    /// As a `Result`, for callers that treat both failures alike.
    pub fn into_result(self) -> Result<T, LlmError> {
        match self {
            CreateOutcome::Created(value) => Ok(value),
            CreateOutcome::Rejected(error) | CreateOutcome::Unknown(error) => Err(error),
        }
    }
}

/// How a provider authenticates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AuthStyle {
    /// `x-api-key` plus `anthropic-version`.
    Anthropic,
    /// `Authorization: Bearer`.
    Bearer,
}

/// The Anthropic API version every request names; the SDKs hard-code the same.
pub(crate) const ANTHROPIC_VERSION: &str = "2023-06-01";

#[derive(Debug, Clone)]
pub(crate) struct HttpCore {
    pub(crate) provider: &'static str,
    client: reqwest::Client,
    base_url: String,
    auth: AuthStyle,
    api_key: Option<SecretString>,
    pub(crate) limit_key: LimitKey,
    limiter: RateLimiter,
    pub(crate) retry: RetryPolicy,
    request_timeout: Duration,
    download_timeout: Duration,
    read_limits: ReadLimits,
}

/// Installs ring as the process's rustls provider, once: reqwest is built without a bundled one,
/// so any process that makes an HTTP client calls this first. Calling it again changes nothing.
pub fn install_crypto_provider() {
    // An `Err` only means a provider is already installed, which is what we want.
    let _ = rustls::crypto::ring::default_provider().install_default();
}

impl HttpCore {
    pub(crate) fn new(
        provider: &'static str,
        auth: AuthStyle,
        default_base_url: &str,
        options: ClientOptions,
    ) -> Result<Self, LlmError> {
        install_crypto_provider();
        let base_url = options.base_url.unwrap_or_else(|| default_base_url.to_owned());
        let base_url = base_url.trim_end_matches('/').to_owned();
        if reqwest::Url::parse(&base_url).is_err() {
            return Err(LlmError::Usage {
                provider,
                detail: format!(
                    "base URL `{}` is not a valid URL; set endpoint to e.g. {default_base_url}",
                    memsift_core::redact::redact_url(&base_url)
                )
                .into(),
            });
        }
        if auth == AuthStyle::Anthropic && options.api_key.is_none() {
            return Err(LlmError::Usage {
                provider,
                detail: "no API key; set api_key_env or api_key_file".into(),
            });
        }
        let client = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(30))
            .user_agent(concat!("memsift/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|error| LlmError::Usage {
                provider,
                detail: format!("cannot build the HTTP client: {error}").into(),
            })?;
        Ok(Self {
            provider,
            client,
            base_url,
            auth,
            api_key: options.api_key,
            limit_key: LimitKey::new(provider, options.model),
            limiter: options.limiter,
            retry: options.retry,
            request_timeout: options.request_timeout,
            download_timeout: options.download_timeout,
            read_limits: options.read_limits,
        })
    }

    pub(crate) fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base_url)
    }

    /// A request with auth headers; `url` is absolute (results URLs come from the provider).
    pub(crate) fn request(&self, method: Method, url: &str) -> RequestBuilder {
        let builder = self.client.request(method, url).timeout(self.request_timeout);
        match (self.auth, &self.api_key) {
            (AuthStyle::Anthropic, Some(key)) => builder
                .header("x-api-key", key.expose_secret())
                .header("anthropic-version", ANTHROPIC_VERSION),
            (AuthStyle::Anthropic, None) => builder.header("anthropic-version", ANTHROPIC_VERSION),
            (AuthStyle::Bearer, Some(key)) => builder.bearer_auth(key.expose_secret()),
            (AuthStyle::Bearer, None) => builder,
        }
    }

    /// A download request: long timeout, and the `Accept` the SDKs send for raw bytes.
    pub(crate) fn download(&self, url: &str) -> RequestBuilder {
        self.request(Method::GET, url)
            .timeout(self.download_timeout)
            .header("accept", "application/binary")
    }

    /// A JSON body, serialised once so retries resend the same bytes and the size can be checked.
    pub(crate) fn json_body<B: Serialize>(&self, body: &B, limit_bytes: usize) -> Result<Bytes, LlmError> {
        let bytes = serde_json::to_vec(body).map_err(|error| LlmError::Usage {
            provider: self.provider,
            detail: format!("cannot serialise the request body: {error}").into(),
        })?;
        if bytes.len() > limit_bytes {
            return Err(LlmError::TooLarge {
                provider: self.provider,
                detail: format!("body is {} bytes, the limit is {limit_bytes}", bytes.len()).into(),
            });
        }
        Ok(Bytes::from(bytes))
    }

    /// Waits for the token quota of a model call: its input estimated at four bytes of the
    /// serialised body per token (an overestimate for JSON, so the quota errs on the safe side).
    pub(crate) async fn spend_input_tokens(&self, body: &Bytes) {
        let estimate = u32::try_from(body.len() / 4).unwrap_or(u32::MAX);
        self.limiter.acquire_tokens(&self.limit_key, estimate).await;
    }

    pub(crate) fn with_json(builder: RequestBuilder, body: &Bytes) -> RequestBuilder {
        builder.header(CONTENT_TYPE, "application/json").body(body.clone())
    }

    /// One attempt: wait for the limiter, send, feed the limiter, and turn a non-2xx into an error.
    pub(crate) async fn send_once(&self, builder: RequestBuilder) -> Result<Response, SendError> {
        self.limiter.acquire(&self.limit_key).await;
        let response = builder.send().await.map_err(|error| SendError::Transport {
            never_sent: error.is_connect(),
            error: LlmError::from_transport(self.provider, &error),
        })?;
        self.limiter.observe_headers(&self.limit_key, response.headers());
        let status = response.status();
        if status.is_success() {
            log_request_id(self.provider, response.headers());
            return Ok(response);
        }
        let headers = response.headers().clone();
        let body = response.bytes().await.unwrap_or_default();
        let error = LlmError::from_response(self.provider, status, &headers, &body);
        if let LlmError::RateLimited {
            retry_after: Some(wait),
            ..
        } = &error
        {
            self.limiter
                .pause(&self.limit_key, (*wait).min(self.retry.max_retry_after));
        }
        Err(SendError::Status {
            status: status.as_u16(),
            error,
        })
    }

    pub(crate) async fn read_json<T: DeserializeOwned>(&self, response: Response) -> Result<T, ReadError> {
        let body = self.read_bounded(response).await?;
        serde_json::from_slice(&body).map_err(|error| {
            ReadError::Decode(LlmError::Protocol {
                provider: self.provider,
                detail: format!("response body is not the expected JSON: {error}").into(),
            })
        })
    }

    /// A whole body, read under the same bounds as a stream's line (one JSON object is one line's
    /// worth) and its idle limit: a proxy's endless or stalled answer costs bounded memory and time.
    async fn read_bounded(&self, mut response: Response) -> Result<Vec<u8>, ReadError> {
        let limits = self.read_limits;
        let mut body = Vec::new();
        loop {
            let chunk = match tokio::time::timeout(limits.idle_timeout, response.chunk()).await {
                Ok(Ok(Some(chunk))) => chunk,
                Ok(Ok(None)) => return Ok(body),
                Ok(Err(error)) => return Err(ReadError::Body(LlmError::from_transport(self.provider, &error))),
                Err(_) => {
                    return Err(ReadError::Body(LlmError::Transient {
                        provider: self.provider,
                        status: None,
                        detail: format!("the body stopped sending for {} s", limits.idle_timeout.as_secs_f64()).into(),
                    }));
                }
            };
            if body.len() + chunk.len() > limits.max_line_bytes {
                return Err(ReadError::Decode(LlmError::Protocol {
                    provider: self.provider,
                    detail: format!("the response body is larger than {} bytes", limits.max_line_bytes).into(),
                }));
            }
            body.extend_from_slice(&chunk);
        }
    }

    /// A call with retries whose answer is one JSON object.
    pub(crate) async fn call_json<T, F>(&self, mode: RetryMode, operation: &str, make: F) -> Result<T, LlmError>
    where
        T: DeserializeOwned,
        F: Fn() -> RequestBuilder,
    {
        self.retry
            .run(mode, operation, || async {
                let response = self.send_once(make()).await.map_err(SendError::into_error)?;
                self.read_json(response).await.map_err(ReadError::into_error)
            })
            .await
    }

    /// A call with retries whose answer is a JSONL stream; only opening the stream is retried.
    pub(crate) async fn call_lines<T, F>(
        &self,
        mode: RetryMode,
        operation: &str,
        make: F,
    ) -> Result<JsonLines<T>, LlmError>
    where
        T: DeserializeOwned + Send + 'static,
        F: Fn() -> RequestBuilder,
    {
        let response = self
            .retry
            .run(mode, operation, || async {
                self.send_once(make()).await.map_err(SendError::into_error)
            })
            .await?;
        Ok(decode_lines(
            self.provider,
            Box::pin(response.bytes_stream()),
            self.read_limits,
        ))
    }

    /// A create or upload: exactly one attempt, with the outcome classified for reconciliation.
    pub(crate) async fn create<T: DeserializeOwned>(
        &self,
        operation: &str,
        builder: RequestBuilder,
    ) -> CreateOutcome<T> {
        let outcome = match self.send_once(builder).await {
            Ok(response) => match self.read_json(response).await {
                Ok(value) => CreateOutcome::Created(value),
                Err(ReadError::Body(error) | ReadError::Decode(error)) => CreateOutcome::Unknown(self.ambiguous(
                    format!("the provider answered 2xx but the body was lost or unreadable ({error})"),
                )),
            },
            Err(SendError::Transport {
                never_sent: true,
                error,
            }) => CreateOutcome::Rejected(error),
            Err(SendError::Transport {
                never_sent: false,
                error,
            }) => CreateOutcome::Unknown(self.ambiguous(format!("no answer after sending ({error})"))),
            Err(SendError::Status { status, error }) if status < 500 || status == 529 => CreateOutcome::Rejected(error),
            Err(SendError::Status { error, .. }) => {
                CreateOutcome::Unknown(self.ambiguous(format!("server error after sending ({error})")))
            }
        };
        match &outcome {
            CreateOutcome::Created(_) => tracing::info!(provider = self.provider, operation, "created"),
            CreateOutcome::Rejected(error) => {
                tracing::warn!(provider = self.provider, operation, %error, "create rejected")
            }
            CreateOutcome::Unknown(error) => {
                tracing::warn!(provider = self.provider, operation, %error, "create outcome unknown")
            }
        }
        outcome
    }

    fn ambiguous(&self, detail: String) -> LlmError {
        LlmError::Ambiguous {
            provider: self.provider,
            detail: detail.into(),
        }
    }
}

fn log_request_id(provider: &'static str, headers: &HeaderMap) {
    let id = headers
        .get("request-id")
        .or_else(|| headers.get("x-request-id"))
        .and_then(|value| value.to_str().ok());
    if let Some(id) = id {
        tracing::debug!(provider, request_id = id, "provider answered");
    }
}

/// Why one attempt failed before a body was read.
#[derive(Debug)]
pub(crate) enum SendError {
    /// No response; `never_sent` when the connection was never opened.
    Transport { never_sent: bool, error: LlmError },
    /// A non-2xx response.
    Status { status: u16, error: LlmError },
}

impl SendError {
    pub(crate) fn into_error(self) -> LlmError {
        match self {
            SendError::Transport { error, .. } | SendError::Status { error, .. } => error,
        }
    }
}

/// Why a 2xx body could not be read.
#[derive(Debug)]
pub(crate) enum ReadError {
    /// The connection broke while reading.
    Body(LlmError),
    /// The body is not what we expected.
    Decode(LlmError),
}

impl ReadError {
    pub(crate) fn into_error(self) -> LlmError {
        match self {
            ReadError::Body(error) | ReadError::Decode(error) => error,
        }
    }
}
