//! Validation, run on every load: each section's values are in range, every route a tier can
//! take names an `[llm.*]` section that exists (invariant 15), and no configured request can pass
//! its model's context window.
//!
//! One check per section, run in a fixed order so the first problem reported stays the same one
//! whichever file a check sits in; each returns the first value it refuses.

use std::collections::BTreeMap;

use super::Config;
use super::error::{ConfigError, invalid};
use super::llm::LlmConfig;
use super::prices::{ModelPrice, price_entry_for};
use super::sections::{BatchConfig, DatabaseConfig, EmbeddingBackend, EmbeddingsConfig, QuotaConfig};

impl Config {
    /// Checks every value and every reachable `{purpose}_{tier}` key (invariant 15).
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.validate_ranges()?;
        self.validate_segments_ingest_and_api()?;
        validate_database(&self.database)?;
        validate_batch(&self.batch)?;
        self.validate_billing()?;
        self.validate_tiers_reach_their_sections()?;
        validate_prices(&self.prices)?;
        self.validate_shares()?;
        validate_embeddings(&self.embeddings)?;
        self.search.weights.validate()?;
        self.validate_fallbacks()?;
        validate_quotas(&self.quotas)?;
        self.validate_llm_sections()?;
        self.validate_context_windows()
    }

    /// A request body can carry the largest message with its JSON around it.
    fn validate_segments_ingest_and_api(&self) -> Result<(), ConfigError> {
        if self.api.max_body_bytes <= self.ingest.max_message_bytes {
            return Err(invalid(
                "api.max_body_bytes",
                self.api.max_body_bytes,
                &format!(
                    "use more than ingest.max_message_bytes ({}), so a message of that size fits in a request with its JSON (default 4194304)",
                    self.ingest.max_message_bytes
                ),
            ));
        }
        Ok(())
    }

    /// There is a tier, the default is one of them, and every budget names one and is a sum of
    /// money.
    fn validate_billing(&self) -> Result<(), ConfigError> {
        if self.billing.tiers.is_empty() {
            return Err(invalid(
                "billing.tiers",
                "[]",
                "list at least one tier, e.g. [\"standard\"]",
            ));
        }
        if !self.billing.tiers.contains(&self.billing.default_tier) {
            return Err(invalid(
                "billing.default_tier",
                &self.billing.default_tier,
                &format!("use one of billing.tiers {:?}", self.billing.tiers),
            ));
        }
        for (tier, budget) in &self.billing.daily_budget_usd {
            if !self.billing.tiers.contains(tier) {
                return Err(invalid(
                    &format!("billing.daily_budget_usd.{tier}"),
                    budget,
                    &format!("name one of billing.tiers {:?}", self.billing.tiers),
                ));
            }
            if !budget.is_finite() || !(0.0..=1e9).contains(budget) {
                return Err(invalid(
                    &format!("billing.daily_budget_usd.{tier}"),
                    budget,
                    "use USD per user per day, >= 0 and at most 1000000000",
                ));
            }
        }
        let percentile = self.billing.output_percentile;
        if !percentile.is_finite() || !(0.5..=1.0).contains(&percentile) {
            return Err(invalid(
                "billing.output_percentile",
                percentile,
                "use a share from 0.5 to 1.0 (default 0.99)",
            ));
        }
        Ok(())
    }

    /// Every tier has a `{purpose}_{tier}` section for every purpose it can reach.
    fn validate_tiers_reach_their_sections(&self) -> Result<(), ConfigError> {
        for tier in &self.billing.tiers {
            for purpose in self.reachable_purposes() {
                self.llm_for(purpose, tier)?;
            }
        }
        Ok(())
    }

    /// The importance floor and the per-run shares of scoring and post-processing are in [0, 1].
    fn validate_shares(&self) -> Result<(), ConfigError> {
        let scoring = &self.scoring;
        if !(0.0..=1.0).contains(&scoring.floor) {
            return Err(invalid(
                "scoring.floor",
                scoring.floor,
                "use an importance in [0, 1] (default 0.05)",
            ));
        }
        if !(0.0..=1.0).contains(&self.postprocess.max_share_per_run) {
            return Err(invalid(
                "postprocess.max_share_per_run",
                self.postprocess.max_share_per_run,
                "use a share in [0, 1] (default 0.05)",
            ));
        }
        if !(0.0..=1.0).contains(&scoring.max_share_per_run) {
            return Err(invalid(
                "scoring.max_share_per_run",
                scoring.max_share_per_run,
                "use a share in [0, 1] (default 0.05: at most 5 % of a user's memories per run)",
            ));
        }
        Ok(())
    }

    /// Every fallback names an existing section that has no fallback of its own (a chain is one
    /// list, read in one place), and none names its own section.
    fn validate_fallbacks(&self) -> Result<(), ConfigError> {
        for (key, llm) in &self.llm {
            for (position, name) in llm.fallback.iter().enumerate() {
                let field = format!("llm.{key}.fallback[{position}]");
                let Some(target) = self.llm.get(name) else {
                    return Err(invalid(
                        &field,
                        format!("\"{name}\""),
                        &format!("name an [llm.*] section that exists; add [llm.{name}] or remove it"),
                    ));
                };
                if name == key || llm.fallback[..position].contains(name) {
                    return Err(invalid(
                        &field,
                        format!("\"{name}\""),
                        "list each other section once; a section is never its own fallback",
                    ));
                }
                if !target.fallback.is_empty() {
                    return Err(invalid(
                        &field,
                        format!("\"{name}\""),
                        &format!(
                            "a fallback section has no fallback of its own; list every provider in llm.{key}.fallback instead"
                        ),
                    ));
                }
            }
        }
        Ok(())
    }

    /// Each section's prompt-cache TTL is one the providers offer.
    fn validate_llm_sections(&self) -> Result<(), ConfigError> {
        for (key, llm) in &self.llm {
            if !matches!(llm.cache_ttl.as_str(), "5m" | "1h") {
                return Err(invalid(
                    &format!("llm.{key}.cache_ttl"),
                    &llm.cache_ttl,
                    "use \"5m\" or \"1h\"",
                ));
            }
        }
        Ok(())
    }
}

