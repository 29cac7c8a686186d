//! Typed configuration: the defaults in `config/memsift.toml`, overlaid by the operator's file.
//!
//! Option names are snake_case nouns with their unit as a suffix (`idle_timeout_secs`). Unknown
//! keys are errors, so a typo is reported at start-up rather than silently ignored. Runtime-only
//! knobs (log level, "run until idle") are CLI flags, not configuration.
//!
//! [`Config`] is the whole file; its parts live by concern: `sections` (the plain tables),
//! `llm` (the `[llm.*]` routes and which of them a tier reaches), `prices` (`[prices.*]`: the
//! cache rules and context windows), `load` (the built-in defaults and the operator's overlay), `validate` (the checks
//! run on every load), `error` and `paths`. Every public item is re-exported here, so callers name
//! `memsift_core::config::X` whichever file holds it.

use std::collections::BTreeMap;

use chrono::Duration;
use serde::{Deserialize, Serialize};

mod error;
mod llm;
mod load;
mod paths;
mod prices;
mod ranges;
mod search;
mod sections;
mod validate;

pub use error::ConfigError;
pub use llm::{LanePolicy, LlmConfig, ProviderKind, declared_llm_sections};
pub use load::{DEFAULT_CONFIG_TOML, MAX_CONFIG_BYTES, read_config_text};
pub use paths::default_data_dir;
pub use prices::{ModelPrice, price_entry_for, price_for};
pub use ranges::{MAX_DAYS, MAX_SECS};
pub use search::{MAX_NEARBY_SPAN, SearchConfig, SearchWeights};
pub use sections::{
    ApiConfig, BatchConfig, BillingConfig, DaemonConfig, DatabaseConfig, EmbeddingBackend, EmbeddingsConfig,
    ErasureConfig, ExtractionConfig, HealthConfig, IngestConfig, OverBudget, PostprocessConfig, PromptsConfig,
    QuotaConfig, RetentionConfig, SchedulesConfig, ScoringConfig, SegmentsConfig,
};

/// The whole configuration.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Where memsift keeps its state.
    pub database: DatabaseConfig,
    /// How conversations are cut into segments.
    pub segments: SegmentsConfig,
    /// What a message may hold.
    pub ingest: IngestConfig,
    /// Extraction scheduling.
    pub extraction: ExtractionConfig,
    /// The batch lane's timing and sizes.
    pub batch: BatchConfig,
    /// Billing tiers.
    pub billing: BillingConfig,
    /// Prompt files.
    pub prompts: PromptsConfig,
    /// The embedder behind vector dedupe and similar-memory context.
    pub embeddings: EmbeddingsConfig,
    /// The read side: what it holds in memory.
    pub search: SearchConfig,
    /// What erasing a user does beyond the store.
    pub erasure: ErasureConfig,
    /// How long stored model text is kept.
    pub retention: RetentionConfig,
    /// Daily importance scoring.
    pub scoring: ScoringConfig,
    /// The post-processing stages.
    pub postprocess: PostprocessConfig,
    /// The HTTP API (`memsift serve`).
    pub api: ApiConfig,
    /// One internal LLM config per `{purpose}_{tier}` key.
    pub llm: BTreeMap<String, LlmConfig>,
    /// Prices by model name (USD per million tokens); a model missing here costs 0 with a warning.
    pub prices: BTreeMap<String, ModelPrice>,
    /// The periodic jobs of `memsift daemon`.
    pub schedules: SchedulesConfig,
    /// How `memsift daemon` stops.
    pub daemon: DaemonConfig,
    /// When a provider lane counts as unwell, and how it is probed back.
    pub health: HealthConfig,
    /// Request and token quotas per provider and model, shared by every lane and route.
    pub quotas: BTreeMap<String, QuotaConfig>,
}

impl Config {
    /// The idle timeout as a duration.
    pub fn idle_timeout(&self) -> Duration {
        ranges::seconds(self.segments.idle_timeout_secs)
    }

    /// The health settings as durations.
    pub fn breaker_cool_downs(&self) -> (Duration, Duration) {
        (
            ranges::seconds(self.health.cool_down_secs),
            ranges::seconds(self.health.max_cool_down_secs),
        )
    }
}
