//! From a `{purpose}_{tier}` config to request params: validation that `memsift check-config`
//! reports, the resolved config, and the one function that builds every Anthropic request.

use memsift_core::config::{LanePolicy, LlmConfig, ProviderKind};
use memsift_core::status::Purpose;

use crate::anthropic::{CacheControl, CacheTtl, InputMessage, MessageParams, SystemBlock, ThinkingConfig};
use crate::openai::{ChatMessage, ChatRequest};

/// The smallest thinking budget providers accept.
pub const MIN_THINKING_BUDGET: u32 = 1024;
/// The longest `custom_id` Anthropic accepts.
pub const MAX_CUSTOM_ID_LEN: usize = 64;

/// One invalid setting, worded as one line naming the key and the fix.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LlmConfigError {
    /// A provider that needs a model has none.
    #[error("llm.{key}.model is unset; name the model, e.g. model = \"claude-haiku-4-5\"")]
    MissingModel {
        /// The `{purpose}_{tier}` key.
        key: String,
    },
    /// `max_tokens` is zero.
    #[error("llm.{key}.max_tokens = 0 is invalid; use at least 1 (default 8192)")]
    ZeroMaxTokens {
        /// The key.
        key: String,
    },
    /// The thinking budget is below the minimum.
    #[error(
        "llm.{key}.thinking_budget_tokens = {budget} is below {MIN_THINKING_BUDGET}; raise it to at least {MIN_THINKING_BUDGET} or remove it to turn thinking off"
    )]
    ThinkingBudgetTooSmall {
        /// The key.
        key: String,
        /// The budget.
        budget: u32,
    },
    /// The thinking budget leaves no room for the answer.
    #[error(
        "llm.{key}.thinking_budget_tokens = {budget} must be below max_tokens = {max_tokens}; raise max_tokens above the budget or lower the budget"
    )]
    ThinkingBudgetNotBelowMaxTokens {
        /// The key.
        key: String,
        /// The budget.
        budget: u32,
        /// The cap.
        max_tokens: u32,
    },
    /// A temperature other than 1 together with thinking.
    #[error(
        "llm.{key}.temperature = {temperature} cannot be combined with thinking_budget_tokens; remove temperature (thinking samples at 1)"
    )]
    TemperatureWithThinking {
        /// The key.
        key: String,
        /// The temperature.
        temperature: f64,
    },
    /// A temperature outside the provider's range.
    #[error("llm.{key}.temperature = {temperature} is out of range; use {min} to {max}")]
    TemperatureOutOfRange {
        /// The key.
        key: String,
        /// The temperature.
        temperature: f64,
        /// Lowest allowed.
        min: f64,
        /// Highest allowed.
        max: f64,
    },
    /// The cache TTL is not one the provider knows.
    #[error("llm.{key}.cache_ttl = \"{value}\" is invalid; use \"5m\" or \"1h\"")]
    BadCacheTtl {
        /// The key.
        key: String,
        /// The value.
        value: String,
    },
    /// The endpoint is not a URL.
    #[error("llm.{key}.endpoint = \"{value}\" is not an http(s) URL; use e.g. \"http://127.0.0.1:11434/v1\"")]
    BadEndpoint {
        /// The key.
        key: String,
        /// The value.
        value: String,
    },
    /// Thinking on a provider without it.
    #[error("llm.{key}.thinking_budget_tokens is set but provider {provider} has no extended thinking; remove it")]
    ThinkingUnsupported {
        /// The key.
        key: String,
        /// The provider.
        provider: String,
    },
    /// The batch lane forced on a provider that has none.
    #[error(
        "llm.{key}.lane = \"batch\" but provider {provider} has no batch API; use lane = \"immediate\" or \"auto\""
    )]
    NoBatchLane {
        /// The key.
        key: String,
        /// The provider.
        provider: String,
    },
    /// A `custom_id` the provider will refuse (the whole batch create fails with 400).
    #[error("custom_id `{custom_id}` is invalid: {reason}; use 1 to {MAX_CUSTOM_ID_LEN} characters from [a-zA-Z0-9_-]")]
    InvalidCustomId {
        /// The id.
        custom_id: String,
        /// What is wrong with it.
        reason: String,
    },
}