impl Config {
    /// No section asks its model for more output than it writes, and no extraction chunk with its
    /// output can pass the window of a model that may answer it (a tier's route or a fallback):
    /// the provider would refuse such a request (400) and its segment would die. A model without a
    /// `[prices]` section has no known window and is not checked.
    /// The priced entry (its name and limits) of a section's model, if it has one.
    fn limits_of(&self, llm: &LlmConfig) -> Option<(&str, &ModelPrice)> {
        llm.model
            .as_deref()
            .and_then(|model| price_entry_for(&self.prices, model))
    }

    fn validate_context_windows(&self) -> Result<(), ConfigError> {
        for (key, llm) in &self.llm {
            let Some((name, limits)) = self.limits_of(llm) else {
                continue;
            };
            if u64::from(llm.max_tokens) > limits.max_output_tokens {
                return Err(invalid(
                    &format!("llm.{key}.max_tokens"),
                    llm.max_tokens,
                    &format!(
                        "{name} writes at most {} output tokens (prices.\"{name}\".max_output_tokens); use at most that",
                        limits.max_output_tokens
                    ),
                ));
            }
        }
        let budget = u64::from(self.batch.chunk_budget_tokens);
        for tier in &self.billing.tiers {
            for key in self.provider_chain(&format!("extraction_{tier}")) {
                let Some(llm) = self.llm.get(&key) else { continue };
                let Some((name, limits)) = self.limits_of(llm) else {
                    continue;
                };
                let max_tokens = u64::from(llm.max_tokens);
                if budget + max_tokens > limits.context_window_tokens {
                    return Err(invalid(
                        "batch.chunk_budget_tokens",
                        budget,
                        &format!(
                            "a chunk (system prompt included) and llm.{key}.max_tokens = {max_tokens} would pass {name}'s \
                             {}-token context window (prices.\"{name}\".context_window_tokens); use at most {}, or lower \
                             llm.{key}.max_tokens",
                            limits.context_window_tokens,
                            limits.context_window_tokens.saturating_sub(max_tokens)
                        ),
                    ));
                }
            }
        }
        Ok(())
    }
}

/// The URL, when given, is not blank, and SQLite's `synchronous` is one of the two levels that
/// keep a committed intent.
fn validate_database(database: &DatabaseConfig) -> Result<(), ConfigError> {
    // An empty URL once meant the default file silently; a blank is a mistake, not a wish.
    if database.url.as_deref().is_some_and(|url| url.trim().is_empty()) {
        return Err(invalid(
            "database.url",
            "\"\"",
            "name sqlite://PATH or postgres://USER@HOST/DB, or leave the key out for the default file",
        ));
    }
    if !matches!(database.sqlite_synchronous.as_str(), "full" | "normal") {
        return Err(invalid(
            "database.sqlite_synchronous",
            &database.sqlite_synchronous,
            "use \"full\" or \"normal\"",
        ));
    }
    Ok(())
}

