//! From a `{purpose}_{tier}` config to request params: validation that `memsift check-config`
//! reports, the resolved config, whether a system prompt is worth marking cacheable, and the one
//! function that builds every Anthropic request.

use memsift_core::config::{Config, LanePolicy, LlmConfig, ModelPrice, ProviderKind, price_for};
use memsift_core::prompt::PromptRegistry;
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
    let provider_name = config.provider.as_str().to_owned();
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

/// The smallest output a learned allowance sends (above any thinking budget): room for a short
/// answer whatever the recent ones were.
pub const MIN_OUTPUT_ALLOWANCE: u32 = 256;

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

    /// This config with its output capped at `cap` (a request's learned allowance), or itself
    /// when there is no cap or the cap is not lower. A thinking budget needs `max_tokens` above
    /// it, so the cap never goes below the budget plus the smallest allowance.
    pub fn with_output_cap(&self, cap: Option<u32>) -> std::borrow::Cow<'_, ResolvedLlm> {
        let floor = self.thinking_budget_tokens.map_or(MIN_OUTPUT_ALLOWANCE, |budget| {
            budget.saturating_add(MIN_OUTPUT_ALLOWANCE)
        });
        match cap.map(|cap| cap.max(floor)) {
            Some(cap) if cap < self.max_tokens => std::borrow::Cow::Owned(ResolvedLlm {
                max_tokens: cap,
                ..self.clone()
            }),
            _ => std::borrow::Cow::Borrowed(self),
        }
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

/// What a sender knows about the requests that send the same system prompt, for deciding whether
/// marking it cacheable pays.
#[derive(Clone, Copy, Debug)]
pub struct PrefixReuse<'a> {
    /// The model's prices and cache rules; `None` for an unpriced model.
    pub price: Option<&'a ModelPrice>,
    /// Requests sending this prompt within the cache entry's lifetime, this one included.
    pub requests: u64,
    /// The share of the later ones expected to read the entry rather than write it again.
    pub hit_share: f64,
}

impl<'a> PrefixReuse<'a> {
    /// `requests` requests of one batch share the prompt; hits are best-effort there, at the
    /// model's `batch_cache_hit_share`.
    pub fn batch(price: Option<&'a ModelPrice>, requests: u64) -> Self {
        Self {
            price,
            requests,
            hit_share: price.map_or(0.0, |price| price.batch_cache_hit_share),
        }
    }

    /// One immediate call, with no later call known to send the same prompt in time.
    pub fn single(price: Option<&'a ModelPrice>) -> Self {
        Self {
            price,
            requests: 1,
            hit_share: 1.0,
        }
    }
}

/// Whether marking a prefix of `prefix_tokens` cacheable with `ttl` pays for `reuse`.
///
/// Never below the model's minimum cacheable length (the provider would bill it in full anyway)
/// nor for a provider that caches by itself. Above it, with `n` requests, a write multiplier `w`
/// (1.25 for 5 minutes, 2 for an hour), a read multiplier `r` (0.1) and a hit share `h`: not
/// marking costs `n` prompts of input; marking costs one write for the first request and, for each
/// later one, a read on a hit or another write on a miss. It pays when
/// `w + (n − 1) × (h × r + (1 − h) × w) < n`. With Anthropic's multipliers: back-to-back calls
/// (`h` = 1) pay from 2 requests at 5 minutes and from 3 at an hour; a batch at the built-in
/// `batch_cache_hit_share` of 0.3 pays from 4 requests at 5 minutes and never at an hour, where a
/// later request costs 1.43 prompts on average (at 0.53 and above, an hour pays too).
pub fn cache_pays(price: &ModelPrice, ttl: CacheTtl, prefix_tokens: u64, reuse: &PrefixReuse<'_>) -> bool {
    if price.automatic_cache || price.cacheable_tokens(prefix_tokens) == 0 {
        return false;
    }
    let write = match ttl {
        CacheTtl::FiveMinutes => price.cache_write_5m_multiplier,
        CacheTtl::OneHour => price.cache_write_1h_multiplier,
    };
    let hit = reuse.hit_share.clamp(0.0, 1.0);
    let later = reuse.requests.saturating_sub(1) as f64;
    let marked = write + later * (hit * price.cache_read_multiplier + (1.0 - hit) * write);
    marked < reuse.requests as f64
}

