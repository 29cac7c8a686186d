//! The one error type of every provider call, classified by what the caller must do next.
//!
//! Messages never contain an API key: they are built from status codes, provider error bodies and
//! URLs, none of which carry credentials (keys travel only in request headers); a URL is shown
//! redacted all the same, since an endpoint may carry a `?key=`. Text a provider wrote is cut to
//! [`MAX_DETAIL_CHARS`] when an error is made ([`Detail`]), because providers quote prompts back
//! and error texts are stored in the database and logged.

use std::time::{Duration, SystemTime};

use reqwest::StatusCode;
use reqwest::header::HeaderMap;

/// Most characters of provider-written text an error keeps: enough for the provider's reason, too
/// few to carry much of a prompt quoted back in it.
pub const MAX_DETAIL_CHARS: usize = 300;

/// Text of an error that may come from a provider, cut to [`MAX_DETAIL_CHARS`] characters (on a
/// character boundary, marked with `…`) when it is made, so no path can store or log more.
#[derive(Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(from = "String", into = "String")]
pub struct Detail(String);

impl Detail {
    /// The text, cut.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl From<String> for Detail {
    fn from(mut text: String) -> Self {
        if let Some((cut_at, _)) = text.char_indices().nth(MAX_DETAIL_CHARS) {
            text.truncate(cut_at);
            text.push('…');
        }
        Detail(text)
    }
}

impl From<&str> for Detail {
    fn from(text: &str) -> Self {
        let end = text
            .char_indices()
            .nth(MAX_DETAIL_CHARS + 1)
            .map_or(text.len(), |(at, _)| at);
        Detail::from(text[..end].to_owned())
    }
}

impl From<Detail> for String {
    fn from(detail: Detail) -> Self {
        detail.0
    }
}

impl std::ops::Deref for Detail {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for Detail {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::fmt::Debug for Detail {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(&self.0, f)
    }
}

/// A failed provider call. The variant says what to do; the message says what happened.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LlmError {
    /// A 5xx, timeout or dropped connection: retry later with backoff.
    #[error("{provider}: transient failure ({detail}); retry later with backoff")]
    Transient {
        /// Which provider answered.
        provider: &'static str,
        /// The HTTP status, when there was a response.
        status: Option<u16>,
        /// What happened.
        detail: Detail,
    },
    /// A 429: wait `retry_after` (or back off) before the next call to this provider and model.
    #[error("{provider}: rate limited ({detail}); wait {} before retrying", describe_wait(*.retry_after))]
    RateLimited {
        /// Which provider answered.
        provider: &'static str,
        /// How long the provider asked us to wait.
        retry_after: Option<Duration>,
        /// What happened.
        detail: Detail,
    },
    /// A 529: the provider is overloaded as a whole; back off, or fail over to another lane.
    #[error("{provider}: overloaded ({detail}); back off or fail over")]
    Overloaded {
        /// Which provider answered.
        provider: &'static str,
        /// How long the provider asked us to wait.
        retry_after: Option<Duration>,
        /// What happened.
        detail: Detail,
    },
    /// A 400/422: the request itself is wrong; fix it, retrying will not help.
    #[error("{provider}: invalid request (HTTP {status}: {detail}); fix the request, retrying will not help")]
    InvalidRequest {
        /// Which provider answered.
        provider: &'static str,
        /// The HTTP status.
        status: u16,
        /// The provider's message.
        detail: Detail,
    },
    /// A 401/402/403: the key is missing, wrong, lacks permission, or the account cannot pay.
    #[error("{provider}: not authorised (HTTP {status}: {detail}); check the API key, its permissions and billing")]
    Auth {
        /// Which provider answered.
        provider: &'static str,
        /// The HTTP status.
        status: u16,
        /// The provider's message.
        detail: Detail,
    },
    /// A 429 whose body says the quota is exhausted: only an operator can fix it.
    #[error("{provider}: quota exhausted ({detail}); raise the account's quota or budget")]
    QuotaExhausted {
        /// Which provider answered.
        provider: &'static str,
        /// The provider's message.
        detail: Detail,
    },
    /// A 404: the object does not exist (or not yet: see the transient-404 grace in the clients).
    // No fix here: a 404 on a create is a wrong endpoint, on a read a lost or not yet visible
    // object; the fault classification (`fault.rs`) and the callers name which.
    #[error("{provider}: not found ({detail})")]
    NotFound {
        /// Which provider answered.
        provider: &'static str,
        /// The provider's message.
        detail: Detail,
    },
    /// A 413, or a body we refused to send because it is over the provider's limit: split the batch.
    #[error("{provider}: request too large ({detail}); split it into smaller batches")]
    TooLarge {
        /// Which provider answered.
        provider: &'static str,
        /// What was too large.
        detail: Detail,
    },
    /// A create or upload whose outcome is unknown: it may or may not exist. Reconcile through the
    /// list endpoint before creating it again.
    #[error("{provider}: outcome unknown ({detail}); reconcile via the list endpoint before re-creating")]
    Ambiguous {
        /// Which provider answered.
        provider: &'static str,
        /// What happened.
        detail: Detail,
    },
    /// The provider answered 2xx with a body we could not read: a protocol change or a proxy in the way.
    #[error("{provider}: unexpected response ({detail}); report it, the provider's format may have changed")]
    Protocol {
        /// Which provider answered.
        provider: &'static str,
        /// What could not be read.
        detail: Detail,
    },
    /// The client cannot be built or called as configured (bad URL, missing key, batch not ended).
    #[error("{provider}: {detail}")]
    Usage {
        /// Which provider.
        provider: &'static str,
        /// What is wrong and how to fix it.
        detail: Detail,
    },
}

