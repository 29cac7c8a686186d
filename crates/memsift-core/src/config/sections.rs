//! The plain sections of the configuration file, one struct per `[table]`: what each knob is
//! and its unit. The `[llm.*]` routes and `[prices.*]` have files of their own.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

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
    /// Continuations planned at most per chunk for answers whose JSON was cut off (whatever the
    /// stop reason); 0 plans none, and the rest of a cut chunk is not extracted.
    pub max_continuations: u32,
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
    /// Whether `GET /metrics` is served without the token (for a scraper on a private network).
    #[serde(default)]
    pub metrics_public: bool,
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
    /// Embed every stored turn too, for search.
    pub embed_turns: bool,
    /// Stored turns the daemon (and `memsift run`) embeds for search per pipeline pass, after the
    /// pass's lanes and applies; `run --until-idle` embeds them in its waits and at its end.
    pub turns_per_pass: u32,
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
    /// How long a batch whose create outcome is unknown waits before the reconciler looks for it;
    /// also how long a batch may be missing at the provider (404) or outlive its expiry before it
    /// is given up.
    pub reconcile_grace_secs: u64,
    /// Batches a request may lose (given up) before its lane is paused as a setting fault.
    pub max_batch_losses: u32,
    /// The longest pause between bytes of a provider's answer before the read is abandoned.
    pub download_idle_secs: u64,
    /// The longest line of a results file (and the largest single JSON answer) read, in bytes.
    pub max_result_line_bytes: u64,
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
    /// Under a daily budget, the share of recent answers (per purpose and model) whose output a
    /// request's allowance covers before its headroom.
    pub output_percentile: f64,
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
