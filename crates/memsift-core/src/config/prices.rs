//! `[prices.*]`: what a model costs, the provider's prompt-cache rules for it and its context
//! window, looked up by exact name or longest configured prefix.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// One model's prices (USD per million tokens) and the provider's prompt-cache rules for it.
///
/// Cache prices are multipliers of the input price, as providers publish them, so a price change
/// is one number. The rules are data because they differ per model and change with the provider's
/// pages: Anthropic caches a marked prefix only from a per-model minimum length and bills writes
/// above input; OpenAI caches every long prompt by itself, in fixed steps, without a write charge.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelPrice {
    /// Uncached input.
    pub input_per_mtok: f64,
    /// Output (thinking included).
    pub output_per_mtok: f64,
    /// A cache write with the 5-minute TTL, as a multiple of the input price.
    pub cache_write_5m_multiplier: f64,
    /// A cache write with the 1-hour TTL, as a multiple of the input price.
    pub cache_write_1h_multiplier: f64,
    /// A cache read, as a multiple of the input price.
    pub cache_read_multiplier: f64,
    /// The fraction taken off every line on the batch lane (0.5 = half price); it stacks with the
    /// cache multipliers.
    pub batch_discount: f64,
    /// The shortest prefix the provider caches; a shorter one is billed as plain input and both
    /// cache counters stay 0.
    pub min_cacheable_tokens: u64,
    /// Cache hits count in whole steps of this many tokens (OpenAI: 128; Anthropic: 1).
    pub cache_step_tokens: u64,
    /// The provider caches long prompts by itself, with no marker and no write charge (OpenAI);
    /// otherwise only a prefix marked with `cache_control` is cached (Anthropic).
    pub automatic_cache: bool,
    /// The share of a batch's later requests expected to read a cache entry an earlier one wrote.
    /// Anthropic calls batch cache hits best-effort and quotes 30 % to 98 %; it decides whether
    /// marking a prompt in a batch pays, so raise it only from hit rates you have seen.
    pub batch_cache_hit_share: f64,
    /// The model's context window: the input tokens of one request and the output it may write
    /// (`max_tokens`, thinking included) together. A provider refuses a request over it (400).
    pub context_window_tokens: u64,
    /// The most output tokens one request may ask for (`max_tokens`); a provider refuses more.
    pub max_output_tokens: u64,
}

impl ModelPrice {
    /// The tokens a provider serves from its cache out of a `matched` prefix it has seen before:
    /// none below the minimum, else whole steps.
    pub fn cacheable_tokens(&self, matched: u64) -> u64 {
        if matched < self.min_cacheable_tokens.max(1) {
            return 0;
        }
        let step = self.cache_step_tokens.max(1);
        matched / step * step
    }
}

/// The prices of `model` in `prices`: an exact name first, then the longest configured name that
/// prefixes it (so `claude-haiku-4-5` prices `claude-haiku-4-5-20251001`).
pub fn price_for<'a>(prices: &'a BTreeMap<String, ModelPrice>, model: &str) -> Option<&'a ModelPrice> {
    price_entry_for(prices, model).map(|(_, price)| price)
}

/// [`price_for`] with the name of the section that answered, for messages that send the operator
/// to the line to change.
pub fn price_entry_for<'a>(prices: &'a BTreeMap<String, ModelPrice>, model: &str) -> Option<(&'a str, &'a ModelPrice)> {
    prices
        .get_key_value(model)
        .or_else(|| {
            prices
                .iter()
                .filter(|(name, _)| model.starts_with(name.as_str()))
                .max_by_key(|(name, _)| name.len())
        })
        .map(|(name, price)| (name.as_str(), price))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    #[test]
    fn cache_hits_start_at_the_minimum_and_count_in_whole_steps() {
        let prices = Config::defaults().prices;
        let haiku = price_for(&prices, "claude-haiku-4-5-20251001").unwrap();
        assert_eq!((haiku.cacheable_tokens(4095), haiku.cacheable_tokens(4096)), (0, 4096));
        assert_eq!(haiku.cacheable_tokens(5001), 5001, "Anthropic counts hits per token");
        let sonnet = price_for(&prices, "claude-sonnet-4-5").unwrap();
        assert_eq!(
            (sonnet.cacheable_tokens(1023), sonnet.cacheable_tokens(1024)),
            (0, 1024)
        );
        let openai = price_for(&prices, "gpt-4o-mini-2024-07-18").unwrap();
        assert!(openai.automatic_cache);
        assert_eq!(openai.cacheable_tokens(1023), 0);
        assert_eq!(
            openai.cacheable_tokens(1151),
            1024,
            "OpenAI counts hits in steps of 128"
        );
        assert_eq!(openai.cacheable_tokens(1152), 1152);
        assert!(price_for(&prices, "unknown-model").is_none());
        assert_eq!(
            price_entry_for(&prices, "claude-haiku-4-5-20251001").map(|(name, _)| name),
            Some("claude-haiku-4-5")
        );
        // The longest configured prefix wins: Sonnet 4.5 is not priced as Sonnet 4.
        assert_eq!(
            price_for(&prices, "claude-sonnet-4-5-20250929").unwrap(),
            &prices["claude-sonnet-4-5"]
        );
        assert_eq!(
            price_for(&prices, "claude-sonnet-4-20250514").unwrap(),
            &prices["claude-sonnet-4"]
        );
    }
}