fn describe_wait(wait: Option<Duration>) -> String {
    match wait {
        Some(wait) => format!("{} ms", wait.as_millis()),
        None => "a backoff interval".to_owned(),
    }
}

impl LlmError {
    /// Whether a plain retry of a read (GET, immediate call) can succeed.
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            LlmError::Transient { .. } | LlmError::RateLimited { .. } | LlmError::Overloaded { .. }
        )
    }

    /// The wait the provider asked for, if any.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            LlmError::RateLimited { retry_after, .. } | LlmError::Overloaded { retry_after, .. } => *retry_after,
            _ => None,
        }
    }

    /// The HTTP status this error came from, if there was a response.
    pub fn status(&self) -> Option<u16> {
        match self {
            LlmError::Transient { status, .. } => *status,
            LlmError::RateLimited { .. } | LlmError::QuotaExhausted { .. } => Some(429),
            LlmError::Overloaded { .. } => Some(529),
            LlmError::InvalidRequest { status, .. } | LlmError::Auth { status, .. } => Some(*status),
            LlmError::NotFound { .. } => Some(404),
            LlmError::TooLarge { .. } => Some(413),
            LlmError::Ambiguous { .. } | LlmError::Protocol { .. } | LlmError::Usage { .. } => None,
        }
    }

    /// Classifies a non-success HTTP response from its status, headers and body.
    pub fn from_response(provider: &'static str, status: StatusCode, headers: &HeaderMap, body: &[u8]) -> LlmError {
        let (kind, message) = error_body(body);
        let detail = Detail::from(match (&kind, message) {
            (Some(kind), Some(message)) => format!("{kind}: {message}"),
            (None, Some(message)) => message,
            (Some(kind), None) => kind.clone(),
            (None, None) => format!("HTTP {}", status.as_u16()),
        });
        let code = status.as_u16();
        match code {
            400 | 422 => LlmError::InvalidRequest {
                provider,
                status: code,
                detail,
            },
            401..=403 => LlmError::Auth {
                provider,
                status: code,
                detail,
            },
            404 => LlmError::NotFound { provider, detail },
            413 => LlmError::TooLarge { provider, detail },
            429 if kind.as_deref() == Some("insufficient_quota") => LlmError::QuotaExhausted { provider, detail },
            429 => LlmError::RateLimited {
                provider,
                retry_after: retry_after(headers, SystemTime::now()),
                detail,
            },
            529 => LlmError::Overloaded {
                provider,
                retry_after: retry_after(headers, SystemTime::now()),
                detail,
            },
            // 408 and 409 are what both official SDKs retry; everything else ≥ 500 is the server's problem.
            408 | 409 => LlmError::Transient {
                provider,
                status: Some(code),
                detail,
            },
            code if code >= 500 => LlmError::Transient {
                provider,
                status: Some(code),
                detail,
            },
            _ => LlmError::InvalidRequest {
                provider,
                status: code,
                detail,
            },
        }
    }

    /// Classifies a transport failure (no usable response).
    pub fn from_transport(provider: &'static str, error: &reqwest::Error) -> LlmError {
        // reqwest's Display includes the URL but never headers; the URL is shown redacted, since
        // an endpoint may carry a key as a query parameter.
        let mut text = error.to_string();
        if let Some(url) = error.url() {
            text = text.replace(url.as_str(), &memsift_core::redact::redact_url(url.as_str()));
        }
        let kind = if error.is_timeout() {
            "timed out"
        } else if error.is_connect() {
            "could not connect"
        } else if error.is_body() || error.is_decode() {
            "connection dropped while reading the body"
        } else {
            "connection failed"
        };
        LlmError::Transient {
            provider,
            status: None,
            detail: format!("{kind}: {text}").into(),
        }
    }
}

