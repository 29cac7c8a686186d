//! Typed configuration: the defaults in `config/memsift.toml`, overlaid by the operator's file.
//!
//! Option names are snake_case nouns with their unit as a suffix (`idle_timeout_secs`). Unknown
//! keys are errors, so a typo is reported at start-up rather than silently ignored. Runtime-only
//! knobs (log level, "run until idle") are CLI flags, not configuration.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use chrono::Duration;
use serde::{Deserialize, Serialize};

use crate::status::Purpose;

/// The documented default configuration, compiled in so the binary runs from any directory.
pub const DEFAULT_CONFIG_TOML: &str = include_str!("../../../config/memsift.toml");

/// A configuration problem, worded so the operator knows what to change.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read config file {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not valid TOML or has a wrong or unknown key.
    #[error("config file {origin} is invalid: {message}")]
    Parse {
        /// Where the text came from.
        origin: String,
        /// The parser's message, which names the key and line.
        message: String,
    },
    /// A value is out of range.
    #[error("config: {key} = {value} is invalid: {fix}")]
    Invalid {
        /// The dotted key.
        key: String,
        /// The offending value.
        value: String,
        /// What would be valid.
        fix: String,
    },
    /// A tier can reach a purpose whose `{purpose}_{tier}` section does not exist.
    #[error(
        "config: no [llm.{key}] section, but tier `{tier}` reaches purpose `{purpose}`; add [llm.{key}] or remove `{tier}` from billing.tiers"
    )]
    MissingLlmKey {
        /// The missing key.
        key: String,
        /// The tier that reaches it.
        tier: String,
        /// The purpose that needs it.
        purpose: String,
    },
    /// An `[llm.*]` section no route can use: not `{purpose}_{tier}` for a tier of
    /// `billing.tiers`, nor a fallback of such a section (a typo, or a tier left out).
    #[error(
        "config: no route reaches [llm.{key}]: it is not {{purpose}}_{{tier}} for a tier of billing.tiers {tiers:?} nor any section's fallback; the sections routes reach are {known}; rename it to one of them, add its tier to billing.tiers, or remove it"
    )]
    UnreachedLlmSection {
        /// The section's key.
        key: String,
        /// The configured tiers.
        tiers: Vec<String>,
        /// The sections that are reached, comma-separated.
        known: String,
    },
}

/// The `[llm.*]` section keys an operator's TOML text declares (so that a section the built-in
/// defaults bring is never blamed on the operator).
pub fn declared_llm_sections(text: &str) -> Vec<String> {
    let Ok(table) = toml::from_str::<toml::Table>(text) else {
        return Vec::new();
    };
    match table.get("llm") {
        Some(toml::Value::Table(llm)) => llm.keys().cloned().collect(),
        _ => Vec::new(),
    }
}

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

/// The circuit breaker of every provider lane.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HealthConfig {
    /// Consecutive outages (no connection, 5xx, overloaded) that open a lane's breaker.
    pub failure_threshold: u32,
    /// How long an open breaker waits before one probe call is let through.
    pub cool_down_secs: u64,
    /// Each failed probe doubles the wait, up to this.
    pub max_cool_down_secs: u64,
}

/// One provider and model's quota (`[quotas."PROVIDER/MODEL"]`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QuotaConfig {
    /// Calls per minute, every endpoint of the provider counted.
    #[serde(default)]
    pub requests_per_minute: Option<u32>,
    /// Input tokens per minute of model calls (estimated before sending).
    #[serde(default)]
    pub tokens_per_minute: Option<u32>,
}

/// Database settings.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DatabaseConfig {
    /// `sqlite://PATH` or `postgres://…`. Unset: a SQLite file in the data directory.
    pub url: Option<String>,
    /// SQLite `synchronous` pragma: `full` (default; a committed intent survives power loss) or `normal`.
    pub sqlite_synchronous: String,
    /// Pool size.
    pub max_connections: u32,
}