/// Every problem with one `{purpose}_{tier}` config; empty means valid.
pub fn validate_llm_config(key: &str, config: &LlmConfig) -> Vec<LlmConfigError> {
    let mut errors = Vec::new();
    let key_owned = || key.to_owned();
    let provider_name = match config.provider {
        ProviderKind::Heuristic => "heuristic",
        ProviderKind::Anthropic => "anthropic",
        ProviderKind::Openai => "openai",
        ProviderKind::OpenaiCompatible => "openai_compatible",
    }
    .to_owned();
    if config.provider == ProviderKind::Heuristic {
        return errors;
    }
    if config.model.as_deref().is_none_or(|model| model.trim().is_empty()) {
        errors.push(LlmConfigError::MissingModel { key: key_owned() });
    }
    if config.max_tokens == 0 {
        errors.push(LlmConfigError::ZeroMaxTokens { key: key_owned() });
    }
    if CacheTtl::parse(&config.cache_ttl).is_none() {
        errors.push(LlmConfigError::BadCacheTtl {
            key: key_owned(),
            value: config.cache_ttl.clone(),
        });
    }
    if let Some(endpoint) = &config.endpoint {
        let valid = reqwest::Url::parse(endpoint).is_ok_and(|url| matches!(url.scheme(), "http" | "https"));
        if !valid {
            errors.push(LlmConfigError::BadEndpoint {
                key: key_owned(),
                value: endpoint.clone(),
            });
        }
    }
    if config.provider == ProviderKind::OpenaiCompatible && config.lane == LanePolicy::Batch {
        errors.push(LlmConfigError::NoBatchLane {
            key: key_owned(),
            provider: provider_name.clone(),
        });
    }
    let max_temperature = if config.provider == ProviderKind::Anthropic {
        1.0
    } else {
        2.0
    };
    if let Some(temperature) = config.temperature
        && !(0.0..=max_temperature).contains(&temperature)
    {
        errors.push(LlmConfigError::TemperatureOutOfRange {
            key: key_owned(),
            temperature,
            min: 0.0,
            max: max_temperature,
        });
    }
    if let Some(budget) = config.thinking_budget_tokens {
        if config.provider != ProviderKind::Anthropic {
            errors.push(LlmConfigError::ThinkingUnsupported {
                key: key_owned(),
                provider: provider_name,
            });
        }
        if budget < MIN_THINKING_BUDGET {
            errors.push(LlmConfigError::ThinkingBudgetTooSmall {
                key: key_owned(),
                budget,
            });
        }
        if budget >= config.max_tokens {
            errors.push(LlmConfigError::ThinkingBudgetNotBelowMaxTokens {
                key: key_owned(),
                budget,
                max_tokens: config.max_tokens,
            });
        }
        if let Some(temperature) = config.temperature
            && temperature != 1.0
        {
            errors.push(LlmConfigError::TemperatureWithThinking {
                key: key_owned(),
                temperature,
            });
        }
    }
    errors
}

/// Checks a `custom_id` against `^[a-zA-Z0-9_-]{1,64}$`.
pub fn validate_custom_id(custom_id: &str) -> Result<(), LlmConfigError> {
    let reason = if custom_id.is_empty() {
        Some("it is empty".to_owned())
    } else if custom_id.len() > MAX_CUSTOM_ID_LEN {
        Some(format!("it is {} characters long", custom_id.len()))
    } else {
        custom_id
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || *c == '_' || *c == '-'))
            .map(|c| format!("it contains `{c}`"))
    };
    match reason {
        Some(reason) => Err(LlmConfigError::InvalidCustomId {
            custom_id: custom_id.to_owned(),
            reason,
        }),
        None => Ok(()),
    }
}

/// A validated config with defaults applied: what request builders read.
#[derive(Debug, Clone, PartialEq)]
pub struct ResolvedLlm {
    /// The `{purpose}_{tier}` key.
    pub key: String,
    /// The provider.
    pub provider: ProviderKind,
    /// Base URL, if not the provider's public one.
    pub endpoint: Option<String>,
    /// The model (empty for the heuristic provider).
    pub model: String,
    /// The lane policy.
    pub lane: LanePolicy,
    /// Temperature; `None` whenever thinking is on.
    pub temperature: Option<f64>,
    /// Output cap.
    pub max_tokens: u32,
    /// Thinking budget.
    pub thinking_budget_tokens: Option<u32>,
    /// System prompt cache TTL.
    pub cache_ttl: CacheTtl,
}