/// The cache marker for `system_prompt` under `llm`'s configured TTL, or `None` where marking
/// does not pay ([`cache_pays`]). An unpriced model has no known rules: its prompt is marked as
/// configured, which the provider bills in full when it is below the minimum.
pub fn system_cache(llm: &ResolvedLlm, system_prompt: &str, reuse: &PrefixReuse<'_>) -> Option<CacheTtl> {
    if system_prompt.is_empty() {
        return None;
    }
    match reuse.price {
        None => Some(llm.cache_ttl),
        Some(price) => {
            let tokens = memsift_tokens::count_tokens(system_prompt) as u64;
            cache_pays(price, llm.cache_ttl, tokens, reuse).then_some(llm.cache_ttl)
        }
    }
}

/// `memsift check-config`'s warnings about prompt caching: one line for every reachable
/// `{purpose}_{tier}` key whose provider caches only marked prefixes and whose purpose's prompt is
/// shorter than the model's minimum cacheable length, so its `cache_ttl` can never take effect.
pub fn cache_warnings(config: &Config, prompts: &PromptRegistry) -> Vec<String> {
    let mut warnings = Vec::new();
    for tier in &config.billing.tiers {
        for purpose in config.reachable_purposes() {
            let key = format!("{}_{tier}", purpose.as_str());
            let (Some(llm), Ok(prompt)) = (config.llm.get(&key), prompts.get(purpose.as_str())) else {
                continue;
            };
            let Some(model) = llm.model.as_deref().filter(|_| llm.provider == ProviderKind::Anthropic) else {
                continue;
            };
            let Some(price) = price_for(&config.prices, model).filter(|price| !price.automatic_cache) else {
                continue;
            };
            let tokens = memsift_tokens::count_tokens(&prompt.text) as u64;
            if tokens < price.min_cacheable_tokens {
                warnings.push(format!(
                    "llm.{key}: the {} prompt is {tokens} tokens, under the {} tokens {model} caches at least; \
                     it is sent without a cache marker and billed as plain input, whatever cache_ttl says",
                    purpose.as_str(),
                    price.min_cacheable_tokens,
                ));
            }
        }
    }
    warnings
}