/// Segment settings.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SegmentsConfig {
    /// Silence after which an open segment closes.
    pub idle_timeout_secs: u64,
}

/// Ingest settings, shared by `memsift import` and the HTTP API.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IngestConfig {
    /// Longest message text (UTF-8 bytes) accepted; a longer one refuses its whole file or request.
    pub max_message_bytes: u64,
}

impl IngestConfig {
    /// The limit as a length to compare with a `str::len`.
    pub fn max_message_len(&self) -> usize {
        usize::try_from(self.max_message_bytes).unwrap_or(usize::MAX)
    }
}

/// Extraction settings.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExtractionConfig {
    /// Attempts per segment before it goes `dead`.
    pub max_attempts: u32,
    /// Failed applies of one recorded answer before it is quarantined as `failed`.
    pub max_apply_attempts: u32,
    /// How long a claim on a segment holds before another worker may take it over.
    pub claim_lease_secs: u64,
    /// The user's most similar existing memories shown with each segment (after the ones its
    /// turns referenced); 0 shows only referenced memories.
    pub similar_memories: u32,
}

/// Importance scoring settings (the formula is documented in `memsift_store::scoring`).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScoringConfig {
    /// Importance below which a memory may be archived (never deleted).
    pub floor: f64,
    /// Memories younger than this are never archived.
    pub min_age_days: u32,
    /// At most this share of a user's active memories is archived per run.
    pub max_share_per_run: f64,
}

/// Post-processing settings (the stage rules live in `memsift_postprocess`).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PostprocessConfig {
    /// Whether the stages run; `false` also stops requiring their `[llm.{purpose}_{tier}]` keys.
    pub enabled: bool,
    /// Whether every memory extraction writes gets a second look by the `extraction_review`
    /// purpose, which may only narrow it (shorter text of its own words, lower confidence, an
    /// earlier expiry).
    pub extraction_reviewer: bool,
    /// At most this share of a user's active memories is changed by one run of a stage.
    pub max_share_per_run: f64,
    /// New memories classified per user per run.
    pub max_relate_per_run: u32,
    /// Dormant entities reviewed per user per run.
    pub max_entity_reviews_per_run: u32,
}

/// Retention settings.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RetentionConfig {
    /// Days a finished request keeps its raw model output (for `memsift replay`); 0 keeps it forever.
    pub raw_output_days: u32,
}

/// Erasure settings.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ErasureConfig {
    /// Delete the provider-side copies (Anthropic batches, OpenAI batch files) of ingested
    /// batches that held the erased user's text.
    pub delete_provider_batches: bool,
    /// The per-install key of erasure fingerprints; `None`: `<data dir>/erasure.key`, created on
    /// first use. `MEMSIFT_ERASURE_KEY` (64 hex digits) overrides both.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_file: Option<PathBuf>,
}

/// Which embedder makes vectors.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EmbeddingBackend {
    /// all-MiniLM-L6-v2 in-process (384-d), the reference's model.
    Minilm,
    /// A static table distilled from MiniLM by `memsift distill` (fast, slightly weaker).
    Static,
    /// An OpenAI-compatible `/v1/embeddings` endpoint.
    OpenaiCompatible,
    /// Feature hashing: lexical only, a test double; never use it for real dedupe.
    Hashing,
}

/// HTTP API settings. The bearer token is never in this file: it comes from `MEMSIFT_API_TOKEN`
/// or the file named by `token_file`.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApiConfig {
    /// Address to listen on (`host:port`).
    pub listen: String,
    /// A file holding the bearer token (used when `MEMSIFT_API_TOKEN` is unset).
    pub token_file: Option<PathBuf>,
    /// Largest request body accepted; larger ones get 413.
    pub max_body_bytes: u64,
}

