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
    /// Example prices: claude-haiku-4-5 ($1/$5) and gpt-4o-mini ($0.15/$0.60, cached input half price,
    /// no cache-write charge). Check them against the providers' pages before trusting a bill.
    fn default() -> Self {
        let mut models = BTreeMap::new();
        models.insert("claude-haiku-4-5".to_owned(), ModelPrice::anthropic_style(1.0, 5.0));
        models.insert(
            "gpt-4o-mini".to_owned(),
            ModelPrice {
                input_per_mtok: 0.15,
                output_per_mtok: 0.60,
                cache_write_5m_per_mtok: 0.15,
                cache_write_1h_per_mtok: 0.15,
                cache_read_per_mtok: 0.075,
                batch_discount: 0.5,
            },
        );
        Self { models }
    }
}

impl PriceTable {
    /// The price of a model: an exact name first, then the longest configured name that prefixes it
    /// (so `claude-haiku-4-5` prices `claude-haiku-4-5-20251001`).
    pub fn price(&self, model: &str) -> Option<&ModelPrice> {
        self.models.get(model).or_else(|| {
            self.models
                .iter()
                .filter(|(name, _)| model.starts_with(name.as_str()))
                .max_by_key(|(name, _)| name.len())
                .map(|(_, price)| price)
        })
    }
}

/// The cost in USD of `usage` at `price`, with the batch discount when `batch` is true.
pub fn cost(usage: &TokenUsage, price: &ModelPrice, batch: bool) -> f64 {
    let per = |tokens: u64, per_mtok: f64| tokens as f64 * per_mtok / 1_000_000.0;
    let full = per(usage.input_tokens, price.input_per_mtok)
        + per(usage.output_tokens, price.output_per_mtok)
        + per(usage.cache_creation_5m_tokens, price.cache_write_5m_per_mtok)
        + per(usage.cache_creation_1h_tokens, price.cache_write_1h_per_mtok)
        + per(usage.cache_read_tokens, price.cache_read_per_mtok);
    if batch {
        full * (1.0 - price.batch_discount)
    } else {
        full
    }
}

#[cfg(test)]
mod tests {
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

    #[test]
    fn a_price_table_round_trips_through_toml() {
        let table = PriceTable::default();
        let text = toml::to_string(&table).unwrap();
        let back: PriceTable = toml::from_str(&text).unwrap();
        assert_eq!(back, table);
    }
}
