//! The strategy contract and the two strategies that need no network.

use async_trait::async_trait;
use memsift_core::RequestId;
use memsift_core::contract::Turn;
use memsift_core::status::Purpose;
use memsift_llm::{FaultClass, ProviderFault, ResolvedLlm, TokenUsage};

/// One request, with the config that answers it already resolved.
#[derive(Clone, Copy, Debug)]
pub struct ExecutionRequest<'a> {
    /// Our id for the attempt (the provider `custom_id`).
    pub request_id: RequestId,
    /// What it is for.
    pub purpose: Purpose,
    /// The system prompt, identical across requests so providers cache it.
    pub system_prompt: &'a str,
    /// The user message: escaped turns for extraction, a compact JSON task for post-processing.
    pub user_message: &'a str,
    /// The turns the message shows, for lanes that read turns rather than text.
    pub turns: &'a [Turn],
    /// The resolved `{purpose}_{tier}` config.
    pub llm: &'a ResolvedLlm,
}

/// What executing a request came to. The caller records it; strategies touch no store.
#[derive(Clone, Debug, PartialEq)]
pub enum ExecutionOutcome {
    /// The batch lane: the request waits for the batch coordinator to submit it.
    Deferred,
    /// An answer.
    Completed {
        /// The model's text, unparsed.
        raw_output: String,
        /// Why the model stopped (`end_turn`, `max_tokens`, `stop`, `length`, …), when known.
        stop_reason: Option<String>,
        /// Tokens used.
        usage: TokenUsage,
        /// What it cost in USD at full (non-batch) price; 0 when the model is not in the price table.
        cost_usd: f64,
        /// The model that answered.
        model: String,
    },
    /// No answer.
    Failed {
        /// What happened and what to do, one line, never containing a key.
        error: String,
        /// What the failure asks of the caller: pause the lane, spend the attempt, or try again.
        class: FaultClass,
        /// The likely fix of a setting fault.
        fix: Option<String>,
    },
}

impl ExecutionOutcome {
    /// The outcome of a classified provider failure.
    pub fn failed(fault: &ProviderFault) -> ExecutionOutcome {
        ExecutionOutcome::Failed {
            error: fault.error.to_string(),
            class: fault.class,
            fix: fault.fix.clone(),
        }
    }

    /// What this outcome says about the health of the lane that produced it (none for `Deferred`).
    pub fn health_signal(&self) -> Option<memsift_llm::HealthSignal> {
        use memsift_llm::HealthSignal;
        match self {
            ExecutionOutcome::Deferred => None,
            ExecutionOutcome::Completed { .. } => Some(HealthSignal::Success),
            ExecutionOutcome::Failed { error, class, fix } => Some(match class {
                FaultClass::Setting => HealthSignal::Setting {
                    reason: error.clone(),
                    fix: fix.clone(),
                },
                // An executed call fails only after the client's own retries (each honouring
                // `retry-after`): a throttle that outlasted them is the lane's trouble like an
                // outage, and only the breaker can end the wait if it never lets up.
                FaultClass::Outage | FaultClass::Retry => HealthSignal::Outage(error.clone()),
                FaultClass::Request => HealthSignal::Neutral,
            }),
        }
    }
}

/// Executes one request through one lane.
#[async_trait]
pub trait ExecutionStrategy: Send + Sync {
    /// Runs `request` and reports what happened.
    async fn execute(&self, request: &ExecutionRequest<'_>) -> ExecutionOutcome;
}

/// The offline lane: `memsift_heuristic` rules over the turns; no spend.
#[derive(Clone, Copy, Debug, Default)]
pub struct HeuristicStrategy;

impl HeuristicStrategy {
    /// The answer, computed on the calling thread. The rules read every turn, so on an async
    /// runtime call this from a blocking thread when the turns may be long (the pipeline does).
    pub fn answer(&self, request: &ExecutionRequest<'_>) -> ExecutionOutcome {
        // Post-processing requests carry their task in the user message; the offline judge
        // answers those, the extraction rules answer the rest.
        if request.purpose != memsift_core::status::Purpose::Extraction {
            return match memsift_postprocess::offline::offline_answer(request.user_message) {
                Some(raw_output) => ExecutionOutcome::Completed {
                    raw_output,
                    stop_reason: None,
                    usage: TokenUsage::default(),
                    cost_usd: 0.0,
                    model: memsift_postprocess::offline::OFFLINE_VERSION.to_owned(),
                },
                None => ExecutionOutcome::Failed {
                    error: format!(
                        "the offline judge cannot read this {} request (no `task` in its message); re-plan it",
                        request.purpose
                    ),
                    class: FaultClass::Request,
                    fix: None,
                },
            };
        }
        ExecutionOutcome::Completed {
            raw_output: memsift_heuristic::extract_json(request.turns),
            stop_reason: None,
            usage: TokenUsage::default(),
            cost_usd: 0.0,
            model: memsift_heuristic::RULES_VERSION.to_owned(),
        }
    }
}

#[async_trait]
impl ExecutionStrategy for HeuristicStrategy {
    async fn execute(&self, request: &ExecutionRequest<'_>) -> ExecutionOutcome {
        self.answer(request)
    }
}

/// The batch lane as a strategy: nothing happens now; the coordinator submits the request.
#[derive(Clone, Copy, Debug, Default)]
pub struct BatchStrategy;

#[async_trait]
impl ExecutionStrategy for BatchStrategy {
    async fn execute(&self, _request: &ExecutionRequest<'_>) -> ExecutionOutcome {
        ExecutionOutcome::Deferred
    }
}
