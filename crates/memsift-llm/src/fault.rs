//! What a failed provider call means for the lane that made it, decided once, where the call is made.
//!
//! [`LlmError`] says what the provider answered; [`ProviderFault`] adds what memsift must do about
//! it, which depends on the call as well as the answer: a 404 on a batch create means the base URL
//! is wrong, a 404 on a poll right after a create is the provider catching up. The batch
//! coordinator and the lanes match on [`FaultClass`] and never look at status codes themselves.

use memsift_core::config::ProviderKind;
use serde::Serialize;

use crate::error::LlmError;
use crate::params::ResolvedLlm;

/// Which kind of call failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Call {
    /// One model call (Messages, chat completions).
    Generate,
    /// A batch create or a batch file upload.
    Create,
    /// A listing (batches, models, files): the cheapest read of an endpoint.
    List,
    /// A batch retrieve.
    Poll,
    /// A results or file download.
    Download,
    /// A delete or cancel of something we created.
    Cleanup,
}

/// What a failure asks of memsift.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FaultClass {
    /// The configuration is wrong (key, base URL, model, quota, batch parameters): no call of this
    /// lane can succeed until an operator fixes it. It pauses the lane and never spends an attempt.
    Setting,
    /// The provider is unwell (no connection, 5xx, overloaded, an unknown create outcome): it
    /// counts against the lane's health and spends no request's attempt: a batch create failing
    /// so opens the lane at once, an immediate call's request waits for the lane's next probe.
    Outage,
    /// Try the same call again later (429, 408, 409): says nothing about the request; the client
    /// retries it, and one that outlasts those retries waits for its lane like an outage.
    Retry,
    /// This one request cannot succeed as it is (400, 413, 422): its attempt is spent.
    Request,
}

/// A failed call with its class and, for a setting fault, the likely fix.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("{error}{}", .fix.as_ref().map(|fix| format!("; likely fix: {fix}")).unwrap_or_default())]
pub struct ProviderFault {
    /// What to do about it.
    pub class: FaultClass,
    /// What the provider answered.
    pub error: LlmError,
    /// What an operator most likely has to change (setting faults only).
    pub fix: Option<String>,
}

impl ProviderFault {
    /// Classifies `error`, the answer to a `call` made with `llm`'s settings.
    pub fn classify(error: LlmError, call: Call, llm: &ResolvedLlm) -> ProviderFault {
        let class = class_of(&error, call);
        let fix = (class == FaultClass::Setting).then(|| likely_fix(&error, call, llm));
        ProviderFault { class, error, fix }
    }

    /// A fault of our own making that is not the provider's answer (a task that panicked).
    pub fn retry(error: LlmError) -> ProviderFault {
        ProviderFault {
            class: FaultClass::Retry,
            error,
            fix: None,
        }
    }

    /// Whether the lane must pause for an operator.
    pub fn is_setting(&self) -> bool {
        self.class == FaultClass::Setting
    }
}

fn class_of(error: &LlmError, call: Call) -> FaultClass {
    match error {
        LlmError::Auth { .. } | LlmError::QuotaExhausted { .. } | LlmError::Usage { .. } => FaultClass::Setting,
        // A 404 where the object is ours to name (the endpoint itself, or the model) means the
        // URL or the model is wrong; on a poll or download it is the provider catching up.
        LlmError::NotFound { .. } => match call {
            Call::Generate | Call::Create | Call::List => FaultClass::Setting,
            Call::Poll | Call::Download | Call::Cleanup => FaultClass::Request,
        },
        LlmError::InvalidRequest { detail, .. } if names_an_unknown_model(detail) => FaultClass::Setting,
        // A whole batch refused at create carries only parameters that come from the configuration.
        LlmError::InvalidRequest { .. } if call == Call::Create => FaultClass::Setting,
        LlmError::InvalidRequest { .. } | LlmError::TooLarge { .. } => FaultClass::Request,
        // A 2xx that is not the provider's format is usually not the provider (a proxy, a web
        // server at a wrong URL) on a listing; elsewhere a protocol change, as bad for every call.
        LlmError::Protocol { .. } => FaultClass::Setting,
        LlmError::Transient { status: None, .. } | LlmError::Ambiguous { .. } | LlmError::Overloaded { .. } => {
            FaultClass::Outage
        }
        LlmError::Transient {
            status: Some(status), ..
        } if *status >= 500 => FaultClass::Outage,
        LlmError::Transient { .. } | LlmError::RateLimited { .. } => FaultClass::Retry,
    }
}