/// The Anthropic params for one request: the system prompt as one block, a cache breakpoint when
/// `cache` says so (see [`system_cache`]), then the messages.
///
/// `purpose` is accepted so every builder has the same shape and a purpose-specific setting has
/// one place to go; no purpose changes the params today.
pub fn build_batch_params(
    purpose: Purpose,
    llm: &ResolvedLlm,
    system_prompt: &str,
    messages: Vec<InputMessage>,
    cache: Option<CacheTtl>,
) -> MessageParams {
    tracing::trace!(purpose = purpose.as_str(), key = %llm.key, "building anthropic params");
    let system = if system_prompt.is_empty() {
        Vec::new()
    } else {
        vec![SystemBlock {
            text: system_prompt.to_owned(),
            cache_control: cache.map(|ttl| CacheControl { ttl }),
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
    fn params_carry_the_cache_marker_given_and_never_temperature_with_thinking() {
        let llm = ResolvedLlm::resolve("extraction_standard", &anthropic(8192, Some(2048), Some(1.0))).unwrap();
        let params = build_batch_params(
            Purpose::Extraction,
            &llm,
            "You extract memories.",
            vec![InputMessage::user("<turn …>")],
            Some(CacheTtl::OneHour),
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
        let json = serde_json::to_value(build_batch_params(Purpose::Extraction, &llm, "sys", vec![], None)).unwrap();
        assert_eq!(json["temperature"], 0.0);
        assert_eq!(json["system"], serde_json::json!([{"type": "text", "text": "sys"}]));
        assert!(json.get("thinking").is_none());
    }

    fn prices() -> crate::PriceTable {
        crate::PriceTable::default()
    }

    #[test]
    fn a_prompt_below_the_models_minimum_is_never_marked() {
        let table = prices();
        let llm = ResolvedLlm::resolve("extraction_standard", &anthropic(8192, None, None)).unwrap();
        let prompt = PromptRegistry::built_in();
        let extraction = &prompt.get("extraction").unwrap().text;
        let tokens = memsift_tokens::count_tokens(extraction) as u64;
        for model in ["claude-haiku-4-5", "claude-sonnet-4-5"] {
            let price = table.price(model).unwrap();
            assert!(
                tokens < price.min_cacheable_tokens,
                "{model}: the built-in prompt is {tokens} tokens"
            );
            let reuse = PrefixReuse::batch(Some(price), 1000);
            assert_eq!(system_cache(&llm, extraction, &reuse), None, "{model}");
        }
        // Without known rules the configured marker is kept.
        assert_eq!(
            system_cache(&llm, extraction, &PrefixReuse::batch(None, 1000)),
            Some(CacheTtl::OneHour)
        );
    }

    /// What `n` requests sharing a prefix of one token cost, in prompts, written out per request.
    fn marked_cost(price: &ModelPrice, write: f64, n: u64, hit_share: f64) -> f64 {
        let later = (n - 1) as f64;
        write + later * hit_share * price.cache_read_multiplier + later * (1.0 - hit_share) * write
    }

    proptest::proptest! {
        #[test]
        fn marking_is_chosen_exactly_when_it_is_cheaper_and_reaches_the_minimum(
            prefix in 0u64..10_000,
            requests in 1u64..50,
            hit_share in 0.0f64..=1.0,
            hour in proptest::bool::ANY,
            model in proptest::sample::select(vec!["claude-haiku-4-5", "claude-sonnet-4-5", "gpt-4o-mini"]),
        ) {
            let table = prices();
            let price = table.price(model).unwrap();
            let ttl = if hour { CacheTtl::OneHour } else { CacheTtl::FiveMinutes };
            let write = if hour { price.cache_write_1h_multiplier } else { price.cache_write_5m_multiplier };
            let reuse = PrefixReuse { price: Some(price), requests, hit_share };
            let cheaper = marked_cost(price, write, requests, hit_share) < requests as f64;
            let reachable = prefix >= price.min_cacheable_tokens && !price.automatic_cache;
            proptest::prop_assert_eq!(cache_pays(price, ttl, prefix, &reuse), cheaper && reachable);
        }
    }

    #[test]
    fn the_documented_break_even_points_hold() {
        let table = prices();
        let price = table.price("claude-sonnet-4-5").unwrap();
        let pays = |ttl, requests, hit_share| {
            cache_pays(
                price,
                ttl,
                2_000,
                &PrefixReuse {
                    price: Some(price),
                    requests,
                    hit_share,
                },
            )
        };
        assert!(!pays(CacheTtl::FiveMinutes, 1, 1.0) && pays(CacheTtl::FiveMinutes, 2, 1.0));
        assert!(!pays(CacheTtl::OneHour, 2, 1.0) && pays(CacheTtl::OneHour, 3, 1.0));
        let batch = price.batch_cache_hit_share;
        assert!(!pays(CacheTtl::FiveMinutes, 3, batch) && pays(CacheTtl::FiveMinutes, 4, batch));
        assert!(!pays(CacheTtl::OneHour, 100_000, batch));
    }

    #[test]
    fn check_config_warns_for_each_anthropic_key_whose_prompt_is_under_the_minimum() {
        let overlay = "[llm.extraction_standard]\nprovider = \"anthropic\"\nmodel = \"claude-haiku-4-5\"\n\
                       api_key_env = \"ANTHROPIC_API_KEY\"\n\n\
                       [llm.relationship_standard]\nprovider = \"openai\"\nmodel = \"gpt-4o-mini\"\n\
                       api_key_env = \"OPENAI_API_KEY\"\n";
        let config = Config::from_layers(Some(("test.toml", overlay))).unwrap();
        let warnings = cache_warnings(&config, &PromptRegistry::built_in());
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        let tokens = memsift_tokens::count_tokens(&PromptRegistry::built_in().get("extraction").unwrap().text);
        assert_eq!(
            warnings[0],
            format!(
                "llm.extraction_standard: the extraction prompt is {tokens} tokens, under the 4096 tokens claude-haiku-4-5 \
                 caches at least; it is sent without a cache marker and billed as plain input, whatever cache_ttl says"
            )
        );
        assert!(cache_warnings(&Config::defaults(), &PromptRegistry::built_in()).is_empty());
    }
}
