//! What a simulator runs with: the responder, the seeded fault plan, the clock and the accepted key.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use memsift_core::config::{Config, ModelPrice};
use memsift_core::{Clock, SystemClock};
use serde::{Deserialize, Serialize};

pub use crate::error::SimConfigError;
use crate::responder::{HeuristicResponder, LocomoResponder, Responder};

/// Everything a simulator needs.
#[derive(Clone)]
pub struct SimConfig {
    /// Who writes the model's answers.
    pub responder: Arc<dyn Responder>,
    /// Which faults to inject, and the seed that makes them reproducible.
    pub faults: FaultConfig,
    /// The clock batch progress, expiry and cache TTLs are measured on; tests pass a `ManualClock`.
    pub clock: Arc<dyn Clock>,
    /// When set, the only key accepted; otherwise any non-empty key is.
    pub api_key: Option<String>,
    /// The base URL written into `results_url`; by default `http://` plus the listener's address.
    pub public_base_url: Option<String>,
    /// Each model's prompt-cache rules (minimum cacheable prefix, hit step, automatic or marked),
    /// so hits are counted as the provider counts them; by default the built-in `[prices]`. A
    /// model without rules caches every marked prefix.
    pub prices: BTreeMap<String, ModelPrice>,
}

impl std::fmt::Debug for SimConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimConfig")
            .field("responder", &self.responder)
            .field("faults", &self.faults)
            .field("api_key", &self.api_key.as_ref().map(|_| "[redacted]"))
            .field("public_base_url", &self.public_base_url)
            .finish_non_exhaustive()
    }
}

impl SimConfig {
    /// A fault-free simulator on the wall clock answering with `responder`.
    pub fn new(responder: Arc<dyn Responder>) -> Self {
        Self {
            responder,
            faults: FaultConfig::default(),
            clock: Arc::new(SystemClock),
            api_key: None,
            public_base_url: None,
            prices: Config::defaults().prices,
        }
    }

    /// The config behind `memsift sim --responder R --faults FILE`: `heuristic` or `locomo:PATH`,
    /// and an optional fault file (`.toml`, else JSON).
    pub fn from_cli(responder: &str, faults: Option<&Path>) -> Result<SimConfig, SimConfigError> {
        let responder: Arc<dyn Responder> = match responder.split_once(':') {
            None if responder == "heuristic" => Arc::new(HeuristicResponder),
            Some(("locomo", path)) => Arc::new(LocomoResponder::load(Path::new(path))?),
            _ => return Err(SimConfigError::UnknownResponder(responder.to_owned())),
        };
        let mut config = SimConfig::new(responder);
        if let Some(path) = faults {
            config.faults = FaultConfig::load(path)?;
        }
        Ok(config)
    }

    /// With a fault plan.
    pub fn with_faults(mut self, faults: FaultConfig) -> Self {
        self.faults = faults;
        self
    }

    /// With a clock.
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// With these models' cache rules instead of the built-in ones.
    pub fn with_prices(mut self, prices: BTreeMap<String, ModelPrice>) -> Self {
        self.prices = prices;
        self
    }

    /// Accepting only `key`.
    pub fn with_api_key(mut self, key: impl Into<String>) -> Self {
        self.api_key = Some(key.into());
        self
    }
}

/// When an HTTP-level fault fires, and its parameters.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HttpFault {
    /// Matching calls that pass before the burst (so a burst can start mid-run).
    pub skip: u32,
    /// The first N matching calls after `skip` always fault (deterministic tests and bursts).
    pub first: u32,
    /// After those, each matching call faults with this probability (seeded).
    pub share: f64,
    /// Endpoint names it applies to (`anthropic.batches.retrieve`, `chat.completions`, …); empty: all.
    pub endpoints: Vec<String>,
    /// `retry-after-ms` sent with 429/529 (and `retry-after` in whole seconds, rounded up).
    pub retry_after_ms: Option<u64>,
    /// How long a slow response waits before answering.
    pub delay_ms: u64,
}