/// Embedding settings.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EmbeddingsConfig {
    /// The embedder.
    pub backend: EmbeddingBackend,
    /// The model directory (`minilm`, `static`); unset: the default install location.
    pub model_dir: Option<PathBuf>,
    /// Base URL of the endpoint (`openai_compatible`).
    pub endpoint: Option<String>,
    /// Model name at the endpoint (`openai_compatible`).
    pub model: Option<String>,
    /// Vector length the endpoint returns (`openai_compatible`).
    pub dimension: Option<u32>,
    /// Environment variable holding the endpoint's key (`openai_compatible`, optional).
    pub api_key_env: Option<String>,
    /// File holding the endpoint's key (`openai_compatible`, optional).
    pub api_key_file: Option<PathBuf>,
    /// Seconds without use after which the daemon releases a loaded embedder (0: keep it).
    pub idle_unload_secs: u64,
}

/// Batch-lane settings.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BatchConfig {
    /// Requests per provider batch at most.
    pub max_requests_per_batch: u32,
    /// How long a planned request waits for others before a smaller batch is sent.
    pub pack_max_wait_secs: u64,
    /// First poll after submission.
    pub poll_initial_secs: u64,
    /// Longest gap between polls.
    pub poll_max_secs: u64,
    /// How long a batch whose create outcome is unknown waits before the reconciler looks for it.
    pub reconcile_grace_secs: u64,
    /// Chunk size for extraction payloads, in tokens.
    pub chunk_budget_tokens: u32,
    /// Known memories shown to the model per chunk.
    pub max_known_memories: u32,
}

/// Billing settings.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BillingConfig {
    /// The tier of a user whose row names none.
    pub default_tier: String,
    /// Every tier a user can be on; each must resolve every reachable `{purpose}_{tier}`.
    pub tiers: Vec<String>,
    /// A daily spending cap per tier (USD per user per UTC day); a tier not listed has none.
    pub daily_budget_usd: BTreeMap<String, f64>,
    /// What happens to a user's work once their tier's daily budget is spent.
    pub over_budget: OverBudget,
}

/// The fate of work planned for a user who is over their daily budget.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OverBudget {
    /// Extract on the offline heuristic lane today (nothing spent, lower quality).
    Heuristic,
    /// Wait until the next UTC day and go through the tier's own lane then.
    Defer,
}

/// Prompt settings.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PromptsConfig {
    /// A directory whose `<name>.md` files replace the built-in prompts of the same name.
    pub dir: Option<PathBuf>,
}

/// The daemon's periodic jobs: cron expressions with a seconds field, in UTC.
///
/// Expressions are checked when the daemon starts and by `check-config` (this crate has no cron
/// parser, so the check lives with the scheduler).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SchedulesConfig {
    /// One step of every pipeline stage (`pipeline::run_once`).
    pub run_pipeline: String,
    /// Closing segments whose conversation went quiet.
    pub close_idle_segments: String,
    /// The safety-net sweep.
    pub sweep: String,
    /// Dropping raw outputs past `retention.raw_output_days`.
    pub retention: String,
    /// Importance scoring.
    pub scoring: String,
    /// Relationship classification of new memories.
    pub relationships: String,
    /// Segment summaries.
    pub summaries: String,
    /// Consolidation.
    pub consolidation: String,
    /// Refinement.
    pub refinement: String,
    /// Entity GC.
    pub entity_gc: String,
    /// How long a claimed run holds its job against other daemons; a run longer than this may be
    /// overlapped, a daemon that dies blocks the job at most this long.
    pub lease_secs: u64,
}

/// Daemon lifecycle settings.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DaemonConfig {
    /// After SIGTERM, how long a step in flight may run on before it is abandoned.
    pub drain_timeout_secs: u64,
}

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
    prices.get(model).or_else(|| {
        prices
            .iter()
            .filter(|(name, _)| model.starts_with(name.as_str()))
            .max_by_key(|(name, _)| name.len())
            .map(|(_, price)| price)
    })
}

