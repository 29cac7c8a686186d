//! Provider health: one circuit breaker per provider lane, fed by every call any lane makes.
//!
//! A provider lane is the batch API or the immediate calls of one provider, model and base URL
//! ([`LaneKey`]). Outages (no connection, 5xx, overloaded) open its breaker after a threshold; a
//! setting fault opens it at once and marks it as waiting for an operator. An open breaker lets one
//! probe call through after a cool-down that doubles with every failed probe, so a daemon keeps
//! probing with backoff and resumes by itself. Time is always passed in, so tests never sleep.
//!
//! The board is process-local and cheap (a mutex held for a few comparisons); every change of
//! state is also queued as a [`Transition`] for the caller to persist and log, which is how other
//! processes (`memsift batches`, `/metrics`) see it.

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard};

use chrono::{DateTime, Duration, Utc};
use memsift_core::config::ProviderKind;
use memsift_core::status::Lane;
use serde::Serialize;

use crate::fault::{FaultClass, ProviderFault};
use crate::params::ResolvedLlm;

/// One provider lane: the batch API or the immediate calls of one provider, model and base URL.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct LaneKey {
    /// `batch` or `immediate`.
    pub lane: Lane,
    /// `anthropic`, `openai`, `openai_compatible`.
    pub provider: String,
    /// The model.
    pub model: String,
    /// The base URL (the provider's public one when the config names none).
    pub endpoint: String,
}

impl Ord for LaneKey {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        let fields = |key: &LaneKey| {
            (
                key.provider.clone(),
                key.model.clone(),
                key.endpoint.clone(),
                key.lane.as_str(),
            )
        };
        fields(self).cmp(&fields(other))
    }
}

impl PartialOrd for LaneKey {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl LaneKey {
    /// The lane `lane` of `llm`'s provider, model and base URL.
    pub fn of(lane: Lane, llm: &ResolvedLlm) -> LaneKey {
        let (provider, public) = match llm.provider {
            ProviderKind::Anthropic => ("anthropic", crate::anthropic::ANTHROPIC_BASE_URL),
            ProviderKind::Openai => ("openai", crate::openai::OPENAI_BASE_URL),
            ProviderKind::OpenaiCompatible => ("openai_compatible", ""),
            ProviderKind::Heuristic => ("heuristic", ""),
        };
        LaneKey {
            lane,
            provider: provider.to_owned(),
            model: llm.model.clone(),
            endpoint: llm
                .endpoint
                .as_deref()
                .unwrap_or(public)
                .trim_end_matches('/')
                .to_owned(),
        }
    }

    /// `batch anthropic/claude-haiku-4-5 at https://…`: how logs and tables name it.
    pub fn name(&self) -> String {
        format!("{} {}/{} at {}", self.lane, self.provider, self.model, self.endpoint)
    }
}

/// What a call said about its lane's health.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HealthSignal {
    /// The provider answered as it should.
    Success,
    /// An outage: counts towards opening the breaker.
    Outage(String),
    /// A setting fault: opens the breaker at once until a probe succeeds.
    Setting {
        /// What the provider said.
        reason: String,
        /// The likely fix.
        fix: Option<String>,
    },
    /// An outage that opens the breaker at once: a failed batch create, where every request of
    /// the batch waits on the lane, so the route decides at the first failure.
    Trip(String),
    /// Nothing about health (429, one bad request).
    Neutral,
}

impl HealthSignal {
    /// What a classified failure says.
    pub fn of_fault(fault: &ProviderFault) -> HealthSignal {
        match fault.class {
            FaultClass::Setting => HealthSignal::Setting {
                reason: fault.error.to_string(),
                fix: fault.fix.clone(),
            },
            FaultClass::Outage => HealthSignal::Outage(fault.error.to_string()),
            FaultClass::Retry | FaultClass::Request => HealthSignal::Neutral,
        }
    }
}

/// When breakers open and how long they wait.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BreakerPolicy {
    /// Consecutive outages that open the breaker.
    pub failure_threshold: u32,
    /// How long it stays open before one probe is let through; also how long an unanswered probe
    /// blocks the next one.
    pub cool_down: Duration,
    /// Each failed probe doubles the cool-down, up to this.
    pub max_cool_down: Duration,
}

impl Default for BreakerPolicy {
    fn default() -> Self {
        Self {
            failure_threshold: 5,
            cool_down: Duration::seconds(60),
            max_cool_down: Duration::seconds(1800),
        }
    }
}

/// Why a breaker is open.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct OpenCause {
    /// Opened by a setting fault (waits for an operator or a successful probe; spends nothing).
    pub setting_fault: bool,
    /// The last failure.
    pub reason: String,
    /// The likely fix, for setting faults.
    pub fix: Option<String>,
    /// When it opened (the first time in this spell).
    pub opened_at: DateTime<Utc>,
    /// The current wait between probes.
    pub cool_down: Duration,
}