impl HttpFault {
    /// Fires on the first `count` calls to `endpoint`.
    pub fn first(count: u32, endpoint: &str) -> Self {
        Self {
            first: count,
            endpoints: vec![endpoint.to_owned()],
            ..Self::default()
        }
    }

    /// The burst starts after `calls` matching calls have passed.
    pub fn after(mut self, calls: u32) -> Self {
        self.skip = calls;
        self
    }

    /// With a `retry-after-ms`.
    pub fn retry_after_ms(mut self, ms: u64) -> Self {
        self.retry_after_ms = Some(ms);
        self
    }

    pub(crate) fn applies_to(&self, endpoint: &str) -> bool {
        self.endpoints.is_empty() || self.endpoints.iter().any(|name| name == endpoint)
    }
}

/// How a "create succeeded but the answer was lost" fault loses the answer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LostCreateMode {
    /// Headers go out, then the connection drops mid-body.
    #[default]
    DropConnection,
    /// A 500 instead of the created batch.
    ServerError,
}

/// The batch is created, then the client never learns its id.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LostCreateFault {
    /// The first N batch creates lose their answer.
    pub first: u32,
    /// After those, each create loses it with this probability.
    pub share: f64,
    /// How it is lost.
    pub mode: LostCreateMode,
}

/// How a malformed answer is malformed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MalformedKind {
    /// Wrapped in a ```json fence.
    CodeFence,
    /// Prose before and after the array.
    Prose,
    /// A comma before the closing bracket.
    TrailingComma,
    /// Single quotes instead of double quotes.
    SingleQuotes,
    /// Cut off before the end.
    Unterminated,
}

impl MalformedKind {
    /// Every kind.
    pub const ALL: [MalformedKind; 5] = [
        MalformedKind::CodeFence,
        MalformedKind::Prose,
        MalformedKind::TrailingComma,
        MalformedKind::SingleQuotes,
        MalformedKind::Unterminated,
    ];
}

/// How a results download is broken, as a proxy or a failing provider breaks it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ResultsFaultKind {
    /// The results, then one line that never ends (bytes without a newline, forever).
    EndlessLine,
    /// An HTML error page with status 200, as a proxy answers.
    Html,
    /// The first half of the body, then a clean end of the body.
    CutHalfway,
    /// The first half of the body, then nothing, with the connection held open.
    Stall,
    /// The first line sent twice.
    DuplicateLine,
}

/// A broken results download.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResultsFault {
    /// How it is broken.
    pub kind: ResultsFaultKind,
    /// Only the first N downloads are broken; 0: every one.
    #[serde(default)]
    pub first: u32,
}