/// Reads `error.type` and `error.message` from either provider's error envelope:
/// Anthropic `{type: "error", error: {type, message}}`, OpenAI `{error: {message, type, code}}`.
fn error_body(body: &[u8]) -> (Option<String>, Option<String>) {
    let Ok(value) = serde_json::from_slice::<serde_json::Value>(body) else {
        let text = String::from_utf8_lossy(body)
            .trim()
            .chars()
            .take(200)
            .collect::<String>();
        return (None, (!text.is_empty()).then_some(text));
    };
    let error = value.get("error").unwrap_or(&value);
    let text = |key: &str| error.get(key).and_then(|v| v.as_str()).map(str::to_owned);
    // OpenAI's `code` is the more specific word (`insufficient_quota`), Anthropic has only `type`.
    let kind = text("code").or_else(|| text("type"));
    (kind, text("message"))
}

/// The wait a response asks for: `retry-after-ms` first, then `retry-after` as seconds (a float is
/// accepted) or an HTTP date. `now` is passed in so tests can pin the date case.
pub fn retry_after(headers: &HeaderMap, now: SystemTime) -> Option<Duration> {
    let header = |name: &str| headers.get(name).and_then(|value| value.to_str().ok()).map(str::trim);
    if let Some(ms) = header("retry-after-ms").and_then(|value| value.parse::<f64>().ok())
        && ms.is_finite()
        && ms >= 0.0
    {
        return Some(Duration::from_secs_f64(ms / 1000.0));
    }
    let value = header("retry-after")?;
    if let Ok(seconds) = value.parse::<f64>() {
        return (seconds.is_finite() && seconds >= 0.0).then(|| Duration::from_secs_f64(seconds));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

/// `{type, message}`, both cut as they are read (the message can quote the prompt).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ErrorDetail {
    /// `invalid_request_error`, `api_error`, `overloaded_error`, …
    #[serde(rename = "type")]
    pub kind: Detail,
    /// What went wrong.
    #[serde(default)]
    pub message: Detail,
}

impl ErrorDetail {
    /// Whether resending the same request can succeed: invalid requests must be fixed first.
    pub fn retryable(&self) -> bool {
        self.kind.as_str() != "invalid_request_error"
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use reqwest::header::HeaderValue;

    use super::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        /// Whatever a provider writes, and however long, an error keeps at most a few hundred
        /// characters of it, cut on a character boundary: a prefix of what was written.
        #[test]
        fn provider_text_is_cut_to_a_few_hundred_characters(message in "\\PC{0,1200}", status in 400u16..600) {
            let body = serde_json::json!({"type": "error", "error": {"type": "invalid_request_error", "message": message}});
            let error = LlmError::from_response(
                "test",
                StatusCode::from_u16(status).unwrap(),
                &HeaderMap::new(),
                body.to_string().as_bytes(),
            );
            let shown = error.to_string();
            let detail: String = match &error {
                LlmError::Transient { detail, .. }
                | LlmError::RateLimited { detail, .. }
                | LlmError::Overloaded { detail, .. }
                | LlmError::InvalidRequest { detail, .. }
                | LlmError::Auth { detail, .. }
                | LlmError::QuotaExhausted { detail, .. }
                | LlmError::NotFound { detail, .. }
                | LlmError::TooLarge { detail, .. }
                | LlmError::Ambiguous { detail, .. }
                | LlmError::Protocol { detail, .. }
                | LlmError::Usage { detail, .. } => detail.to_string(),
            };
            prop_assert!(detail.chars().count() <= MAX_DETAIL_CHARS + 1, "{} chars", detail.chars().count());
            prop_assert!(shown.contains(&detail));
            let written = format!("invalid_request_error: {message}");
            match detail.strip_suffix('…') {
                Some(kept) if written.chars().count() > MAX_DETAIL_CHARS => {
                    prop_assert_eq!(kept.chars().count(), MAX_DETAIL_CHARS);
                    prop_assert!(written.starts_with(kept));
                }
                _ => prop_assert_eq!(&detail, &written),
            }
            // A batch result's error is read through the same type.
            let read: ErrorEnvelopeRead = serde_json::from_value(body).unwrap();
            prop_assert!(read.error.message.chars().count() <= MAX_DETAIL_CHARS + 1);
        }
    }

    #[tokio::test]
    async fn a_transport_error_shows_the_url_without_its_secrets() {
        // A signed download URL, as providers hand out for batch results, on a port nothing serves.
        let url = "http://user:Basic-Secret-1@127.0.0.1:1/results?X-Amz-Credential=Cred-Secret-2&X-Amz-Signature=Sig-Secret-3&Trailing-Part-4";
        let _ = rustls::crypto::ring::default_provider().install_default();
        let error = reqwest::Client::new().get(url).send().await.unwrap_err();
        let error = LlmError::from_transport("test", &error);
        let shown = format!("{error} {error:?}");
        assert!(
            shown.contains("could not connect") && shown.contains("127.0.0.1:1/results?"),
            "{shown}"
        );
        for secret in ["Basic-Secret-1", "Cred-Secret-2", "Sig-Secret-3", "Trailing-Part-4"] {
            assert!(!shown.contains(secret), "{shown}");
        }
    }

    /// An error envelope as a batch results line carries it.
    #[derive(serde::Deserialize)]
    struct ErrorEnvelopeRead {
        error: ErrorDetail,
    }

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, HeaderValue::from_str(value).unwrap());
        }
        map
    }

    #[test]
    fn retry_after_prefers_milliseconds_then_seconds_then_a_date() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let both = headers(&[("retry-after-ms", "250"), ("retry-after", "9")]);
        assert_eq!(retry_after(&both, now), Some(Duration::from_millis(250)));
        assert_eq!(
            retry_after(&headers(&[("retry-after", "1.5")]), now),
            Some(Duration::from_millis(1500))
        );
        let date = httpdate::fmt_http_date(now + Duration::from_secs(30));
        assert_eq!(
            retry_after(&headers(&[("retry-after", &date)]), now),
            Some(Duration::from_secs(30))
        );
        assert_eq!(retry_after(&headers(&[("retry-after", "soon")]), now), None);
        assert_eq!(retry_after(&HeaderMap::new(), now), None);
    }

    #[test]
    fn statuses_map_to_what_the_caller_must_do() {
        let anthropic = br#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;
        let empty = HeaderMap::new();
        let class =
            |code: u16, body: &[u8]| LlmError::from_response("test", StatusCode::from_u16(code).unwrap(), &empty, body);
        assert!(matches!(class(529, anthropic), LlmError::Overloaded { .. }));
        assert!(matches!(class(500, b""), LlmError::Transient { status: Some(500), .. }));
        assert!(matches!(
            class(400, b"{}"),
            LlmError::InvalidRequest { status: 400, .. }
        ));
        assert!(matches!(
            class(422, b"{}"),
            LlmError::InvalidRequest { status: 422, .. }
        ));
        assert!(matches!(class(401, b"{}"), LlmError::Auth { status: 401, .. }));
        assert!(matches!(class(403, b"{}"), LlmError::Auth { status: 403, .. }));
        assert!(matches!(class(404, b"{}"), LlmError::NotFound { .. }));
        assert!(matches!(class(413, b"<html>too big</html>"), LlmError::TooLarge { .. }));
        assert!(matches!(class(429, b"{}"), LlmError::RateLimited { .. }));
        let quota = br#"{"error":{"message":"You exceeded your quota","type":"insufficient_quota","code":"insufficient_quota"}}"#;
        assert!(matches!(class(429, quota), LlmError::QuotaExhausted { .. }));
        let text = class(529, anthropic).to_string();
        assert!(text.contains("overloaded_error: Overloaded"), "{text}");
    }
}
