//! Lane choice per call: which `{purpose}_{tier}` config answers, and through which lane.

use std::collections::BTreeMap;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use memsift_core::config::{Config, LanePolicy, ProviderKind};
use memsift_core::status::{Lane, Purpose};
use memsift_llm::{BreakerPolicy, BreakerState, HealthBoard, HealthSignal, LaneKey, ResolvedLlm};

use crate::billing::BillingBackend;
use crate::error::RoutingError;

/// Where one call goes.
#[derive(Clone, Debug, PartialEq)]
pub struct Route {
    /// The lane.
    pub lane: Lane,
    /// The `{purpose}_{tier}` key that answered.
    pub config_key: String,
    /// Its resolved config, handed to the strategy.
    pub llm: ResolvedLlm,
}

/// What `model` says on a request or memory made by memsift's own rules rather than a model.
pub const HEURISTIC_MODEL: &str = "heuristic";

impl Route {
    /// The model to record on the requests this route makes and the memories they write: the
    /// configured model, or [`HEURISTIC_MODEL`] on the offline lane, so every row says what made it.
    pub fn recorded_model(&self) -> Option<String> {
        match self.llm.provider {
            ProviderKind::Heuristic => Some(HEURISTIC_MODEL.to_owned()),
            _ => Some(self.llm.model.clone()).filter(|model| !model.is_empty()),
        }
    }
}

/// Whether a provider kind has a batch API at all.
pub fn has_batch_api(provider: ProviderKind) -> bool {
    matches!(provider, ProviderKind::Anthropic | ProviderKind::Openai)
}

/// Chooses lanes. Cheap to share behind an `Arc`; its only mutable state is the health board.
pub struct Router {
    tiers: Vec<String>,
    resolved: BTreeMap<String, ResolvedLlm>,
    /// Each section's providers in the order they are tried: itself, then its fallbacks.
    chains: BTreeMap<String, Vec<String>>,
    billing: Arc<dyn BillingBackend>,
    health: Arc<HealthBoard>,
}

impl std::fmt::Debug for Router {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Router")
            .field("tiers", &self.tiers)
            .field("chains", &self.chains)
            .field("policy", &self.health.policy())
            .finish_non_exhaustive()
    }
}

impl Router {
    /// Checks that every `{purpose}_{tier}` reachable from `billing.tiers` exists (invariant 15)
    /// and that every `[llm.*]` section is valid, then resolves them all.
    pub fn new(config: &Config, billing: Arc<dyn BillingBackend>) -> Result<Router, RoutingError> {
        for tier in &config.billing.tiers {
            for purpose in config.reachable_purposes() {
                config.llm_for(purpose, tier)?;
            }
        }
        let mut resolved = BTreeMap::new();
        let mut problems = Vec::new();
        for (key, llm) in &config.llm {
            match ResolvedLlm::resolve(key, llm) {
                Ok(llm) => {
                    resolved.insert(key.clone(), llm);
                }
                Err(errors) => problems.extend(errors.iter().map(ToString::to_string)),
            }
        }
        if !problems.is_empty() {
            return Err(RoutingError::InvalidLlm { problems });
        }
        let (cool_down, max_cool_down) = config.breaker_cool_downs();
        let policy = BreakerPolicy {
            failure_threshold: config.health.failure_threshold,
            cool_down,
            max_cool_down,
        };
        Ok(Router {
            tiers: config.billing.tiers.clone(),
            chains: config
                .llm
                .keys()
                .map(|key| (key.clone(), config.provider_chain(key)))
                .collect(),
            resolved,
            billing,
            health: Arc::new(HealthBoard::new(policy)),
        })
    }

    /// The same router with another breaker policy (and a fresh board).
    pub fn with_breaker_policy(mut self, policy: BreakerPolicy) -> Router {
        self.health = Arc::new(HealthBoard::new(policy));
        self
    }

    /// The health board every lane feeds and reads.
    pub fn health(&self) -> Arc<HealthBoard> {
        Arc::clone(&self.health)
    }

    /// The tier of a user, from the billing backend.
    pub fn tier_of(&self, user_tier_column: Option<&str>) -> String {
        self.billing.tier_of(user_tier_column)
    }