/// Which provider answers a `{purpose}_{tier}` key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProviderKind {
    /// Offline rules; no key, no spend.
    Heuristic,
    /// Anthropic Messages and Message Batches.
    Anthropic,
    /// OpenAI chat completions, Files and Batches.
    Openai,
    /// Any OpenAI-compatible chat endpoint (Ollama, vLLM, llama.cpp); no batch lane.
    OpenaiCompatible,
}

impl ProviderKind {
    /// The snake_case name, as configuration spells it and request rows store it.
    pub fn as_str(self) -> &'static str {
        match self {
            ProviderKind::Heuristic => "heuristic",
            ProviderKind::Anthropic => "anthropic",
            ProviderKind::Openai => "openai",
            ProviderKind::OpenaiCompatible => "openai_compatible",
        }
    }
}

impl std::fmt::Display for ProviderKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How the lane is chosen for a key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LanePolicy {
    /// The batch lane when the provider has one and is healthy, else immediate.
    Auto,
    /// Always the batch lane.
    Batch,
    /// Always one call per request.
    Immediate,
}

/// One internal LLM config.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LlmConfig {
    /// The provider.
    pub provider: ProviderKind,
    /// Base URL; unset means the provider's public endpoint.
    #[serde(default)]
    pub endpoint: Option<String>,
    /// Model name.
    #[serde(default)]
    pub model: Option<String>,
    /// Environment variable holding the API key.
    #[serde(default)]
    pub api_key_env: Option<String>,
    /// File holding the API key (read at start-up, never logged).
    #[serde(default)]
    pub api_key_file: Option<PathBuf>,
    /// Lane policy.
    #[serde(default = "default_lane")]
    pub lane: LanePolicy,
    /// Sampling temperature; must be unset when thinking is on.
    #[serde(default)]
    pub temperature: Option<f64>,
    /// Output token cap.
    #[serde(default = "default_max_tokens")]
    pub max_tokens: u32,
    /// Extended-thinking budget; must be at least 1024 and below `max_tokens`.
    #[serde(default)]
    pub thinking_budget_tokens: Option<u32>,
    /// Prompt-cache TTL for the system prompt: `5m` or `1h`; it is marked only where that pays.
    #[serde(default = "default_cache_ttl")]
    pub cache_ttl: String,
    /// Other `[llm.*]` sections to send work to, in order, while this one's lane is unwell.
    #[serde(default)]
    pub fallback: Vec<String>,
}

fn default_lane() -> LanePolicy {
    LanePolicy::Auto
}

fn default_max_tokens() -> u32 {
    8192
}

fn default_cache_ttl() -> String {
    "1h".to_owned()
}

impl Config {
    /// The built-in defaults alone.
    pub fn defaults() -> Config {
        Config::from_layers(None).expect("the built-in config/memsift.toml is valid: a unit test parses it")
    }

    /// The defaults overlaid by an operator's TOML text (`origin` names it in errors).
    pub fn from_layers(overlay: Option<(&str, &str)>) -> Result<Config, ConfigError> {
        let mut merged: toml::Table = toml::from_str(DEFAULT_CONFIG_TOML).map_err(|error| ConfigError::Parse {
            origin: "built-in defaults".to_owned(),
            message: error.to_string(),
        })?;
        if let Some((origin, text)) = overlay {
            let user: toml::Table = toml::from_str(text).map_err(|error| ConfigError::Parse {
                origin: origin.to_owned(),
                message: error.to_string(),
            })?;
            merge_tables(&mut merged, user);
        }
        let origin = overlay.map(|(origin, _)| origin).unwrap_or("built-in defaults");
        let config: Config = toml::Value::Table(merged)
            .try_into()
            .map_err(|error: toml::de::Error| ConfigError::Parse {
                origin: origin.to_owned(),
                message: error.to_string(),
            })?;
        config.validate()?;
        Ok(config)
    }