/// Whether a provider's message says the model does not exist (OpenAI `model_not_found`,
/// Anthropic `model: …` not found, Ollama and vLLM "model … not found / does not exist").
fn names_an_unknown_model(detail: &str) -> bool {
    let detail = detail.to_lowercase();
    detail.contains("model_not_found")
        || (detail.contains("model")
            && [
                "not found",
                "does not exist",
                "unknown model",
                "invalid model",
                "no such model",
            ]
            .iter()
            .any(|phrase| detail.contains(phrase)))
}

/// The operator's most likely fix for a setting fault, naming the config key.
fn likely_fix(error: &LlmError, call: Call, llm: &ResolvedLlm) -> String {
    let key = &llm.key;
    let endpoint = llm.endpoint.as_deref().map(|url| url.trim_end_matches('/'));
    match error {
        LlmError::Auth { .. } => format!(
            "check the API key of llm.{key} (api_key_env or api_key_file): it is wrong, revoked or lacks permission, or the account cannot pay"
        ),
        LlmError::QuotaExhausted { .. } => {
            format!("raise the quota or budget of the account behind llm.{key} at the provider")
        }
        LlmError::Usage { detail, .. } => format!("fix llm.{key}: {detail}"),
        LlmError::NotFound { detail, .. } | LlmError::InvalidRequest { detail, .. }
            if names_an_unknown_model(detail) && !url_is_suspect(llm.provider, endpoint) =>
        {
            format!(
                "the provider does not know model `{}`; set llm.{key}.model to a model it serves",
                llm.model
            )
        }
        LlmError::NotFound { .. } | LlmError::Protocol { .. } => match (llm.provider, endpoint) {
            (ProviderKind::Openai | ProviderKind::OpenaiCompatible, Some(url)) if !url.ends_with("/v1") => format!(
                "OpenAI base URLs end in /v1 (e.g. https://api.openai.com/v1); set llm.{key}.endpoint = \"{url}/v1\""
            ),
            (ProviderKind::Anthropic, Some(url)) if url.ends_with("/v1") => format!(
                "Anthropic base URLs have no /v1 (e.g. https://api.anthropic.com); set llm.{key}.endpoint = \"{}\"",
                url.trim_end_matches("/v1")
            ),
            _ if call == Call::Generate => format!(
                "check llm.{key}.endpoint and llm.{key}.model: the provider answered that `{}` or the URL does not exist",
                llm.model
            ),
            _ => format!(
                "check llm.{key}.endpoint: the provider's batch API is not at that URL (or this provider has none; use lane = \"immediate\")"
            ),
        },
        LlmError::InvalidRequest { .. } => format!(
            "the provider refused the whole batch; check llm.{key}'s model, max_tokens, thinking_budget_tokens and temperature against its limits"
        ),
        _ => format!("check llm.{key}"),
    }
}