    /// Where a call for `purpose` by a user on `tier` goes at `now`. Decided afresh on every call.
    ///
    /// The route's providers (the `{purpose}_{tier}` section, then its `fallback` sections) are
    /// tried in order, and the first whose lane is usable answers: `heuristic` providers take the
    /// heuristic lane; `batch` and `immediate` policies take their lane while its breaker is closed
    /// or waiting for a probe; `auto` takes the batch lane when the provider has a batch API, its
    /// batch lane is usable and the work is not urgent, else the immediate lane if that is usable.
    /// When no provider is usable the first one answers as its policy says, and the lane decides
    /// at call time whether to wait (a setting fault) or spend the attempt (an outage).
    /// Routing never spends the half-open probe: the call itself takes it ([`HealthBoard::acquire`]).
    pub fn route(&self, purpose: Purpose, tier: &str, urgent: bool, now: DateTime<Utc>) -> Result<Route, RoutingError> {
        if !self.tiers.iter().any(|known| known == tier) {
            return Err(RoutingError::UnknownTier {
                tier: tier.to_owned(),
                tiers: self.tiers.clone(),
            });
        }
        let key = format!("{}_{}", purpose.as_str(), tier);
        let head = self.resolved.get(&key).ok_or_else(|| {
            RoutingError::Config(memsift_core::config::ConfigError::MissingLlmKey {
                key: key.clone(),
                tier: tier.to_owned(),
                purpose: purpose.as_str().to_owned(),
            })
        })?;
        let usable = |lane: Lane, llm: &ResolvedLlm| self.health.usable(&LaneKey::of(lane, llm), now);
        let chosen = self.chains.get(&key).into_iter().flatten().find_map(|candidate| {
            let llm = self.resolved.get(candidate)?;
            let lane = match (llm.provider, llm.lane) {
                (ProviderKind::Heuristic, _) => Some(Lane::Heuristic),
                (_, LanePolicy::Batch) => usable(Lane::Batch, llm).then_some(Lane::Batch),
                (_, LanePolicy::Immediate) => usable(Lane::Immediate, llm).then_some(Lane::Immediate),
                (provider, LanePolicy::Auto) => {
                    if has_batch_api(provider) && !urgent && usable(Lane::Batch, llm) {
                        Some(Lane::Batch)
                    } else {
                        usable(Lane::Immediate, llm).then_some(Lane::Immediate)
                    }
                }
            }?;
            Some((lane, llm))
        });
        let (lane, llm) = chosen.unwrap_or_else(|| {
            let lane = match (head.provider, head.lane) {
                (ProviderKind::Heuristic, _) => Lane::Heuristic,
                (_, LanePolicy::Batch) => Lane::Batch,
                (_, LanePolicy::Immediate) => Lane::Immediate,
                (provider, LanePolicy::Auto) if has_batch_api(provider) && !urgent => Lane::Batch,
                (_, LanePolicy::Auto) => Lane::Immediate,
            };
            (lane, head)
        });
        tracing::debug!(key = %key, answered_by = %llm.key, lane = lane.as_str(), urgent, "routed");
        Ok(Route {
            lane,
            config_key: llm.key.clone(),
            llm: llm.clone(),
        })
    }

    /// The resolved section `key`, if the configuration has it.
    pub fn resolved(&self, key: &str) -> Option<&ResolvedLlm> {
        self.resolved.get(key)
    }

    /// The sections whose `lane` is the provider lane `lane_key` (one provider, model and base URL
    /// may serve several purposes and tiers).
    pub fn sections_on(&self, lane_key: &LaneKey) -> Vec<String> {
        self.resolved
            .values()
            .filter(|llm| llm.provider != ProviderKind::Heuristic && LaneKey::of(lane_key.lane, llm) == *lane_key)
            .map(|llm| llm.key.clone())
            .collect()
    }

    /// Feeds one call's outcome to the breaker of provider lane `lane_key`.
    pub fn record_outcome(&self, lane_key: &LaneKey, signal: &HealthSignal, now: DateTime<Utc>) {
        self.health.record(lane_key, signal, now);
    }

    /// The breaker of provider lane `lane_key` at `now`, for status output and tests.
    pub fn breaker_state(&self, lane_key: &LaneKey, now: DateTime<Utc>) -> BreakerState {
        self.health.state(lane_key, now)
    }
}