    /// Reads the defaults overlaid by the file at `path`.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_owned(),
            source,
        })?;
        Config::from_layers(Some((&path.display().to_string(), &text)))
    }

    /// The purposes a user of any tier can reach with this configuration.
    pub fn reachable_purposes(&self) -> Vec<Purpose> {
        // The extraction reviewer is optional: its key is required only when it is on.
        if self.postprocess.enabled {
            Purpose::ALL
                .iter()
                .copied()
                .filter(|purpose| *purpose != Purpose::ExtractionReview || self.postprocess.extraction_reviewer)
                .collect()
        } else {
            vec![Purpose::Extraction]
        }
    }

    /// The `{purpose}_{tier}` config for a purpose and tier.
    pub fn llm_for(&self, purpose: Purpose, tier: &str) -> Result<&LlmConfig, ConfigError> {
        let key = format!("{}_{}", purpose.as_str(), tier);
        self.llm.get(&key).ok_or_else(|| ConfigError::MissingLlmKey {
            key,
            tier: tier.to_owned(),
            purpose: purpose.as_str().to_owned(),
        })
    }

    /// The idle timeout as a duration.
    pub fn idle_timeout(&self) -> Duration {
        Duration::seconds(self.segments.idle_timeout_secs as i64)
    }

    /// Checks every value and every reachable `{purpose}_{tier}` key (invariant 15).
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.segments.idle_timeout_secs == 0 {
            return Err(invalid(
                "segments.idle_timeout_secs",
                0,
                "use a positive number of seconds, e.g. 3600",
            ));
        }
        if self.ingest.max_message_bytes == 0 {
            return Err(invalid(
                "ingest.max_message_bytes",
                0,
                "use a positive size in bytes (default 1048576)",
            ));
        }
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
        if self.schedules.lease_secs == 0 {
            return Err(invalid(
                "schedules.lease_secs",
                0,
                "use a positive number of seconds, longer than the slowest run (default 900)",
            ));
        }
        if self.extraction.max_attempts == 0 {
            return Err(invalid("extraction.max_attempts", 0, "use at least 1 (default 3)"));
        }
        if self.extraction.max_apply_attempts == 0 {
            return Err(invalid(
                "extraction.max_apply_attempts",
                0,
                "use at least 1 (default 3)",
            ));
        }
        if !matches!(self.database.sqlite_synchronous.as_str(), "full" | "normal") {
            return Err(invalid(
                "database.sqlite_synchronous",
                &self.database.sqlite_synchronous,
                "use \"full\" or \"normal\"",
            ));
        }
        if self.batch.max_requests_per_batch == 0 || self.batch.max_requests_per_batch > 50_000 {
            return Err(invalid(
                "batch.max_requests_per_batch",
                self.batch.max_requests_per_batch,
                "use 1 to 50000 (OpenAI's per-file limit; Anthropic allows 100000)",
            ));
        }
        if self.batch.chunk_budget_tokens < 256 {
            return Err(invalid(
                "batch.chunk_budget_tokens",
                self.batch.chunk_budget_tokens,
                "use at least 256 (default 6000)",
            ));
        }
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
            if !budget.is_finite() || *budget < 0.0 {
                return Err(invalid(
                    &format!("billing.daily_budget_usd.{tier}"),
                    budget,
                    "use USD per user per day, >= 0",
                ));
            }
        }
        for tier in &self.billing.tiers {
            for purpose in self.reachable_purposes() {
                self.llm_for(purpose, tier)?;
            }
        }
        for (model, price) in &self.prices {
            let fields = [
                price.input_per_mtok,
                price.output_per_mtok,
                price.cache_write_5m_multiplier,
                price.cache_write_1h_multiplier,
                price.cache_read_multiplier,
            ];
            if fields.iter().any(|value| !value.is_finite() || *value < 0.0)
                || !(0.0..1.0).contains(&price.batch_discount)
                || !(0.0..=1.0).contains(&price.batch_cache_hit_share)
            {
                return Err(invalid(
                    &format!("prices.\"{model}\""),
                    "a negative or non-finite price",
                    "use USD per million tokens and multipliers, each >= 0, batch_discount in [0, 1) and batch_cache_hit_share in [0, 1]",
                ));
            }
            if price.cache_step_tokens == 0 {
                return Err(invalid(
                    &format!("prices.\"{model}\".cache_step_tokens"),
                    0,
                    "use at least 1 (Anthropic counts hits per token: 1; OpenAI in steps of 128)",
                ));
            }
        }
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
        let embeddings = &self.embeddings;
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
        self.validate_fallbacks()?;
        self.validate_health_and_quotas()?;
        for (key, llm) in &self.llm {
            if !matches!(llm.cache_ttl.as_str(), "5m" | "1h") {
                return Err(invalid(
                    &format!("llm.{key}.cache_ttl"),
                    &llm.cache_ttl,
                    "use \"5m\" or \"1h\"",
                ));
            }
            if llm.max_tokens == 0 {
                return Err(invalid(&format!("llm.{key}.max_tokens"), 0, "use at least 1"));
            }
        }
        Ok(())
    }
}

