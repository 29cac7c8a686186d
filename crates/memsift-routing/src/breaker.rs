//! A circuit breaker per provider kind, fed by call outcomes, read by `auto` lane choice.
//!
//! Only signs that the provider itself is unwell count (connection errors, 5xx, 529); a 429 or a
//! bad request says nothing about its health. Time is always passed in, so tests never sleep.

use chrono::{DateTime, Duration, Utc};

/// What a call said about its provider's health.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum HealthSignal {
    /// The provider answered.
    Success,
    /// No usable connection: refused, reset, timed out.
    ConnectionError,
    /// A 5xx.
    ServerError,
    /// A 529 (or OpenAI's 503): overloaded as a whole.
    Overloaded,
    /// Anything that is not about the provider's health (4xx, 429, our own bugs).
    Other,
}

impl HealthSignal {
    /// Whether this counts towards opening the breaker.
    pub fn is_failure(self) -> bool {
        matches!(
            self,
            HealthSignal::ConnectionError | HealthSignal::ServerError | HealthSignal::Overloaded
        )
    }
}

/// When the breaker opens and for how long.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BreakerPolicy {
    /// Consecutive failures that open the breaker.
    pub failure_threshold: u32,
    /// How long it stays open before one probe is let through; also how long an unanswered probe
    /// blocks the next one.
    pub cool_down: Duration,
}

impl Default for BreakerPolicy {
    fn default() -> Self {
        Self {
            failure_threshold: 5,
            cool_down: Duration::seconds(60),
        }
    }
}

/// The state of one provider's breaker, as [`crate::Router::breaker_state`] reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BreakerState {
    /// Healthy; counting consecutive failures.
    Closed {
        /// Failures since the last success.
        consecutive_failures: u32,
    },
    /// Unhealthy until `until`.
    Open {
        /// When one probe will be allowed.
        until: DateTime<Utc>,
    },
    /// The cool-down is over; one probe may go (or has gone, at `probe_at`).
    HalfOpen {
        /// When the probe was handed out, if it was.
        probe_at: Option<DateTime<Utc>>,
    },
}

#[derive(Debug)]
pub(crate) struct Breaker {
    state: BreakerState,
}

impl Default for Breaker {
    fn default() -> Self {
        Self {
            state: BreakerState::Closed {
                consecutive_failures: 0,
            },
        }
    }
}

impl Breaker {
    /// The state at `now`: an open breaker whose cool-down is over is half-open, and a probe that
    /// never reported back within a cool-down is forgotten so the breaker cannot stick half-open.
    pub(crate) fn state(&mut self, policy: &BreakerPolicy, now: DateTime<Utc>) -> BreakerState {
        match self.state {
            BreakerState::Open { until } if now >= until => {
                self.state = BreakerState::HalfOpen { probe_at: None };
            }
            BreakerState::HalfOpen { probe_at: Some(at) } if now >= at + policy.cool_down => {
                self.state = BreakerState::HalfOpen { probe_at: None };
            }
            _ => {}
        }
        self.state
    }

    /// Whether a batch call may go now; hands out the half-open probe at most once.
    pub(crate) fn allow_batch(&mut self, policy: &BreakerPolicy, now: DateTime<Utc>) -> bool {
        match self.state(policy, now) {
            BreakerState::Closed { .. } => true,
            BreakerState::Open { .. } | BreakerState::HalfOpen { probe_at: Some(_) } => false,
            BreakerState::HalfOpen { probe_at: None } => {
                self.state = BreakerState::HalfOpen { probe_at: Some(now) };
                true
            }
        }
    }

    pub(crate) fn record(&mut self, policy: &BreakerPolicy, signal: HealthSignal, now: DateTime<Utc>) {
        let state = self.state(policy, now);
        self.state = match (signal, state) {
            // Any answer proves the provider works, whichever lane it came from.
            (HealthSignal::Success, _) => BreakerState::Closed {
                consecutive_failures: 0,
            },
            (HealthSignal::Other, state) => state,
            (_, BreakerState::Closed { consecutive_failures }) => {
                let failures = consecutive_failures + 1;
                if failures >= policy.failure_threshold {
                    BreakerState::Open {
                        until: now + policy.cool_down,
                    }
                } else {
                    BreakerState::Closed {
                        consecutive_failures: failures,
                    }
                }
            }
            // A failed probe, or more failures while open: the provider is still unwell.
            (_, BreakerState::HalfOpen { .. }) => BreakerState::Open {
                until: now + policy.cool_down,
            },
            (_, BreakerState::Open { until }) => BreakerState::Open {
                until: until.max(now + policy.cool_down),
            },
        };
    }
}
