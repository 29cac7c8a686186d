//! `memsift check-config --probe`: calls each configured endpoint's cheapest read and says, per
//! section, whether it is reachable as configured and, when not, why and what to change.
//!
//! Anthropic and OpenAI: the model by id (key, base URL and model in one call), then the batch
//! list when the section's lane can be `batch`. OpenAI-compatible servers: the model list, which
//! must name the configured model. Failures are classified like the lanes' (`memsift_llm::fault`).

use memsift_core::config::{Config, LanePolicy, ProviderKind};
use memsift_llm::{
    AnthropicClient, Call, ClientOptions, LaneKey, LlmError, OpenAiClient, ProviderFault, ResolvedLlm, RetryPolicy,
};
use serde::Serialize;

/// What probing one section found.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ProbeReport {
    /// The `[llm.*]` section.
    pub section: String,
    /// Provider, model and base URL, as lanes name them.
    pub target: String,
    /// Whether every read answered as it should.
    pub reachable: bool,
    /// What was called and what it said, in order.
    pub checks: Vec<String>,
    /// Why not, with the likely fix.
    pub problem: Option<String>,
}

impl ProbeReport {
    /// One line for the terminal.
    pub fn line(&self) -> String {
        match &self.problem {
            None => format!(
                "llm.{}: {}: reachable ({})",
                self.section,
                self.target,
                self.checks.join(", ")
            ),
            Some(problem) => format!("llm.{}: {}: NOT reachable: {problem}", self.section, self.target),
        }
    }
}

/// Probes every section that names a provider, in key order. No retries: a probe reports what
/// the endpoint answers now.
pub async fn probe_all(config: &Config) -> anyhow::Result<Vec<ProbeReport>> {
    let mut reports = Vec::new();
    for (key, section) in &config.llm {
        if section.provider == ProviderKind::Heuristic {
            continue;
        }
        let llm = ResolvedLlm::resolve(key, section).map_err(|errors| {
            anyhow::anyhow!(
                "{}",
                errors.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ")
            )
        })?;
        let api_key = memsift_llm::load_api_key(key, section)?;
        let mut options = ClientOptions::new(section.endpoint.clone(), api_key, llm.model.clone());
        options.retry = RetryPolicy {
            max_retries: 0,
            ..RetryPolicy::default()
        };
        options.request_timeout = std::time::Duration::from_secs(30);
        let lane = if section.lane == LanePolicy::Immediate {
            memsift_core::status::Lane::Immediate
        } else {
            memsift_core::status::Lane::Batch
        };
        let target = LaneKey::of(lane, &llm);
        let mut report = ProbeReport {
            section: key.clone(),
            target: format!("{}/{} at {}", target.provider, target.model, target.endpoint),
            reachable: true,
            checks: Vec::new(),
            problem: None,
        };
        let outcome = probe_one(&llm, section.lane, options, &mut report.checks).await;
        if let Err(fault) = outcome {
            report.reachable = false;
            report.problem = Some(fault.to_string());
        }
        reports.push(report);
    }
    Ok(reports)
}

async fn probe_one(
    llm: &ResolvedLlm,
    lane: LanePolicy,
    options: ClientOptions,
    checks: &mut Vec<String>,
) -> Result<(), ProviderFault> {
    let fault = |error: LlmError| ProviderFault::classify(error, Call::List, llm);
    let batch_lane = lane != LanePolicy::Immediate;
    match llm.provider {
        ProviderKind::Anthropic => {
            let client = AnthropicClient::new(options).map_err(fault)?;
            client.retrieve_model(&llm.model).await.map_err(fault)?;
            checks.push(format!("model {} known", llm.model));
            if batch_lane {
                client.list_batches(None, 1).await.map_err(fault)?;
                checks.push("batch list answered".to_owned());
            }
        }
        ProviderKind::Openai => {
            let client = OpenAiClient::new(options).map_err(fault)?;
            client.retrieve_model(&llm.model).await.map_err(fault)?;
            checks.push(format!("model {} known", llm.model));
            if batch_lane {
                client.list_batches(None, 1).await.map_err(fault)?;
                checks.push("batch list answered".to_owned());
            }
        }
        ProviderKind::OpenaiCompatible => {
            let client = OpenAiClient::new(options).map_err(fault)?;
            let models = client.list_models().await.map_err(fault)?;
            if !models.contains(&llm.model) {
                return Err(fault(LlmError::NotFound {
                    provider: "openai",
                    detail: format!(
                        "model_not_found: model `{}` is not among the {} the server lists ({})",
                        llm.model,
                        models.len(),
                        models.join(", ")
                    )
                    .into(),
                }));
            }
            checks.push(format!("model {} listed", llm.model));
        }
        ProviderKind::Heuristic => {}
    }
    Ok(())
}
