//! Routing errors, each one line that says what to change.

use memsift_core::config::ConfigError;

/// Why a router could not be built or a call could not be routed.
#[derive(Debug, thiserror::Error)]
pub enum RoutingError {
    /// A reachable `{purpose}_{tier}` key has no section (invariant 15), or another config problem.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// One or more `[llm.*]` sections are invalid; every problem is listed on the one line.
    #[error("{}", .problems.join("; "))]
    InvalidLlm {
        /// One sentence per problem, each naming the key and the fix.
        problems: Vec<String>,
    },
    /// A user's tier is not one the configuration knows.
    #[error(
        "billing tier `{tier}` is not in billing.tiers {tiers:?}; add it (with its [llm.*] sections) or fix the user's billing_tier"
    )]
    UnknownTier {
        /// The tier asked for.
        tier: String,
        /// The configured tiers.
        tiers: Vec<String>,
    },
    /// An API key named by the configuration could not be read.
    #[error("{0}")]
    Key(String),
}