/// The seeded fault plan. All shares are probabilities from 0 to 1; the same seed and the same
/// sequence of calls give the same faults.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FaultConfig {
    /// Seed of every random choice (faults, ids, result order).
    pub seed: u64,
    /// How long a batch takes once created, on the sim's clock; 0 ends it on the next retrieve.
    pub processing_latency_ms: u64,
    /// 429 `rate_limit_error` with `retry-after`.
    pub rate_limit: Option<HttpFault>,
    /// 500 `api_error`.
    pub server_error: Option<HttpFault>,
    /// 401 `authentication_error` / `invalid_api_key`, as if the key were revoked.
    pub auth_error: Option<HttpFault>,
    /// 404 `not_found_error`, as if the base URL were wrong.
    pub not_found: Option<HttpFault>,
    /// 529 `overloaded_error` (Anthropic) / 503 (OpenAI).
    pub overloaded: Option<HttpFault>,
    /// A delay before answering.
    pub slow: Option<HttpFault>,
    /// Retrieves and result downloads of a new batch answer 404 this many times first.
    pub not_found_after_create: u32,
    /// Batch create succeeds but the answer is lost.
    pub lost_create: Option<LostCreateFault>,
    /// Share of batch requests that end `errored` (`api_error`).
    pub request_errored_share: f64,
    /// Share of batch requests that end `expired`.
    pub request_expired_share: f64,
    /// Share of batch requests that end `canceled`.
    pub request_canceled_share: f64,
    /// Share of answers cut short with `stop_reason: max_tokens` / `finish_reason: length`.
    pub truncated_share: f64,
    /// Share of answers cut short but reported as finished (`end_turn` / `stop`), as a model that
    /// stops early does.
    pub cut_share: f64,
    /// Share of answers made malformed.
    pub malformed_share: f64,
    /// Which malformations to pick from; empty: all.
    pub malformed_kinds: Vec<MalformedKind>,
    /// Share of answers whose first item is repeated.
    pub duplicate_items_share: f64,
    /// Share of answers with U+0000 written into them (which PostgreSQL cannot store in text).
    pub nul_share: f64,
    /// Models the provider does not know: model calls answer 404, and batch requests end errored.
    pub unknown_models: Vec<String>,
    /// Results and files use CRLF line ends.
    pub results_crlf: bool,
    /// Results and files are sent in chunks of this many bytes, so lines straddle reads.
    pub results_chunk_bytes: Option<usize>,
    /// Request bodies over this many bytes get 413.
    pub max_request_bytes: Option<usize>,
    /// Results downloads (Anthropic results, OpenAI output and error files) are broken this way.
    pub results_fault: Option<ResultsFault>,
    /// This many lines naming requests that are not in the batch are added to its results.
    pub foreign_lines: u32,
    /// Results of an ended batch answer 404, as once the provider has purged them.
    pub results_purged: bool,
    /// Batches never end, not even past their expiry (a provider stuck in processing).
    pub never_end: bool,
}

impl FaultConfig {
    /// Reads a fault plan: TOML when the file ends in `.toml`, JSON otherwise.
    pub fn load(path: &Path) -> Result<FaultConfig, SimConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| SimConfigError::Read {
            path: path.to_owned(),
            source,
        })?;
        let parsed = if path.extension().is_some_and(|ext| ext == "toml") {
            toml::from_str(&text).map_err(|error| error.to_string())
        } else {
            serde_json::from_str(&text).map_err(|error| error.to_string())
        };
        parsed.map_err(|message| SimConfigError::Parse {
            path: path.to_owned(),
            message,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fault_file_loads_from_toml_and_json() {
        let dir = tempfile::tempdir().unwrap();
        let toml_path = dir.path().join("faults.toml");
        std::fs::write(
            &toml_path,
            "seed = 7\nprocessing_latency_ms = 1000\nmalformed_kinds = [\"code_fence\"]\n[rate_limit]\nfirst = 2\nretry_after_ms = 1500\n",
        )
        .unwrap();
        let faults = FaultConfig::load(&toml_path).unwrap();
        assert_eq!(faults.seed, 7);
        assert_eq!(faults.rate_limit.as_ref().unwrap().retry_after_ms, Some(1500));
        assert_eq!(faults.malformed_kinds, vec![MalformedKind::CodeFence]);

        let json_path = dir.path().join("faults.json");
        std::fs::write(&json_path, r#"{"lost_create": {"first": 1, "mode": "server_error"}}"#).unwrap();
        let faults = FaultConfig::load(&json_path).unwrap();
        assert_eq!(faults.lost_create.unwrap().mode, LostCreateMode::ServerError);

        std::fs::write(&json_path, r#"{"typo": 1}"#).unwrap();
        assert!(FaultConfig::load(&json_path).unwrap_err().to_string().contains("typo"));
    }

    #[test]
    fn from_cli_refuses_an_unknown_responder() {
        assert!(SimConfig::from_cli("heuristic", None).is_ok());
        let err = SimConfig::from_cli("oracle", None).unwrap_err().to_string();
        assert_eq!(err, "unknown responder `oracle`; use `heuristic` or `locomo:PATH`");
    }
}