/// Whether the base URL breaks the provider's own rule about `/v1`, which makes every path a 404.
fn url_is_suspect(provider: ProviderKind, endpoint: Option<&str>) -> bool {
    match (provider, endpoint) {
        (ProviderKind::Openai | ProviderKind::OpenaiCompatible, Some(url)) => !url.ends_with("/v1"),
        (ProviderKind::Anthropic, Some(url)) => url.ends_with("/v1"),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use memsift_core::config::{LanePolicy, LlmConfig};

    use super::*;

    fn llm(provider: ProviderKind, endpoint: Option<&str>) -> ResolvedLlm {
        let config = LlmConfig {
            provider,
            endpoint: endpoint.map(str::to_owned),
            model: Some("gpt-4o-mini".to_owned()),
            api_key_env: None,
            api_key_file: None,
            lane: LanePolicy::Batch,
            temperature: None,
            max_tokens: 1024,
            thinking_budget_tokens: None,
            cache_ttl: "1h".to_owned(),
            fallback: Vec::new(),
        };
        ResolvedLlm::resolve("extraction_standard", &config).unwrap()
    }

    fn not_found() -> LlmError {
        LlmError::NotFound {
            provider: "openai",
            detail: "HTTP 404".to_owned().into(),
        }
    }

    #[test]
    fn a_404_is_a_setting_fault_where_we_name_the_path_and_a_snooze_where_the_provider_catches_up() {
        let openai = llm(ProviderKind::Openai, Some("http://127.0.0.1:8080"));
        for call in [Call::Create, Call::List, Call::Generate] {
            let fault = ProviderFault::classify(not_found(), call, &openai);
            assert_eq!(fault.class, FaultClass::Setting, "{call:?}");
            assert_eq!(
                fault.fix.as_deref(),
                Some(
                    "OpenAI base URLs end in /v1 (e.g. https://api.openai.com/v1); set llm.extraction_standard.endpoint = \"http://127.0.0.1:8080/v1\""
                )
            );
        }
        for call in [Call::Poll, Call::Download, Call::Cleanup] {
            let fault = ProviderFault::classify(not_found(), call, &openai);
            assert_eq!(fault.class, FaultClass::Request, "{call:?}");
            assert_eq!(fault.fix, None);
        }
        let anthropic = llm(ProviderKind::Anthropic, Some("https://api.anthropic.com/v1/"));
        let fault = ProviderFault::classify(not_found(), Call::Create, &anthropic);
        assert!(
            fault.to_string().ends_with(
                "likely fix: Anthropic base URLs have no /v1 (e.g. https://api.anthropic.com); set llm.extraction_standard.endpoint = \"https://api.anthropic.com\""
            ),
            "{fault}"
        );
    }

    #[test]
    fn every_error_has_one_class_and_only_setting_faults_carry_a_fix() {
        let openai = llm(ProviderKind::Openai, Some("http://127.0.0.1:8080/v1"));
        let cases = [
            (
                LlmError::Auth {
                    provider: "openai",
                    status: 401,
                    detail: "invalid_api_key".into(),
                },
                Call::Poll,
                FaultClass::Setting,
            ),
            (
                LlmError::QuotaExhausted {
                    provider: "openai",
                    detail: "insufficient_quota".into(),
                },
                Call::Generate,
                FaultClass::Setting,
            ),
            (
                LlmError::InvalidRequest {
                    provider: "openai",
                    status: 404,
                    detail: "model_not_found: The model `gpt-9` does not exist".into(),
                },
                Call::Generate,
                FaultClass::Setting,
            ),
            (
                LlmError::InvalidRequest {
                    provider: "openai",
                    status: 400,
                    detail: "max_tokens is too large".into(),
                },
                Call::Create,
                FaultClass::Setting,
            ),
            (
                LlmError::InvalidRequest {
                    provider: "openai",
                    status: 400,
                    detail: "messages: too long".into(),
                },
                Call::Generate,
                FaultClass::Request,
            ),
            (
                LlmError::Transient {
                    provider: "openai",
                    status: Some(500),
                    detail: "boom".into(),
                },
                Call::Generate,
                FaultClass::Outage,
            ),
            (
                LlmError::Transient {
                    provider: "openai",
                    status: None,
                    detail: "could not connect".into(),
                },
                Call::List,
                FaultClass::Outage,
            ),
            (
                LlmError::RateLimited {
                    provider: "openai",
                    retry_after: None,
                    detail: "slow down".into(),
                },
                Call::Create,
                FaultClass::Retry,
            ),
        ];
        for (error, call, class) in cases {
            let fault = ProviderFault::classify(error.clone(), call, &openai);
            assert_eq!(fault.class, class, "{error}");
            assert_eq!(fault.fix.is_some(), class == FaultClass::Setting, "{error}");
        }
        let model = ProviderFault::classify(
            LlmError::NotFound {
                provider: "openai",
                detail: "model_not_found: no such model".into(),
            },
            Call::Generate,
            &openai,
        );
        assert_eq!(
            model.fix.as_deref(),
            Some(
                "the provider does not know model `gpt-4o-mini`; set llm.extraction_standard.model to a model it serves"
            )
        );
    }
}