/// A batch fits every provider's file limit, and a chunk is large enough to hold a turn.
fn validate_batch(batch: &BatchConfig) -> Result<(), ConfigError> {
    if batch.max_requests_per_batch == 0 || batch.max_requests_per_batch > 50_000 {
        return Err(invalid(
            "batch.max_requests_per_batch",
            batch.max_requests_per_batch,
            "use 1 to 50000 (OpenAI's per-file limit; Anthropic allows 100000)",
        ));
    }
    if batch.download_idle_secs == 0 || batch.download_idle_secs > 86_400 {
        return Err(invalid(
            "batch.download_idle_secs",
            batch.download_idle_secs,
            "use 1 to 86400 seconds (default 120)",
        ));
    }
    if !(1024..=(1 << 32)).contains(&batch.max_result_line_bytes) {
        return Err(invalid(
            "batch.max_result_line_bytes",
            batch.max_result_line_bytes,
            "use 1024 to 4294967296 bytes (default 67108864)",
        ));
    }
    if batch.chunk_budget_tokens < 256 {
        return Err(invalid(
            "batch.chunk_budget_tokens",
            batch.chunk_budget_tokens,
            "use at least 256 (default 6000)",
        ));
    }
    Ok(())
}

/// Every price and multiplier is a non-negative number, the discounts and shares are fractions,
/// and cache hits count in steps of at least one token.
fn validate_prices(prices: &BTreeMap<String, ModelPrice>) -> Result<(), ConfigError> {
    for (model, price) in prices {
        let fields = [
            ("input_per_mtok", price.input_per_mtok, f64::MAX),
            ("output_per_mtok", price.output_per_mtok, f64::MAX),
            ("cache_write_5m_multiplier", price.cache_write_5m_multiplier, f64::MAX),
            ("cache_write_1h_multiplier", price.cache_write_1h_multiplier, f64::MAX),
            ("cache_read_multiplier", price.cache_read_multiplier, f64::MAX),
            ("batch_cache_hit_share", price.batch_cache_hit_share, 1.0),
        ];
        for (field, value, max) in fields {
            if !value.is_finite() || !(0.0..=max).contains(&value) {
                return Err(invalid(
                    &format!("prices.\"{model}\".{field}"),
                    value,
                    "use USD per million tokens or a multiplier, a finite number >= 0 (a share: 0 to 1)",
                ));
            }
        }
        if !(0.0..1.0).contains(&price.batch_discount) {
            return Err(invalid(
                &format!("prices.\"{model}\".batch_discount"),
                price.batch_discount,
                "use a fraction in [0, 1), e.g. 0.5",
            ));
        }
        if price.min_cacheable_tokens > 10_000_000 {
            return Err(invalid(
                &format!("prices.\"{model}\".min_cacheable_tokens"),
                price.min_cacheable_tokens,
                "use 0 to 10000000 tokens",
            ));
        }
        if !(1..=100_000_000).contains(&price.context_window_tokens) {
            return Err(invalid(
                &format!("prices.\"{model}\".context_window_tokens"),
                price.context_window_tokens,
                "use the model's published context window, 1 to 100000000 tokens (Claude 4.5: 200000)",
            ));
        }
        if !(1..=price.context_window_tokens).contains(&price.max_output_tokens) {
            return Err(invalid(
                &format!("prices.\"{model}\".max_output_tokens"),
                price.max_output_tokens,
                &format!(
                    "use the model's published output cap, at least 1 and at most prices.\"{model}\".context_window_tokens = {} (Claude 4.5: 64000)",
                    price.context_window_tokens
                ),
            ));
        }
        if !(1..=1_000_000).contains(&price.cache_step_tokens) {
            return Err(invalid(
                &format!("prices.\"{model}\".cache_step_tokens"),
                price.cache_step_tokens,
                "use at least 1 and at most 1000000 (Anthropic counts hits per token: 1; OpenAI in steps of 128)",
            ));
        }
    }
    Ok(())
}