impl Config {
    /// The `[llm.*]` sections some route reaches: `{purpose}_{tier}` for every purpose and every tier
    /// of `billing.tiers` (a stage that is off today may be turned on), and their fallbacks.
    pub fn reached_llm_sections(&self) -> std::collections::BTreeSet<String> {
        let mut reached = std::collections::BTreeSet::new();
        for tier in &self.billing.tiers {
            for purpose in Purpose::ALL {
                let key = format!("{}_{tier}", purpose.as_str());
                if self.llm.contains_key(&key) {
                    reached.extend(self.provider_chain(&key));
                }
            }
        }
        reached
    }

    /// An error for each of `declared` (section keys, see [`declared_llm_sections`]) that no
    /// route reaches.
    pub fn unreached_llm_sections(&self, declared: &[String]) -> Vec<ConfigError> {
        let reached = self.reached_llm_sections();
        let known = reached.iter().cloned().collect::<Vec<_>>().join(", ");
        declared
            .iter()
            .filter(|key| !reached.contains(*key))
            .map(|key| ConfigError::UnreachedLlmSection {
                key: key.clone(),
                tiers: self.billing.tiers.clone(),
                known: known.clone(),
            })
            .collect()
    }

    /// The sections that answer `key`, in the order they are tried: `key`, then its fallbacks.
    pub fn provider_chain(&self, key: &str) -> Vec<String> {
        let mut chain = vec![key.to_owned()];
        if let Some(llm) = self.llm.get(key) {
            chain.extend(llm.fallback.iter().cloned());
        }
        chain
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

    fn validate_health_and_quotas(&self) -> Result<(), ConfigError> {
        let health = &self.health;
        if health.failure_threshold == 0 {
            return Err(invalid("health.failure_threshold", 0, "use at least 1 (default 5)"));
        }
        if health.cool_down_secs == 0 || health.max_cool_down_secs < health.cool_down_secs {
            return Err(invalid(
                "health.cool_down_secs",
                health.cool_down_secs,
                "use a positive number of seconds, at most health.max_cool_down_secs (defaults 60 and 1800)",
            ));
        }
        const PROVIDERS: [&str; 3] = ["anthropic", "openai", "openai_compatible"];
        for (name, quota) in &self.quotas {
            let provider = name.split_once('/').map(|(provider, _)| provider);
            if !provider.is_some_and(|provider| PROVIDERS.contains(&provider)) {
                return Err(invalid(
                    &format!("quotas.\"{name}\""),
                    "this name",
                    "name it \"PROVIDER/MODEL\" with PROVIDER one of anthropic, openai, openai_compatible, e.g. \"anthropic/claude-haiku-4-5\"",
                ));
            }
            if quota.requests_per_minute == Some(0) || quota.tokens_per_minute == Some(0) {
                return Err(invalid(
                    &format!("quotas.\"{name}\""),
                    "0",
                    "use a positive number per minute, or leave the field out for no limit",
                ));
            }
        }
        Ok(())
    }

    /// The health settings as durations.
    pub fn breaker_cool_downs(&self) -> (Duration, Duration) {
        (
            Duration::seconds(self.health.cool_down_secs as i64),
            Duration::seconds(self.health.max_cool_down_secs as i64),
        )
    }
}

fn invalid(key: &str, value: impl ToString, fix: &str) -> ConfigError {
    ConfigError::Invalid {
        key: key.to_owned(),
        value: value.to_string(),
        fix: fix.to_owned(),
    }
}

/// Overlays `over` on `base`: tables merge key by key, anything else replaces.
fn merge_tables(base: &mut toml::Table, over: toml::Table) {
    for (key, value) in over {
        match (base.get_mut(&key), value) {
            (Some(toml::Value::Table(base_table)), toml::Value::Table(over_table)) => {
                merge_tables(base_table, over_table)
            }
            (_, value) => {
                base.insert(key, value);
            }
        }
    }
}

/// The directory for the default SQLite file and the demo database.
///
/// systemd's `$STATE_DIRECTORY` first, then `$XDG_DATA_HOME/memsift`, then `~/.local/share/memsift`,
/// then `./.memsift` when no home is known.
pub fn default_data_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("STATE_DIRECTORY").filter(|dir| !dir.is_empty()) {
        // systemd may pass several colon-separated directories; the first is ours.
        let first = dir.to_string_lossy().split(':').next().unwrap_or_default().to_owned();
        return PathBuf::from(first);
    }
    if let Some(dir) = std::env::var_os("XDG_DATA_HOME").filter(|dir| !dir.is_empty()) {
        return PathBuf::from(dir).join("memsift");
    }
    if let Some(home) = std::env::var_os("HOME").filter(|home| !home.is_empty()) {
        return PathBuf::from(home).join(".local/share/memsift");
    }
    PathBuf::from(".memsift")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_built_in_defaults_parse_and_validate() {
        let config = Config::defaults();
        assert_eq!(config.segments.idle_timeout_secs, 3600);
        assert_eq!(config.extraction.max_attempts, 3);
        assert_eq!(
            config.llm_for(Purpose::Extraction, "standard").unwrap().provider,
            ProviderKind::Heuristic
        );
    }

