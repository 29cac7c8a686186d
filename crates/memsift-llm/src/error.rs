//! The one error type of every provider call, classified by what the caller must do next.
//!
//! Messages never contain an API key: they are built from status codes, provider error bodies and
//! URLs, none of which carry credentials (keys travel only in request headers).

use std::time::{Duration, SystemTime};

use reqwest::StatusCode;
use reqwest::header::HeaderMap;

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
        detail: String,
    },
    /// A 429: wait `retry_after` (or back off) before the next call to this provider and model.
    #[error("{provider}: rate limited ({detail}); wait {} before retrying", describe_wait(*.retry_after))]
    RateLimited {
        /// Which provider answered.
        provider: &'static str,
        /// How long the provider asked us to wait.
        retry_after: Option<Duration>,
        /// What happened.
        detail: String,
    },
    /// A 529: the provider is overloaded as a whole; back off, or fail over to another lane.
    #[error("{provider}: overloaded ({detail}); back off or fail over")]
    Overloaded {
        /// Which provider answered.
        provider: &'static str,
        /// How long the provider asked us to wait.
        retry_after: Option<Duration>,
        /// What happened.
        detail: String,
    },
    /// A 400/422: the request itself is wrong; fix it, retrying will not help.
    #[error("{provider}: invalid request (HTTP {status}: {detail}); fix the request, retrying will not help")]
    InvalidRequest {
        /// Which provider answered.
        provider: &'static str,
        /// The HTTP status.
        status: u16,
        /// The provider's message.
        detail: String,
    },
    /// A 401/402/403: the key is missing, wrong, lacks permission, or the account cannot pay.
    #[error("{provider}: not authorised (HTTP {status}: {detail}); check the API key, its permissions and billing")]
    Auth {
        /// Which provider answered.
        provider: &'static str,
        /// The HTTP status.
        status: u16,
        /// The provider's message.
        detail: String,
    },
    /// A 429 whose body says the quota is exhausted: only an operator can fix it.
    #[error("{provider}: quota exhausted ({detail}); raise the account's quota or budget")]
    QuotaExhausted {
        /// Which provider answered.
        provider: &'static str,
        /// The provider's message.
        detail: String,
    },
    /// A 404: the object does not exist (or not yet: see the transient-404 grace in the clients).
    #[error("{provider}: not found ({detail}); check the id, or reconcile if it was just created")]
    NotFound {
        /// Which provider answered.
        provider: &'static str,
        /// The provider's message.
        detail: String,
    },
    /// A 413, or a body we refused to send because it is over the provider's limit: split the batch.
    #[error("{provider}: request too large ({detail}); split it into smaller batches")]
    TooLarge {
        /// Which provider answered.
        provider: &'static str,
        /// What was too large.
        detail: String,
    },
    /// A create or upload whose outcome is unknown: it may or may not exist. Reconcile through the
    /// list endpoint before creating it again.
    #[error("{provider}: outcome unknown ({detail}); reconcile via the list endpoint before re-creating")]
    Ambiguous {
        /// Which provider answered.
        provider: &'static str,
        /// What happened.
        detail: String,
    },
    /// The provider answered 2xx with a body we could not read: a protocol change or a proxy in the way.
    #[error("{provider}: unexpected response ({detail}); report it, the provider's format may have changed")]
    Protocol {
        /// Which provider answered.
        provider: &'static str,
        /// What could not be read.
        detail: String,
    },
    /// The client cannot be built or called as configured (bad URL, missing key, batch not ended).
    #[error("{provider}: {detail}")]
    Usage {
        /// Which provider.
        provider: &'static str,
        /// What is wrong and how to fix it.
        detail: String,
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
        let detail = match (&kind, message) {
            (Some(kind), Some(message)) => format!("{kind}: {message}"),
            (None, Some(message)) => message,
            (Some(kind), None) => kind.clone(),
            (None, None) => format!("HTTP {}", status.as_u16()),
        };
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
        // reqwest's Display includes the URL but never headers, so the key cannot leak through it.
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
            detail: format!("{kind}: {error}"),
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

#[cfg(test)]
mod tests {
    use reqwest::header::HeaderValue;

    use super::*;

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
