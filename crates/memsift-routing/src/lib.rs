//! Execution strategies and tier-aware routing between the batch, immediate and heuristic lanes.
//!
//! The [`Router`] turns `(purpose, tier, urgency, now)` into a [`Route`] on every call: the lane is
//! never chosen once at start-up, so a provider that goes down moves `auto` work to the immediate
//! lane within one call, and comes back through a single half-open probe. Strategies execute one
//! request with the resolved config they are handed; they never read configuration or the store,
//! and return an [`ExecutionOutcome`] for the caller to record.

#![deny(missing_docs)]

mod billing;
mod error;
mod immediate;
mod router;
mod strategy;
mod tier_aware;

pub use billing::{BillingBackend, ColumnBilling};
pub use error::RoutingError;
pub use immediate::ImmediateStrategy;
pub use memsift_llm::{BreakerPolicy, BreakerState, FaultClass, HealthBoard, HealthSignal, LaneKey, Permit};
pub use router::{HEURISTIC_MODEL, Route, Router, has_batch_api};
pub use strategy::{BatchStrategy, ExecutionOutcome, ExecutionRequest, ExecutionStrategy, HeuristicStrategy};
pub use tier_aware::{RoutedOutcome, TierAwareRequest, TierAwareStrategy};