/// The backends that need more than their name have it: a model directory for `static`, an
/// endpoint, model and dimension for `openai_compatible`.
fn validate_embeddings(embeddings: &EmbeddingsConfig) -> Result<(), ConfigError> {
    match embeddings.backend {
        EmbeddingBackend::Static if embeddings.model_dir.is_none() => {
            return Err(invalid(
                "embeddings.model_dir",
                "unset",
                "name the directory `memsift distill --out DIR` wrote",
            ));
        }
        EmbeddingBackend::OpenaiCompatible => {
            for (field, missing) in [
                ("endpoint", embeddings.endpoint.is_none()),
                ("model", embeddings.model.is_none()),
                ("dimension", embeddings.dimension.unwrap_or(0) == 0),
            ] {
                if missing {
                    return Err(invalid(
                        &format!("embeddings.{field}"),
                        "unset",
                        "backend \"openai_compatible\" needs endpoint, model and dimension",
                    ));
                }
            }
        }
        _ => {}
    }
    Ok(())
}

/// Every quota names a provider memsift calls and limits it to a positive rate.
fn validate_quotas(quotas: &BTreeMap<String, QuotaConfig>) -> Result<(), ConfigError> {
    const PROVIDERS: [&str; 3] = ["anthropic", "openai", "openai_compatible"];
    for (name, quota) in quotas {
        let provider = name.split_once('/').map(|(provider, _)| provider);
        if !provider.is_some_and(|provider| PROVIDERS.contains(&provider)) {
            return Err(invalid(
                &format!("quotas.\"{name}\""),
                "this name",
                "name it \"PROVIDER/MODEL\" with PROVIDER one of anthropic, openai, openai_compatible, e.g. \"anthropic/claude-haiku-4-5\"",
            ));
        }
        for (field, rate) in [
            ("requests_per_minute", quota.requests_per_minute),
            ("tokens_per_minute", quota.tokens_per_minute),
        ] {
            if rate == Some(0) {
                return Err(invalid(
                    &format!("quotas.\"{name}\".{field}"),
                    0,
                    "use a positive number per minute, or leave the field out for no limit",
                ));
            }
        }
    }
    Ok(())
}
#[cfg(test)]
mod tests {
    use crate::config::{Config, OverBudget};