    #[test]
    fn prices_come_from_config_and_bad_ones_are_refused() {
        let config = Config::defaults();
        assert_eq!(config.prices["claude-haiku-4-5"].output_per_mtok, 5.0);
        let overlay = "[prices.\"my-model\"]\ninput_per_mtok = -1.0\noutput_per_mtok = 1.0\ncache_write_5m_multiplier = 1.0\n\
                       cache_write_1h_multiplier = 1.0\ncache_read_multiplier = 0.5\nbatch_discount = 0.5\n\
                       min_cacheable_tokens = 1024\ncache_step_tokens = 128\nautomatic_cache = true\n\
                       batch_cache_hit_share = 0.3\n";
        let err = Config::from_layers(Some(("test.toml", overlay)))
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("config: prices.\"my-model\""), "{err}");
    }

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
    fn an_overlay_changes_only_what_it_names() {
        let config = Config::from_layers(Some(("test.toml", "[segments]\nidle_timeout_secs = 120\n"))).unwrap();
        assert_eq!(config.segments.idle_timeout_secs, 120);
        assert_eq!(config.extraction.max_attempts, 3);
    }

    #[test]
    fn a_typo_is_an_error_that_names_the_key() {
        let err = Config::from_layers(Some(("test.toml", "[segments]\nidle_timeout_sec = 120\n")))
            .unwrap_err()
            .to_string();
        assert!(err.contains("test.toml"), "{err}");
        assert!(err.contains("idle_timeout_sec"), "{err}");
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