impl OpenCause {
    /// `reason; likely fix: …`.
    pub fn describe(&self) -> String {
        match &self.fix {
            Some(fix) => format!("{}; likely fix: {fix}", self.reason),
            None => self.reason.clone(),
        }
    }
}

/// The state of one lane's breaker.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BreakerState {
    /// Healthy; counting consecutive outages.
    Closed {
        /// Outages since the last success.
        consecutive_failures: u32,
    },
    /// Unhealthy until `until`.
    Open {
        /// When one probe will be allowed.
        until: DateTime<Utc>,
        /// Why.
        cause: OpenCause,
    },
    /// The cool-down is over; one probe may go (or has gone, at `probe_at`).
    HalfOpen {
        /// When the probe was handed out, if it was.
        probe_at: Option<DateTime<Utc>>,
        /// Why it opened.
        cause: OpenCause,
    },
}

impl BreakerState {
    /// `closed`, `open` or `half_open`.
    pub fn name(&self) -> &'static str {
        match self {
            BreakerState::Closed { .. } => "closed",
            BreakerState::Open { .. } => "open",
            BreakerState::HalfOpen { .. } => "half_open",
        }
    }

    /// Why it is not closed.
    pub fn cause(&self) -> Option<&OpenCause> {
        match self {
            BreakerState::Closed { .. } => None,
            BreakerState::Open { cause, .. } | BreakerState::HalfOpen { cause, .. } => Some(cause),
        }
    }
}

/// Whether a call may go now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Permit {
    /// Closed: go.
    Go,
    /// Half-open: this call is the one probe.
    Probe,
    /// Open, or the probe is out: not now.
    Blocked(OpenCause),
}

/// One change of a breaker's state, for the store and the log.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Transition {
    /// Which lane.
    pub key: LaneKey,
    /// When.
    pub at: DateTime<Utc>,
    /// The state before.
    pub from: &'static str,
    /// The state after.
    pub to: &'static str,
    /// Why it is not closed (absent once closed).
    pub cause: Option<OpenCause>,
    /// When the next probe may go (open only).
    pub next_probe_at: Option<DateTime<Utc>>,
}

#[derive(Debug)]
struct Breaker {
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
    fn state(&mut self, now: DateTime<Utc>) -> BreakerState {
        match &self.state {
            BreakerState::Open { until, cause } if now >= *until => {
                self.state = BreakerState::HalfOpen {
                    probe_at: None,
                    cause: cause.clone(),
                };
            }
            BreakerState::HalfOpen {
                probe_at: Some(at),
                cause,
            } if now >= *at + cause.cool_down => {
                self.state = BreakerState::HalfOpen {
                    probe_at: None,
                    cause: cause.clone(),
                };
            }
            _ => {}
        }
        self.state.clone()
    }

    fn acquire(&mut self, now: DateTime<Utc>) -> Permit {
        match self.state(now) {
            BreakerState::Closed { .. } => Permit::Go,
            BreakerState::Open { cause, .. }
            | BreakerState::HalfOpen {
                probe_at: Some(_),
                cause,
            } => Permit::Blocked(cause),
            BreakerState::HalfOpen { probe_at: None, cause } => {
                self.state = BreakerState::HalfOpen {
                    probe_at: Some(now),
                    cause,
                };
                Permit::Probe
            }
        }
    }

