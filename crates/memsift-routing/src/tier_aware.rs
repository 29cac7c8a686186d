//! The strategy the pipeline calls: route per call, then delegate to the lane's strategy.

use std::sync::Arc;

use async_trait::async_trait;
use memsift_core::RequestId;
use memsift_core::clock::Clock;
use memsift_core::contract::Turn;
use memsift_core::status::{Lane, Purpose};

use crate::error::RoutingError;
use crate::immediate::ImmediateStrategy;
use crate::router::{Route, Router};
use crate::strategy::{BatchStrategy, ExecutionOutcome, ExecutionRequest, ExecutionStrategy, HeuristicStrategy};
use memsift_llm::{FaultClass, LaneKey};

/// One request before routing: the tier and urgency decide the lane.
#[derive(Clone, Copy, Debug)]
pub struct TierAwareRequest<'a> {
    /// Our id for the attempt.
    pub request_id: RequestId,
    /// What it is for.
    pub purpose: Purpose,
    /// The user's billing tier.
    pub tier: &'a str,
    /// Whether the answer is needed now (forces the immediate lane under `auto`).
    pub urgent: bool,
    /// The system prompt.
    pub system_prompt: &'a str,
    /// The user message.
    pub user_message: &'a str,
    /// The turns the message shows.
    pub turns: &'a [Turn],
}

/// Where a request went and what came of it.
#[derive(Clone, Debug, PartialEq)]
pub struct RoutedOutcome {
    /// The lane and config chosen.
    pub route: Route,
    /// The strategy's outcome.
    pub outcome: ExecutionOutcome,
}

/// Routes each call with [`Router::route`] and hands it, with the resolved config, to the
/// heuristic, batch or immediate strategy.
///
/// Immediate outcomes are fed back to the router's breaker here, since this is where they are
/// seen first; batch outcomes arrive later through the coordinator, which calls
/// [`Router::record_outcome`] itself.
pub struct TierAwareStrategy {
    router: Arc<Router>,
    heuristic: HeuristicStrategy,
    batch: BatchStrategy,
    immediate: ImmediateStrategy,
    clock: Arc<dyn Clock>,
}

impl TierAwareStrategy {
    /// A strategy over `router`, using `immediate` for the immediate lane and `clock` for breaker time.
    pub fn new(router: Arc<Router>, immediate: ImmediateStrategy, clock: Arc<dyn Clock>) -> TierAwareStrategy {
        TierAwareStrategy {
            router,
            heuristic: HeuristicStrategy,
            batch: BatchStrategy,
            immediate,
            clock,
        }
    }

    /// Routes and executes one request.
    pub async fn execute_routed(&self, request: &TierAwareRequest<'_>) -> Result<RoutedOutcome, RoutingError> {
        let route = self
            .router
            .route(request.purpose, request.tier, request.urgent, self.clock.now())?;
        let execution = ExecutionRequest {
            request_id: request.request_id,
            purpose: request.purpose,
            system_prompt: request.system_prompt,
            user_message: request.user_message,
            turns: request.turns,
            llm: &route.llm,
        };
        let outcome = match route.lane {
            Lane::Heuristic => self.heuristic.execute(&execution).await,
            Lane::Batch => self.batch.execute(&execution).await,
            Lane::Immediate => {
                let outcome = self.immediate.execute(&execution).await;
                if let Some(signal) = outcome.health_signal() {
                    self.router
                        .record_outcome(&LaneKey::of(Lane::Immediate, &route.llm), &signal, self.clock.now());
                }
                outcome
            }
        };
        Ok(RoutedOutcome { route, outcome })
    }
}

/// As a plain strategy: the tier is read back from the request's `{purpose}_{tier}` key and the
/// work is taken as not urgent. Callers that know urgency use [`TierAwareStrategy::execute_routed`].
#[async_trait]
impl ExecutionStrategy for TierAwareStrategy {
    async fn execute(&self, request: &ExecutionRequest<'_>) -> ExecutionOutcome {
        let prefix = format!("{}_", request.purpose.as_str());
        let Some(tier) = request.llm.key.strip_prefix(&prefix) else {
            return ExecutionOutcome::Failed {
                error: format!(
                    "config key `{}` does not start with `{prefix}`; pass the {{purpose}}_{{tier}} config of this purpose",
                    request.llm.key
                ),
                class: FaultClass::Request,
                fix: None,
            };
        };
        let routed = TierAwareRequest {
            request_id: request.request_id,
            purpose: request.purpose,
            tier,
            urgent: false,
            system_prompt: request.system_prompt,
            user_message: request.user_message,
            turns: request.turns,
        };
        match self.execute_routed(&routed).await {
            Ok(routed) => routed.outcome,
            Err(error) => ExecutionOutcome::Failed {
                error: error.to_string(),
                class: FaultClass::Request,
                fix: None,
            },
        }
    }
}