impl ResolvedLlm {
    /// Validates and resolves; the errors are those of [`validate_llm_config`].
    pub fn resolve(key: &str, config: &LlmConfig) -> Result<ResolvedLlm, Vec<LlmConfigError>> {
        let errors = validate_llm_config(key, config);
        if !errors.is_empty() {
            return Err(errors);
        }
        let thinking = config.thinking_budget_tokens;
        Ok(ResolvedLlm {
            key: key.to_owned(),
            provider: config.provider,
            endpoint: config.endpoint.clone(),
            model: config.model.clone().unwrap_or_default(),
            lane: config.lane,
            // Thinking samples at 1; sending a temperature with it is refused, so drop the harmless 1.
            temperature: if thinking.is_some() { None } else { config.temperature },
            max_tokens: config.max_tokens,
            thinking_budget_tokens: thinking,
            cache_ttl: CacheTtl::parse(&config.cache_ttl).unwrap_or(CacheTtl::OneHour),
        })
    }

    /// The offline heuristic lane under `key`, for work routed there by policy rather than by a
    /// configured section (a user over their daily budget).
    pub fn offline(key: &str) -> ResolvedLlm {
        ResolvedLlm {
            key: key.to_owned(),
            provider: ProviderKind::Heuristic,
            endpoint: None,
            model: String::new(),
            lane: LanePolicy::Auto,
            temperature: None,
            max_tokens: 4096,
            thinking_budget_tokens: None,
            cache_ttl: CacheTtl::OneHour,
        }
    }
}

/// The Anthropic params for one request: the system prompt as one cacheable block (identical
/// across requests, which is what makes batch cache hits possible), then the messages.
///
/// `purpose` is accepted so every builder has the same shape and a purpose-specific setting has
/// one place to go; no purpose changes the params today.
pub fn build_batch_params(
    purpose: Purpose,
    llm: &ResolvedLlm,
    system_prompt: &str,
    messages: Vec<InputMessage>,
) -> MessageParams {
    tracing::trace!(purpose = purpose.as_str(), key = %llm.key, "building anthropic params");
    let system = if system_prompt.is_empty() {
        Vec::new()
    } else {
        vec![SystemBlock {
            text: system_prompt.to_owned(),
            cache_control: Some(CacheControl { ttl: llm.cache_ttl }),
        }]
    };
    let thinking = llm
        .thinking_budget_tokens
        .map(|budget_tokens| ThinkingConfig::Enabled { budget_tokens });
    MessageParams {
        model: llm.model.clone(),
        max_tokens: llm.max_tokens,
        system,
        messages,
        temperature: if thinking.is_some() { None } else { llm.temperature },
        thinking,
    }
}