    fn record(&mut self, policy: &BreakerPolicy, signal: &HealthSignal, now: DateTime<Utc>) {
        let state = self.state(now);
        let open = |cause: OpenCause| BreakerState::Open {
            until: now + cause.cool_down,
            cause,
        };
        let fresh_cause = |setting_fault: bool, reason: &str, fix: &Option<String>| OpenCause {
            setting_fault,
            reason: reason.to_owned(),
            fix: fix.clone(),
            opened_at: now,
            cool_down: policy.cool_down,
        };
        // A failed probe (or more failures while open) keeps the spell, doubling the wait.
        let reopened = |previous: &OpenCause, setting_fault: bool, reason: &str, fix: &Option<String>| OpenCause {
            setting_fault,
            reason: reason.to_owned(),
            fix: fix.clone(),
            opened_at: previous.opened_at,
            cool_down: (previous.cool_down * 2).min(policy.max_cool_down),
        };
        if let (HealthSignal::Trip(reason), BreakerState::Closed { .. }) = (signal, &state) {
            self.state = open(fresh_cause(false, reason, &None));
            return;
        }
        // Anywhere else a trip is an outage like any other.
        let outage;
        let signal = match signal {
            HealthSignal::Trip(reason) => {
                outage = HealthSignal::Outage(reason.clone());
                &outage
            }
            signal => signal,
        };
        self.state = match (signal, state) {
            // Any answer proves the lane works.
            (HealthSignal::Success, _) => BreakerState::Closed {
                consecutive_failures: 0,
            },
            (HealthSignal::Neutral, state) => state,
            (HealthSignal::Setting { reason, fix }, BreakerState::Closed { .. }) => {
                open(fresh_cause(true, reason, fix))
            }
            (HealthSignal::Outage(reason), BreakerState::Closed { consecutive_failures }) => {
                let failures = consecutive_failures + 1;
                if failures >= policy.failure_threshold {
                    open(fresh_cause(false, reason, &None))
                } else {
                    BreakerState::Closed {
                        consecutive_failures: failures,
                    }
                }
            }
            (HealthSignal::Setting { reason, fix }, BreakerState::HalfOpen { cause, .. }) => {
                open(reopened(&cause, true, reason, fix))
            }
            (HealthSignal::Outage(reason), BreakerState::HalfOpen { cause, .. }) => {
                // An outage after a setting fault does not prove the setting fixed: keep saying so.
                let fix = cause.fix.clone().filter(|_| cause.setting_fault);
                open(reopened(&cause, cause.setting_fault, reason, &fix))
            }
            // Late answers of calls made before it opened: the spell and its wait stand.
            (HealthSignal::Setting { reason, fix }, BreakerState::Open { until, cause }) => BreakerState::Open {
                until,
                cause: OpenCause {
                    setting_fault: true,
                    reason: reason.clone(),
                    fix: fix.clone(),
                    ..cause
                },
            },
            (HealthSignal::Outage(_), state @ BreakerState::Open { .. }) => state,
            // Turned into an outage above.
            (HealthSignal::Trip(_), state) => state,
        };
    }
}

/// Every lane's breaker in this process, and the transitions not yet persisted.
#[derive(Debug, Default)]
pub struct HealthBoard {
    policy: BreakerPolicy,
    inner: Mutex<BoardState>,
}

#[derive(Debug, Default)]
struct BoardState {
    breakers: BTreeMap<LaneKey, Breaker>,
    pending: Vec<Transition>,
}

impl HealthBoard {
    /// A board with `policy`.
    pub fn new(policy: BreakerPolicy) -> HealthBoard {
        HealthBoard {
            policy,
            inner: Mutex::new(BoardState::default()),
        }
    }

    /// The policy.
    pub fn policy(&self) -> BreakerPolicy {
        self.policy
    }

    /// `key`'s breaker at `now`.
    pub fn state(&self, key: &LaneKey, now: DateTime<Utc>) -> BreakerState {
        self.with(key, now, |breaker| breaker.state(now))
    }

    /// Whether work may be routed to `key` now: closed, or half-open with its probe not yet out.
    /// Spends nothing; the probe is handed out by [`HealthBoard::acquire`] to the call itself.
    pub fn usable(&self, key: &LaneKey, now: DateTime<Utc>) -> bool {
        matches!(
            self.state(key, now),
            BreakerState::Closed { .. } | BreakerState::HalfOpen { probe_at: None, .. }
        )
    }

    /// Asks to make one call on `key` now; hands out the half-open probe at most once.
    pub fn acquire(&self, key: &LaneKey, now: DateTime<Utc>) -> Permit {
        self.with(key, now, |breaker| breaker.acquire(now))
    }

    /// Feeds one call's outcome to `key`'s breaker.
    pub fn record(&self, key: &LaneKey, signal: &HealthSignal, now: DateTime<Utc>) {
        self.with(key, now, |breaker| breaker.record(&self.policy, signal, now));
    }

    /// Every lane whose breaker is not closed at `now`, with its state.
    pub fn unhealthy(&self, now: DateTime<Utc>) -> Vec<(LaneKey, BreakerState)> {
        let keys: Vec<LaneKey> = self.lock().breakers.keys().cloned().collect();
        keys.into_iter()
            .map(|key| {
                let state = self.state(&key, now);
                (key, state)
            })
            .filter(|(_, state)| !matches!(state, BreakerState::Closed { .. }))
            .collect()
    }

    /// Every lane this process has heard of, with its state at `now`.
    pub fn all(&self, now: DateTime<Utc>) -> Vec<(LaneKey, BreakerState)> {
        let keys: Vec<LaneKey> = self.lock().breakers.keys().cloned().collect();
        keys.into_iter()
            .map(|key| {
                let state = self.state(&key, now);
                (key, state)
            })
            .collect()
    }

    /// The transitions since the last call, oldest first.
    pub fn take_transitions(&self) -> Vec<Transition> {
        std::mem::take(&mut self.lock().pending)
    }