    #[test]
    fn prices_come_from_config_and_bad_ones_are_refused() {
        let config = Config::defaults();
        assert_eq!(config.prices["claude-haiku-4-5"].output_per_mtok, 5.0);
        let overlay = "[prices.\"my-model\"]\ninput_per_mtok = -1.0\noutput_per_mtok = 1.0\ncache_write_5m_multiplier = 1.0\n\
                       cache_write_1h_multiplier = 1.0\ncache_read_multiplier = 0.5\nbatch_discount = 0.5\n\
                       min_cacheable_tokens = 1024\ncache_step_tokens = 128\nautomatic_cache = true\n\
                       batch_cache_hit_share = 0.3\ncontext_window_tokens = 128000\nmax_output_tokens = 16384\n";
        let err = Config::from_layers(Some(("test.toml", overlay)))
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("config: prices.\"my-model\""), "{err}");
    }

    #[test]
    fn every_priced_model_has_its_published_window_and_output_cap() {
        let prices = Config::defaults().prices;
        for (model, price) in &prices {
            let expected = if model.starts_with("claude-") {
                (200_000, 64_000)
            } else {
                (128_000, 16_384)
            };
            assert_eq!(
                (price.context_window_tokens, price.max_output_tokens),
                expected,
                "{model}"
            );
        }
    }

    #[test]
    fn a_request_that_could_pass_its_models_window_is_refused_at_load_in_one_line() {
        let route = "[llm.extraction_standard]\nprovider = \"anthropic\"\nmodel = \"claude-haiku-4-5-20251001\"\n";
        let load = |extra: &str| Config::from_layers(Some(("t.toml", &format!("{route}{extra}"))));
        assert!(load("max_tokens = 64000\n").is_ok(), "the cap itself is taken");
        assert_eq!(
            load("max_tokens = 64001\n").unwrap_err().to_string(),
            "config: llm.extraction_standard.max_tokens = 64001 is invalid: claude-haiku-4-5 writes at most 64000 output tokens (prices.\"claude-haiku-4-5\".max_output_tokens); use at most that"
        );
        assert!(load("max_tokens = 64000\n[batch]\nchunk_budget_tokens = 136000\n").is_ok());
        assert_eq!(
            load("max_tokens = 64000\n[batch]\nchunk_budget_tokens = 136001\n")
                .unwrap_err()
                .to_string(),
            "config: batch.chunk_budget_tokens = 136001 is invalid: a chunk (system prompt included) and llm.extraction_standard.max_tokens = 64000 would pass claude-haiku-4-5's 200000-token context window (prices.\"claude-haiku-4-5\".context_window_tokens); use at most 136000, or lower llm.extraction_standard.max_tokens"
        );
        // A fallback carries the same chunks, so its window counts too.
        let fallback = "fallback = [\"extraction_small\"]\n[llm.extraction_small]\nprovider = \"openai\"\nmodel = \"gpt-4o-mini\"\nmax_tokens = 16384\n[batch]\nchunk_budget_tokens = 120000\n";
        let err = load(fallback).unwrap_err().to_string();
        assert!(
            err.contains("llm.extraction_small.max_tokens = 16384 would pass gpt-4o-mini's 128000-token")
                && err.contains("use at most 111616"),
            "{err}"
        );
        // A model without a [prices] section has no known window: nothing to check.
        let unpriced = "[llm.extraction_standard]\nprovider = \"openai_compatible\"\nendpoint = \"http://127.0.0.1:11434/v1\"\nmodel = \"llama3.1\"\nmax_tokens = 1000000\n";
        assert!(Config::from_layers(Some(("t.toml", unpriced))).is_ok());
    }

    #[test]
    fn a_window_or_output_cap_out_of_range_is_refused() {
        let err = Config::from_layers(Some((
            "t.toml",
            "[prices.\"gpt-4o-mini\"]\nmax_output_tokens = 200000\n",
        )))
        .unwrap_err()
        .to_string();
        assert!(
            err.starts_with("config: prices.\"gpt-4o-mini\".max_output_tokens = 200000 is invalid"),
            "{err}"
        );
        let err = Config::from_layers(Some((
            "t.toml",
            "[prices.\"gpt-4o-mini\"]\ncontext_window_tokens = 0\n",
        )))
        .unwrap_err()
        .to_string();
        assert!(err.contains("context_window_tokens = 0"), "{err}");
    }

    #[test]
    fn a_zero_cache_step_is_refused_with_the_fix() {
        let overlay = "[prices.\"claude-haiku-4-5\"]\ncache_step_tokens = 0\n";
        let err = Config::from_layers(Some(("test.toml", overlay)))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("cache_step_tokens") && err.contains("use at least 1"),
            "{err}"
        );
    }

    #[test]
    fn a_budget_for_an_unknown_tier_or_a_negative_budget_is_refused() {
        let unknown = Config::from_layers(Some(("t.toml", "[billing]\ndaily_budget_usd = { gold = 1.0 }\n")))
            .unwrap_err()
            .to_string();
        assert!(
            unknown.contains("billing.daily_budget_usd.gold") && unknown.contains("standard"),
            "{unknown}"
        );
        let negative = Config::from_layers(Some(("t.toml", "[billing]\ndaily_budget_usd = { standard = -1.0 }\n")))
            .unwrap_err()
            .to_string();
        assert!(negative.contains(">= 0"), "{negative}");
        let ok = Config::from_layers(Some((
            "t.toml",
            "[billing]\ndaily_budget_usd = { standard = 0.25 }\nover_budget = \"defer\"\n",
        )))
        .unwrap();
        assert_eq!(ok.billing.over_budget, OverBudget::Defer);
    }

    #[test]
    fn a_body_limit_that_cannot_carry_the_largest_message_is_refused() {
        let defaults = Config::defaults();
        assert_eq!(defaults.ingest.max_message_bytes, 1 << 20);
        assert!(defaults.api.max_body_bytes > defaults.ingest.max_message_bytes);
        let err = Config::from_layers(Some(("t.toml", "[api]\nmax_body_bytes = 1048576\n")))
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "config: api.max_body_bytes = 1048576 is invalid: use more than ingest.max_message_bytes (1048576), so a message of that size fits in a request with its JSON (default 4194304)"
        );
        let err = Config::from_layers(Some(("t.toml", "[ingest]\nmax_message_bytes = 0\n")))
            .unwrap_err()
            .to_string();
        assert!(err.contains("ingest.max_message_bytes = 0"), "{err}");
        let smaller = Config::from_layers(Some(("t.toml", "[ingest]\nmax_message_bytes = 4096\n"))).unwrap();
        assert_eq!(smaller.ingest.max_message_len(), 4096);
    }

    #[test]
    fn a_tier_without_its_llm_section_is_refused_at_load() {
        let err = Config::from_layers(Some(("test.toml", "[billing]\ntiers = [\"standard\", \"premium\"]\n")))
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "config: no [llm.extraction_premium] section, but tier `premium` reaches purpose `extraction`; add [llm.extraction_premium] or remove `premium` from billing.tiers"
        );
    }
}
