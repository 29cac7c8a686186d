//! `[llm.*]`: the per-`{purpose}_{tier}` model sections, and which of them a route reaches
//! (a tier's purposes and their fallbacks).

use std::collections::BTreeSet;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::Config;
use super::error::ConfigError;
use crate::status::Purpose;

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

impl Config {
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

    /// The `[llm.*]` sections some route reaches: `{purpose}_{tier}` for every purpose and every tier
    /// of `billing.tiers` (a stage that is off today may be turned on), and their fallbacks.
    pub fn reached_llm_sections(&self) -> BTreeSet<String> {
        let mut reached = BTreeSet::new();
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
}