/// The OpenAI chat request for one request (immediate or one batch line); OpenAI caches prompt
/// prefixes automatically, so the system prompt only has to come first.
pub fn build_chat_request(
    purpose: Purpose,
    llm: &ResolvedLlm,
    system_prompt: &str,
    user_messages: Vec<String>,
) -> ChatRequest {
    tracing::trace!(purpose = purpose.as_str(), key = %llm.key, "building chat request");
    let mut messages = Vec::with_capacity(user_messages.len() + 1);
    if !system_prompt.is_empty() {
        messages.push(ChatMessage::new("system", system_prompt));
    }
    messages.extend(user_messages.into_iter().map(|text| ChatMessage::new("user", text)));
    ChatRequest {
        model: llm.model.clone(),
        messages,
        max_completion_tokens: Some(llm.max_tokens),
        temperature: llm.temperature,
        response_format: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn anthropic(max_tokens: u32, budget: Option<u32>, temperature: Option<f64>) -> LlmConfig {
        LlmConfig {
            provider: ProviderKind::Anthropic,
            endpoint: None,
            model: Some("claude-haiku-4-5".into()),
            api_key_env: Some("ANTHROPIC_API_KEY".into()),
            api_key_file: None,
            lane: LanePolicy::Auto,
            temperature,
            max_tokens,
            thinking_budget_tokens: budget,
            cache_ttl: "1h".into(),
            fallback: Vec::new(),
        }
    }

    #[test]
    fn invalid_thinking_combinations_each_get_one_line_naming_key_and_fix() {
        let errors = validate_llm_config("extraction_standard", &anthropic(500, Some(512), Some(0.2)));
        let lines: Vec<String> = errors.iter().map(ToString::to_string).collect();
        assert_eq!(
            lines,
            vec![
                "llm.extraction_standard.thinking_budget_tokens = 512 is below 1024; raise it to at least 1024 or remove it to turn thinking off",
                "llm.extraction_standard.thinking_budget_tokens = 512 must be below max_tokens = 500; raise max_tokens above the budget or lower the budget",
                "llm.extraction_standard.temperature = 0.2 cannot be combined with thinking_budget_tokens; remove temperature (thinking samples at 1)",
            ]
        );
        assert!(validate_llm_config("k", &anthropic(8192, Some(2048), Some(1.0))).is_empty());
        assert!(validate_llm_config("k", &anthropic(8192, None, Some(0.0))).is_empty());
    }

    #[test]
    fn a_chat_request_puts_the_system_prompt_first_and_caps_output() {
        let mut config = anthropic(2048, None, Some(0.3));
        config.provider = ProviderKind::Openai;
        config.model = Some("gpt-4o-mini".into());
        let llm = ResolvedLlm::resolve("extraction_standard", &config).unwrap();
        let request = build_chat_request(Purpose::Extraction, &llm, "sys", vec!["turns".into()]);
        let roles: Vec<&str> = request.messages.iter().map(|message| message.role.as_str()).collect();
        assert_eq!(roles, vec!["system", "user"]);
        assert_eq!(request.max_completion_tokens, Some(2048));
        assert_eq!(request.temperature, Some(0.3));
        config.thinking_budget_tokens = Some(1024);
        let errors = ResolvedLlm::resolve("extraction_standard", &config).unwrap_err();
        assert_eq!(
            errors[0].to_string(),
            "llm.extraction_standard.thinking_budget_tokens is set but provider openai has no extended thinking; remove it"
        );
    }

    #[test]
    fn custom_ids_follow_the_provider_pattern() {
        assert!(validate_custom_id("seg_01H-abc").is_ok());
        let long = "a".repeat(65);
        assert_eq!(
            validate_custom_id(&long).unwrap_err().to_string(),
            format!(
                "custom_id `{long}` is invalid: it is 65 characters long; use 1 to 64 characters from [a-zA-Z0-9_-]"
            )
        );
        assert!(
            validate_custom_id("a:b")
                .unwrap_err()
                .to_string()
                .contains("contains `:`")
        );
        assert!(validate_custom_id("").is_err());
    }

    #[test]
    fn params_carry_a_cacheable_system_block_and_never_temperature_with_thinking() {
        let llm = ResolvedLlm::resolve("extraction_standard", &anthropic(8192, Some(2048), Some(1.0))).unwrap();
        let params = build_batch_params(
            Purpose::Extraction,
            &llm,
            "You extract memories.",
            vec![InputMessage::user("<turn …>")],
        );
        let json = serde_json::to_value(&params).unwrap();
        assert_eq!(
            json["system"],
            serde_json::json!([{"type": "text", "text": "You extract memories.", "cache_control": {"type": "ephemeral", "ttl": "1h"}}])
        );
        assert_eq!(
            json["thinking"],
            serde_json::json!({"type": "enabled", "budget_tokens": 2048})
        );
        assert_eq!(json["max_tokens"], 8192);
        assert!(json.get("temperature").is_none());

        let mut plain = anthropic(4096, None, Some(0.0));
        plain.cache_ttl = "5m".into();
        let llm = ResolvedLlm::resolve("k", &plain).unwrap();
        let json = serde_json::to_value(build_batch_params(Purpose::Extraction, &llm, "sys", vec![])).unwrap();
        assert_eq!(json["temperature"], 0.0);
        assert_eq!(json["system"][0]["cache_control"]["ttl"], "5m");
        assert!(json.get("thinking").is_none());
    }
}
