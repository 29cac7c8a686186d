//! Each model's context window and output cap from the price table, refused the way each
//! provider refuses a request over them: a 400 on the immediate endpoints, an errored result line
//! inside a batch, in the provider's own words.
//!
//! A model without a `[prices]` section has no known limits and is not checked.

use std::collections::BTreeMap;

use memsift_core::config::{ModelPrice, price_for};
use serde_json::{Value, json};

use crate::state::{GenerationRequest, State, tokens_of};

/// Why a provider refuses a request before running it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// `max_tokens` above what the model writes.
    OutputCap { model: String, max_tokens: u64, cap: u64 },
    /// The input alone is over the window.
    PromptTooLong { input: u64, window: u64 },
    /// The input fits, but not with the output it asks room for.
    InputAndOutputTooLong { input: u64, max_tokens: u64, window: u64 },
}

/// The request's input tokens as the simulator bills them: the system prompt and the messages.
pub(crate) fn input_tokens(request: &GenerationRequest) -> u64 {
    let system = if request.system.is_empty() {
        0
    } else {
        tokens_of(&request.system)
    };
    system + tokens_of(&request.user_text)
}

/// Whether the model of `request` takes it. `max_tokens` is `None` when the body set no cap
/// (OpenAI's is optional): then only the input is held to the window.
pub(crate) fn check(
    prices: &BTreeMap<String, ModelPrice>,
    request: &GenerationRequest,
    max_tokens: Option<u64>,
) -> Result<(), Refusal> {
    let Some(limits) = price_for(prices, &request.model) else {
        return Ok(());
    };
    if let Some(max_tokens) = max_tokens
        && max_tokens > limits.max_output_tokens
    {
        return Err(Refusal::OutputCap {
            model: request.model.clone(),
            max_tokens,
            cap: limits.max_output_tokens,
        });
    }
    let window = limits.context_window_tokens;
    let input = input_tokens(request);
    if input > window {
        return Err(Refusal::PromptTooLong { input, window });
    }
    match max_tokens {
        Some(max_tokens) if input + max_tokens > window => Err(Refusal::InputAndOutputTooLong {
            input,
            max_tokens,
            window,
        }),
        _ => Ok(()),
    }
}

/// [`check`] for an OpenAI chat body, whose cap is optional (without one only the input is held
/// to the window) and set under `max_completion_tokens` or the older `max_tokens`; `Err` carries
/// the name the body used, for the error's `param`.
pub(crate) fn check_chat(
    prices: &BTreeMap<String, ModelPrice>,
    request: &GenerationRequest,
    body: &Value,
) -> Result<(), (Refusal, &'static str)> {
    let cap_param = ["max_completion_tokens", "max_tokens"]
        .into_iter()
        .find(|key| body.get(key).and_then(Value::as_u64).is_some());
    let cap = cap_param.map(|_| u64::from(request.max_tokens));
    check(prices, request, cap).map_err(|refusal| (refusal, cap_param.unwrap_or("max_completion_tokens")))
}

/// Counts a refusal under its reason (`GET /_sim/counters`, `refused`).
pub(crate) fn record(state: &mut State, refusal: &Refusal) {
    *state.counters.refused.entry(refusal.name().to_owned()).or_default() += 1;
}

impl Refusal {
    /// The counter it is recorded under.
    pub(crate) fn name(&self) -> &'static str {
        match self {
            Refusal::OutputCap { .. } => "max_tokens",
            Refusal::PromptTooLong { .. } | Refusal::InputAndOutputTooLong { .. } => "context_window",
        }
    }

    /// Anthropic's message for its 400 `invalid_request_error`.
    pub(crate) fn anthropic_message(&self) -> String {
        match self {
            Refusal::OutputCap { model, max_tokens, cap } => format!(
                "max_tokens: {max_tokens} > {cap}, which is the maximum allowed number of output tokens for {model}"
            ),
            Refusal::PromptTooLong { input, window } => {
                format!("prompt is too long: {input} tokens > {window} maximum")
            }
            Refusal::InputAndOutputTooLong {
                input,
                max_tokens,
                window,
            } => format!(
                "input length and `max_tokens` exceed context limit: {input} + {max_tokens} > {window}, decrease input length or `max_tokens` and try again"
            ),
        }
    }

    /// OpenAI's 400 error body; `cap_param` is the field the body set its cap with
    /// (`max_completion_tokens` or the older `max_tokens`).
    pub(crate) fn openai_body(&self, cap_param: &str) -> Value {
        let (message, param, code) = match self {
            Refusal::OutputCap { max_tokens, cap, .. } => (
                format!(
                    "{cap_param} is too large: {max_tokens}. This model supports at most {cap} completion tokens, whereas you provided {max_tokens}."
                ),
                cap_param,
                Value::Null,
            ),
            Refusal::PromptTooLong { input, window } => (
                format!(
                    "This model's maximum context length is {window} tokens. However, your messages resulted in {input} tokens. Please reduce the length of the messages."
                ),
                "messages",
                json!("context_length_exceeded"),
            ),
            Refusal::InputAndOutputTooLong {
                input,
                max_tokens,
                window,
            } => (
                format!(
                    "This model's maximum context length is {window} tokens. However, you requested {} tokens ({input} in the messages, {max_tokens} in the completion). Please reduce the length of the messages or completion.",
                    input + max_tokens
                ),
                "messages",
                json!("context_length_exceeded"),
            ),
        };
        json!({"error": {"message": message, "type": "invalid_request_error", "param": param, "code": code}})
    }
}

#[cfg(test)]
mod tests {
    use memsift_core::config::Config;

    use super::*;
    use crate::state::PromptCache;

    fn request(model: &str, words: usize) -> GenerationRequest {
        GenerationRequest {
            model: model.to_owned(),
            system: String::new(),
            cache: PromptCache::Off,
            user_text: "word ".repeat(words),
            max_tokens: 0,
        }
    }

    #[test]
    fn each_limit_is_refused_exactly_past_it_and_unpriced_models_are_not_checked() {
        let prices = Config::defaults().prices;
        let fits = request("claude-haiku-4-5-20251001", 1_000);
        assert_eq!(check(&prices, &fits, Some(64_000)), Ok(()));
        assert!(matches!(
            check(&prices, &fits, Some(64_001)),
            Err(Refusal::OutputCap { cap: 64_000, .. })
        ));
        let long = request("claude-haiku-4-5", 150_000);
        let input = input_tokens(&long);
        assert!(input > 136_000 && input < 200_000, "{input}");
        assert_eq!(check(&prices, &long, Some(200_000 - input)), Ok(()));
        assert_eq!(
            check(&prices, &long, Some(200_001 - input)),
            Err(Refusal::InputAndOutputTooLong {
                input,
                max_tokens: 200_001 - input,
                window: 200_000
            })
        );
        let over = request("gpt-4o-mini", 130_000);
        let input = input_tokens(&over);
        assert_eq!(
            check(&prices, &over, None),
            Err(Refusal::PromptTooLong { input, window: 128_000 })
        );
        assert_eq!(check(&prices, &request("llama3.1", 300_000), Some(1 << 20)), Ok(()));
    }
}
