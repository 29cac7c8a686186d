//! Token usage per request and what it cost, from a price table that can live in configuration.
//!
//! Prices change often, so nothing here is authoritative: the defaults are examples to start a
//! config from, and every number is per million tokens in US dollars.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Tokens one request used, split the way prices are.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenUsage {
    /// Uncached input tokens.
    pub input_tokens: u64,
    /// Output tokens (thinking included).
    pub output_tokens: u64,
    /// Input tokens written to a 5-minute cache entry.
    pub cache_creation_5m_tokens: u64,
    /// Input tokens written to a 1-hour cache entry.
    pub cache_creation_1h_tokens: u64,
    /// Input tokens read from the cache.
    pub cache_read_tokens: u64,
}

impl TokenUsage {
    /// Every input token, however it was billed.
    pub fn total_input_tokens(&self) -> u64 {
        self.input_tokens + self.cache_creation_5m_tokens + self.cache_creation_1h_tokens + self.cache_read_tokens
    }
}

impl std::ops::AddAssign for TokenUsage {
    fn add_assign(&mut self, other: TokenUsage) {
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
        self.cache_creation_5m_tokens += other.cache_creation_5m_tokens;
        self.cache_creation_1h_tokens += other.cache_creation_1h_tokens;
        self.cache_read_tokens += other.cache_read_tokens;
    }
}

// The per-model price lives in memsift-core because it is configuration (`[prices.<model>]`).
pub use memsift_core::config::ModelPrice;

/// Prices by model name.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct PriceTable {
    /// Model name → prices.
    pub models: BTreeMap<String, ModelPrice>,
}

impl Default for PriceTable {
    /// The example prices of the built-in `config/memsift.toml`; check them against the providers'
    /// pages before trusting a bill.
    fn default() -> Self {
        Self {
            models: memsift_core::config::Config::defaults().prices,
        }
    }
}

impl PriceTable {
    /// The price of a model: an exact name first, then the longest configured name that prefixes it
    /// (so `claude-haiku-4-5` prices `claude-haiku-4-5-20251001`).
    pub fn price(&self, model: &str) -> Option<&ModelPrice> {
        memsift_core::config::price_for(&self.models, model)
    }
}

/// The cost in USD of `usage` at `price`, with the batch discount when `batch` is true:
/// `(input + 5m writes × w5 + 1h writes × w1h + reads × r) × input price + output × output price`,
/// all per million tokens, times `1 − batch_discount` on the batch lane.
pub fn cost(usage: &TokenUsage, price: &ModelPrice, batch: bool) -> f64 {
    let input_equivalent = usage.input_tokens as f64
        + usage.cache_creation_5m_tokens as f64 * price.cache_write_5m_multiplier
        + usage.cache_creation_1h_tokens as f64 * price.cache_write_1h_multiplier
        + usage.cache_read_tokens as f64 * price.cache_read_multiplier;
    let full =
        (input_equivalent * price.input_per_mtok + usage.output_tokens as f64 * price.output_per_mtok) / 1_000_000.0;
    if batch {
        full * (1.0 - price.batch_discount)
    } else {
        full
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn haiku_batch_cost_stacks_cache_multipliers_with_the_discount() {
        let table = PriceTable::default();
        let price = table.price("claude-haiku-4-5-20251001").unwrap();
        let usage = TokenUsage {
            input_tokens: 1_000_000,
            output_tokens: 1_000_000,
            cache_creation_5m_tokens: 1_000_000,
            cache_creation_1h_tokens: 1_000_000,
            cache_read_tokens: 1_000_000,
        };
        // 1 + 5 + 1.25 + 2 + 0.1 = 9.35 at full price.
        assert!((cost(&usage, price, false) - 9.35).abs() < 1e-9);
        assert!((cost(&usage, price, true) - 4.675).abs() < 1e-9);
    }

    /// Anthropic's published arithmetic, written out independently of [`cost`]: per million
    /// tokens, input at the list price, 5-minute writes at 1.25×, 1-hour writes at 2×, reads at 0.1×,
    /// output at the output price, and half of all of it on the batch lane.
    fn anthropic_bill(usage: &TokenUsage, input: f64, output: f64, batch: bool) -> f64 {
        let dollars = (usage.input_tokens as f64 * input
            + usage.cache_creation_5m_tokens as f64 * input * 5.0 / 4.0
            + usage.cache_creation_1h_tokens as f64 * input * 2.0
            + usage.cache_read_tokens as f64 * input / 10.0
            + usage.output_tokens as f64 * output)
            / 1e6;
        if batch { dollars / 2.0 } else { dollars }
    }

    /// OpenAI's: cached input at the model's cached price, nothing extra for writing the cache.
    fn openai_bill(usage: &TokenUsage, input: f64, cached: f64, output: f64, batch: bool) -> f64 {
        let dollars = ((usage.input_tokens + usage.cache_creation_5m_tokens + usage.cache_creation_1h_tokens) as f64
            * input
            + usage.cache_read_tokens as f64 * cached
            + usage.output_tokens as f64 * output)
            / 1e6;
        if batch { dollars / 2.0 } else { dollars }
    }

    fn usages() -> impl Strategy<Value = TokenUsage> {
        (
            0u64..2_000_000,
            0u64..200_000,
            0u64..500_000,
            0u64..500_000,
            0u64..2_000_000,
        )
            .prop_map(|(input, output, write_5m, write_1h, read)| TokenUsage {
                input_tokens: input,
                output_tokens: output,
                cache_creation_5m_tokens: write_5m,
                cache_creation_1h_tokens: write_1h,
                cache_read_tokens: read,
            })
    }

    fn within_one_percent(recorded: f64, published: f64) -> bool {
        (recorded - published).abs() <= 0.01 * published.abs().max(1e-12)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        #[test]
        fn every_cost_matches_the_providers_published_arithmetic(usage in usages(), batch in any::<bool>()) {
            let table = PriceTable::default();
            for (model, input, output) in [
                ("claude-haiku-4-5-20251001", 1.0, 5.0),
                ("claude-sonnet-4-5-20250929", 3.0, 15.0),
                ("claude-opus-4-5", 5.0, 25.0),
            ] {
                let recorded = cost(&usage, table.price(model).unwrap(), batch);
                let published = anthropic_bill(&usage, input, output, batch);
                prop_assert!(within_one_percent(recorded, published), "{model}: {recorded} vs {published}");
            }
            let recorded = cost(&usage, table.price("gpt-4o-mini").unwrap(), batch);
            let published = openai_bill(&usage, 0.15, 0.075, 0.60, batch);
            prop_assert!(within_one_percent(recorded, published), "gpt-4o-mini: {recorded} vs {published}");
        }
    }

    #[test]
    fn a_price_table_round_trips_through_toml() {
        let table = PriceTable::default();
        let text = toml::to_string(&table).unwrap();
        let back: PriceTable = toml::from_str(&text).unwrap();
        assert_eq!(back, table);
    }
}