    /// Runs `f` on `key`'s breaker and queues a transition when the state's kind changed.
    fn with<T>(&self, key: &LaneKey, now: DateTime<Utc>, f: impl FnOnce(&mut Breaker) -> T) -> T {
        let mut inner = self.lock();
        let breaker = inner.breakers.entry(key.clone()).or_default();
        let before = breaker.state.clone();
        let result = f(breaker);
        let after = breaker.state.clone();
        let changed = before.name() != after.name()
            || before.cause().map(|cause| cause.setting_fault) != after.cause().map(|cause| cause.setting_fault);
        if changed {
            inner.pending.push(Transition {
                key: key.clone(),
                at: now,
                from: before.name(),
                to: after.name(),
                cause: after.cause().cloned(),
                next_probe_at: match &after {
                    BreakerState::Open { until, .. } => Some(*until),
                    _ => None,
                },
            });
        }
        result
    }

    fn lock(&self) -> MutexGuard<'_, BoardState> {
        self.inner
            .lock()
            .expect("health board mutex is never poisoned: nothing panics while holding it")
    }
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone;

    use super::*;

    fn key() -> LaneKey {
        LaneKey {
            lane: Lane::Batch,
            provider: "openai".into(),
            model: "gpt-4o-mini".into(),
            endpoint: "http://127.0.0.1:9".into(),
        }
    }

    fn t0() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 3, 14, 9, 0, 0).unwrap()
    }

    fn setting() -> HealthSignal {
        HealthSignal::Setting {
            reason: "openai: not found".into(),
            fix: Some("OpenAI base URLs end in /v1".into()),
        }
    }

    #[test]
    fn a_setting_fault_opens_at_once_and_failed_probes_double_the_wait_up_to_the_cap() {
        let board = HealthBoard::new(BreakerPolicy {
            failure_threshold: 5,
            cool_down: Duration::seconds(60),
            max_cool_down: Duration::seconds(200),
        });
        let now = t0();
        board.record(&key(), &setting(), now);
        let Permit::Blocked(cause) = board.acquire(&key(), now) else {
            panic!("a setting fault opens the breaker at once");
        };
        assert!(cause.setting_fault);
        assert_eq!(
            cause.describe(),
            "openai: not found; likely fix: OpenAI base URLs end in /v1"
        );
        let mut probe_at = now;
        for wait in [60, 120, 200, 200] {
            assert!(!board.usable(&key(), probe_at + Duration::seconds(wait - 1)));
            probe_at += Duration::seconds(wait);
            assert_eq!(board.acquire(&key(), probe_at), Permit::Probe);
            assert!(
                matches!(board.acquire(&key(), probe_at), Permit::Blocked(_)),
                "one probe"
            );
            board.record(&key(), &setting(), probe_at);
        }
        board.record(&key(), &HealthSignal::Success, probe_at);
        assert_eq!(board.acquire(&key(), probe_at), Permit::Go);
        let transitions: Vec<(&str, &str)> = board
            .take_transitions()
            .iter()
            .map(|transition| (transition.from, transition.to))
            .collect();
        assert_eq!(transitions[0], ("closed", "open"));
        assert_eq!(transitions.last(), Some(&("open", "closed")));
        // Opened once, four probes each half-opening and reopening it, then closed.
        assert_eq!(transitions.len(), 1 + 4 * 2 + 1, "{transitions:?}");
        assert!(board.take_transitions().is_empty());
    }

    #[test]
    fn outages_open_after_the_threshold_and_neutral_answers_neither_count_nor_reset() {
        let board = HealthBoard::new(BreakerPolicy {
            failure_threshold: 3,
            ..BreakerPolicy::default()
        });
        let now = t0();
        for _ in 0..2 {
            board.record(&key(), &HealthSignal::Outage("500".into()), now);
            board.record(&key(), &HealthSignal::Neutral, now);
        }
        assert!(board.usable(&key(), now));
        board.record(&key(), &HealthSignal::Outage("500".into()), now);
        let state = board.state(&key(), now);
        assert!(
            matches!(&state, BreakerState::Open { until, cause } if *until == now + Duration::seconds(60) && !cause.setting_fault)
        );
        // A lost probe is replaced after a cool-down.
        let half_open = now + Duration::seconds(60);
        assert_eq!(board.acquire(&key(), half_open), Permit::Probe);
        assert!(!board.usable(&key(), half_open + Duration::seconds(59)));
        assert_eq!(board.acquire(&key(), half_open + Duration::seconds(60)), Permit::Probe);
        let other = LaneKey {
            lane: Lane::Immediate,
            ..key()
        };
        assert_eq!(board.acquire(&other, now), Permit::Go, "breakers are per lane");
    }
}
