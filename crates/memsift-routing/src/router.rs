//! Lane choice per call: which `{purpose}_{tier}` config answers, and through which lane.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};

use chrono::{DateTime, Utc};
use memsift_core::config::{Config, LanePolicy, ProviderKind};
use memsift_core::status::{Lane, Purpose};
use memsift_llm::ResolvedLlm;

use crate::billing::BillingBackend;
use crate::breaker::{Breaker, BreakerPolicy, BreakerState, HealthSignal};
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

/// Whether a provider kind has a batch API at all.
pub fn has_batch_api(provider: ProviderKind) -> bool {
    matches!(provider, ProviderKind::Anthropic | ProviderKind::Openai)
}

/// The snake_case name of a provider kind, as configuration spells it.
pub(crate) fn provider_name(provider: ProviderKind) -> &'static str {
    provider.as_str()
}

/// Chooses lanes. Cheap to share behind an `Arc`; its only mutable state is the breakers.
pub struct Router {
    tiers: Vec<String>,
    resolved: BTreeMap<String, ResolvedLlm>,
    billing: Arc<dyn BillingBackend>,
    policy: BreakerPolicy,
    // A std mutex: it is held for a few comparisons, never across an `.await`.
    // Keyed by provider name: `ProviderKind` is not `Hash`.
    breakers: Mutex<HashMap<&'static str, Breaker>>,
}

impl std::fmt::Debug for Router {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Router")
            .field("tiers", &self.tiers)
            .field("keys", &self.resolved.keys().collect::<Vec<_>>())
            .field("policy", &self.policy)
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
        Ok(Router {
            tiers: config.billing.tiers.clone(),
            resolved,
            billing,
            policy: BreakerPolicy::default(),
            breakers: Mutex::new(HashMap::new()),
        })
    }

    /// The same router with another breaker policy.
    pub fn with_breaker_policy(mut self, policy: BreakerPolicy) -> Router {
        self.policy = policy;
        self
    }

    /// The tier of a user, from the billing backend.
    pub fn tier_of(&self, user_tier_column: Option<&str>) -> String {
        self.billing.tier_of(user_tier_column)
    }

    /// Where a call for `purpose` by a user on `tier` goes at `now`. Decided afresh on every call.
    ///
    /// `heuristic` providers take the heuristic lane; `batch` and `immediate` policies are obeyed
    /// as written — `batch` even while the provider's breaker is open, because the operator asked
    /// for it and the batch coordinator backs off on its own; `auto` takes the batch lane only when
    /// the provider has a batch API, its breaker lets a batch call through and the work is not
    /// urgent. A half-open breaker lets exactly one such call through as its probe.
    pub fn route(&self, purpose: Purpose, tier: &str, urgent: bool, now: DateTime<Utc>) -> Result<Route, RoutingError> {
        if !self.tiers.iter().any(|known| known == tier) {
            return Err(RoutingError::UnknownTier {
                tier: tier.to_owned(),
                tiers: self.tiers.clone(),
            });
        }
        let key = format!("{}_{}", purpose.as_str(), tier);
        let llm = self.resolved.get(&key).ok_or_else(|| {
            RoutingError::Config(memsift_core::config::ConfigError::MissingLlmKey {
                key: key.clone(),
                tier: tier.to_owned(),
                purpose: purpose.as_str().to_owned(),
            })
        })?;
        let lane = match (llm.provider, llm.lane) {
            (ProviderKind::Heuristic, _) => Lane::Heuristic,
            (_, LanePolicy::Batch) => Lane::Batch,
            (_, LanePolicy::Immediate) => Lane::Immediate,
            (provider, LanePolicy::Auto) => {
                // The probe is only spent on a call that would otherwise have gone to batch.
                if has_batch_api(provider)
                    && !urgent
                    && self
                        .breakers()
                        .entry(provider_name(provider))
                        .or_default()
                        .allow_batch(&self.policy, now)
                {
                    Lane::Batch
                } else {
                    Lane::Immediate
                }
            }
        };
        tracing::debug!(key = %key, lane = lane.as_str(), urgent, "routed");
        Ok(Route {
            lane,
            config_key: key,
            llm: llm.clone(),
        })
    }

    /// Feeds one call's outcome to `provider`'s breaker.
    pub fn record_outcome(&self, provider: ProviderKind, outcome: HealthSignal, now: DateTime<Utc>) {
        self.breakers()
            .entry(provider_name(provider))
            .or_default()
            .record(&self.policy, outcome, now);
    }

    /// `provider`'s breaker at `now`, for status output and tests.
    pub fn breaker_state(&self, provider: ProviderKind, now: DateTime<Utc>) -> BreakerState {
        self.breakers()
            .entry(provider_name(provider))
            .or_default()
            .state(&self.policy, now)
    }

    fn breakers(&self) -> MutexGuard<'_, HashMap<&'static str, Breaker>> {
        self.breakers
            .lock()
            .expect("breaker mutex is never poisoned: nothing panics while holding it")
    }
}
