//! A rate limiter shared by every client of a process, one budget per (provider, model).
//!
//! Two things slow a key down: a steady request quota (governor's GCRA, when configured) and a
//! pause the provider asked for, either by a 429's `retry-after` or by rate-limit headers that say
//! nothing is left until a reset time. Both wait through the injected [`Timekeeper`].

use std::collections::HashMap;
use std::num::NonZeroU32;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use governor::clock::Clock;
use governor::middleware::NoOpMiddleware;
use governor::state::{InMemoryState, NotKeyed};
use governor::{Quota, RateLimiter as Gcra};
use reqwest::header::HeaderMap;

use crate::retry::{Timekeeper, TokioTimekeeper};

/// Which budget a call spends.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LimitKey {
    /// `anthropic`, `openai`, …
    pub provider: String,
    /// The model name.
    pub model: String,
}

impl LimitKey {
    /// A key.
    pub fn new(provider: impl Into<String>, model: impl Into<String>) -> Self {
        Self {
            provider: provider.into(),
            model: model.into(),
        }
    }
}

/// governor's clock, read from our timekeeper so tests can run it virtually.
#[derive(Debug, Clone)]
struct TimekeeperClock(Arc<dyn Timekeeper>);

impl Clock for TimekeeperClock {
    type Instant = Duration;

    fn now(&self) -> Duration {
        self.0.now()
    }
}

type KeyGcra = Gcra<NotKeyed, InMemoryState, TimekeeperClock, NoOpMiddleware<Duration>>;

/// A configured quota of one key: requests and input tokens per minute, for the whole fleet.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct KeyQuota {
    /// Calls per minute.
    pub requests_per_minute: Option<NonZeroU32>,
    /// Input tokens per minute of model calls.
    pub tokens_per_minute: Option<NonZeroU32>,
}

#[derive(Debug, Default)]
struct KeyState {
    quota: KeyQuota,
    gcra: Option<Arc<KeyGcra>>,
    tokens: Option<Arc<KeyGcra>>,
    /// This process's share of `tokens_per_minute`, the most one call may take at once.
    token_burst: u32,
    paused_until: Duration,
}

/// The shared limiter. Clones share state; give every client of the process the same one.
#[derive(Debug, Clone)]
pub struct RateLimiter {
    timekeeper: Arc<dyn Timekeeper>,
    default_per_minute: Option<NonZeroU32>,
    keys: Arc<Mutex<HashMap<LimitKey, KeyState>>>,
    /// How many processes share every quota (this one included); each takes an equal part.
    share: Arc<std::sync::atomic::AtomicU32>,
    /// Requests asked for since [`RateLimiter::take_demand`] last read it: whether this process
    /// wants a share at all.
    asked: Arc<std::sync::atomic::AtomicU64>,
}

impl Default for RateLimiter {
    fn default() -> Self {
        Self::new(Arc::new(TokioTimekeeper::new()), None)
    }
}

impl RateLimiter {
    /// A limiter; `default_per_minute` is the steady quota of every key (None: only provider pauses apply).
    pub fn new(timekeeper: Arc<dyn Timekeeper>, default_per_minute: Option<NonZeroU32>) -> Self {
        Self {
            timekeeper,
            default_per_minute,
            keys: Arc::new(Mutex::new(HashMap::new())),
            share: Arc::new(std::sync::atomic::AtomicU32::new(1)),
            asked: Arc::new(std::sync::atomic::AtomicU64::new(0)),
        }
    }

    /// Sets one key's steady quota (requests per minute, bursting up to the same number).
    pub fn set_quota(&self, key: &LimitKey, per_minute: NonZeroU32) {
        self.set_quotas(
            key,
            KeyQuota {
                requests_per_minute: Some(per_minute),
                tokens_per_minute: None,
            },
        );
    }

    /// Sets one key's quotas for the whole fleet; this process takes its share of them.
    pub fn set_quotas(&self, key: &LimitKey, quota: KeyQuota) {
        let share = self.share();
        let mut keys = self.lock();
        let state = keys.entry(key.clone()).or_default();
        state.quota = quota;
        self.rebuild(state, share);
    }

    /// Splits every quota between `processes` processes (at least 1), from now on.
    ///
    /// Several daemons on one PostgreSQL database each call this with the number using the quota, so
    /// together they stay under the provider's quota without a round trip per call.
    pub fn set_share(&self, processes: u32) {
        let processes = processes.max(1);
        if self.share.swap(processes, std::sync::atomic::Ordering::Relaxed) == processes {
            return;
        }
        let mut keys = self.lock();
        for state in keys.values_mut() {
            self.rebuild(state, processes);
        }
    }

    /// How many processes share the quotas.
    pub fn share(&self) -> u32 {
        self.share.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Whether any request was asked for since the last call, and resets it: quotas are shared
    /// between the processes that use them, so an idle one must not take a part.
    pub fn take_demand(&self) -> bool {
        self.asked.swap(0, std::sync::atomic::Ordering::Relaxed) > 0
    }

    fn rebuild(&self, state: &mut KeyState, share: u32) {
        let part = |total: Option<NonZeroU32>| {
            total.map(|total| NonZeroU32::new(total.get() / share).unwrap_or(NonZeroU32::MIN))
        };
        state.gcra = part(state.quota.requests_per_minute).map(|per_minute| self.gcra(per_minute));
        let tokens = part(state.quota.tokens_per_minute);
        state.tokens = tokens.map(|per_minute| self.gcra(per_minute));
        state.token_burst = tokens.map_or(0, NonZeroU32::get);
    }

    fn gcra(&self, per_minute: NonZeroU32) -> Arc<KeyGcra> {
        Arc::new(Gcra::direct_with_clock(
            Quota::per_minute(per_minute),
            TimekeeperClock(Arc::clone(&self.timekeeper)),
        ))
    }

    /// Waits until `key` may send one request, then takes it.
    pub async fn acquire(&self, key: &LimitKey) {
        self.asked.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        loop {
            let wait = self.wait_for(key);
            if wait.is_zero() {
                return;
            }
            tracing::debug!(provider = %key.provider, model = %key.model, wait_ms = wait.as_millis() as u64, "rate limited locally");
            self.timekeeper.sleep(wait).await;
        }
    }

    /// Waits until `key` may spend `tokens` input tokens, then takes them. A call larger than the
    /// whole per-minute share takes the share, so it waits for a full minute instead of forever.
    pub async fn acquire_tokens(&self, key: &LimitKey, tokens: u32) {
        loop {
            let (gcra, burst) = {
                let keys = self.lock();
                match keys.get(key) {
                    Some(KeyState {
                        tokens: Some(gcra),
                        token_burst,
                        ..
                    }) => (Arc::clone(gcra), *token_burst),
                    _ => return,
                }
            };
            let cells = NonZeroU32::new(tokens.clamp(1, burst.max(1))).unwrap_or(NonZeroU32::MIN);
            let now = self.timekeeper.now();
            let wait = match gcra.check_n(cells) {
                Ok(Ok(())) => return,
                Ok(Err(not_until)) => not_until.wait_time_from(now).max(Duration::from_millis(1)),
                // More than the burst: cannot happen after the clamp; a minute is the longest wait.
                Err(_) => Duration::from_secs(60),
            };
            tracing::debug!(provider = %key.provider, model = %key.model, tokens, wait_ms = wait.as_millis() as u64, "token quota reached locally");
            self.timekeeper.sleep(wait).await;
        }
    }

    /// How long `key` must wait now; zero means a request was taken.
    fn wait_for(&self, key: &LimitKey) -> Duration {
        let now = self.timekeeper.now();
        let gcra = {
            let mut keys = self.lock();
            let state = keys.entry(key.clone()).or_default();
            if state.paused_until > now {
                return state.paused_until - now;
            }
            if state.gcra.is_none()
                && let Some(per_minute) = self.default_per_minute
            {
                state.gcra = Some(self.gcra(per_minute));
            }
            state.gcra.clone()
        };
        match gcra.map(|gcra| gcra.check()) {
            Some(Err(not_until)) => not_until.wait_time_from(now).max(Duration::from_millis(1)),
            Some(Ok(())) | None => Duration::ZERO,
        }
    }

    /// Stops `key` for `duration` (a 429's `retry-after`); an earlier, shorter pause never shortens a longer one.
    pub fn pause(&self, key: &LimitKey, duration: Duration) {
        let until = self.timekeeper.now() + duration;
        let mut keys = self.lock();
        let state = keys.entry(key.clone()).or_default();
        state.paused_until = state.paused_until.max(until);
    }

    /// How long `key` is paused for from now.
    pub fn paused_for(&self, key: &LimitKey) -> Duration {
        let now = self.timekeeper.now();
        self.lock()
            .get(key)
            .map_or(Duration::ZERO, |state| state.paused_until.saturating_sub(now))
    }

    /// Reads the providers' rate-limit headers: when no requests remain, pause until the reset.
    pub fn observe_headers(&self, key: &LimitKey, headers: &HeaderMap) {
        if let Some(wait) = exhausted_until_reset(headers, chrono::Utc::now()) {
            self.pause(key, wait);
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<LimitKey, KeyState>> {
        self.keys
            .lock()
            .expect("rate limiter mutex is never poisoned: nothing panics while holding it")
    }
}

/// The wait implied by rate-limit headers whose `remaining` is zero.
///
/// Anthropic: `anthropic-ratelimit-requests-remaining` + `-reset` (RFC 3339). OpenAI:
/// `x-ratelimit-remaining-requests` + `x-ratelimit-reset-requests` (a duration such as `6m0s` or `12ms`).
pub fn exhausted_until_reset(headers: &HeaderMap, now: chrono::DateTime<chrono::Utc>) -> Option<Duration> {
    let header = |name: &str| headers.get(name).and_then(|value| value.to_str().ok()).map(str::trim);
    if header("anthropic-ratelimit-requests-remaining") == Some("0") {
        let reset = chrono::DateTime::parse_from_rfc3339(header("anthropic-ratelimit-requests-reset")?).ok()?;
        return Some(
            (reset.with_timezone(&chrono::Utc) - now)
                .to_std()
                .unwrap_or(Duration::ZERO),
        );
    }
    if header("x-ratelimit-remaining-requests") == Some("0") {
        return parse_go_duration(header("x-ratelimit-reset-requests")?);
    }
    None
}

/// Parses durations like `1h2m3.5s`, `6m0s`, `12ms`, `250us`.
pub fn parse_go_duration(text: &str) -> Option<Duration> {
    let mut total = 0f64;
    let mut rest = text.trim();
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let number_len = rest.find(|c: char| !(c.is_ascii_digit() || c == '.'))?;
        let number: f64 = rest[..number_len].parse().ok()?;
        rest = &rest[number_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let seconds_per_unit = match &rest[..unit_len] {
            "h" => 3600.0,
            "m" => 60.0,
            "s" => 1.0,
            "ms" => 1e-3,
            "us" | "µs" => 1e-6,
            "ns" => 1e-9,
            _ => return None,
        };
        total += number * seconds_per_unit;
        rest = &rest[unit_len..];
    }
    Some(Duration::from_secs_f64(total))
}

#[cfg(test)]
mod tests {
    use reqwest::header::HeaderValue;

    use super::*;
    use crate::retry::VirtualTimekeeper;

    #[tokio::test]
    async fn a_quota_spaces_requests_on_the_injected_clock() {
        let clock = VirtualTimekeeper::new();
        let limiter = RateLimiter::new(clock.clone(), None);
        let key = LimitKey::new("anthropic", "claude-haiku-4-5");
        limiter.set_quota(&key, NonZeroU32::new(2).unwrap());
        for _ in 0..3 {
            limiter.acquire(&key).await;
        }
        // Two in the burst, the third waits for one replenishment: 60 s / 2.
        let waited: Duration = clock.sleeps().iter().sum();
        assert_eq!(waited, Duration::from_secs(30));
    }

    #[tokio::test]
    async fn a_pause_holds_only_its_own_key() {
        let clock = VirtualTimekeeper::new();
        let limiter = RateLimiter::new(clock.clone(), None);
        let slow = LimitKey::new("openai", "gpt-4o-mini");
        limiter.pause(&slow, Duration::from_secs(3));
        limiter.pause(&slow, Duration::from_secs(1));
        limiter.acquire(&LimitKey::new("openai", "other")).await;
        assert!(clock.sleeps().is_empty());
        limiter.acquire(&slow).await;
        assert_eq!(clock.sleeps(), vec![Duration::from_secs(3)]);
    }

    #[tokio::test]
    async fn one_limiter_holds_a_key_to_its_quota_and_splits_it_between_processes() {
        let clock = VirtualTimekeeper::new();
        let limiter = RateLimiter::new(clock.clone(), None);
        let key = LimitKey::new("anthropic", "claude-haiku-4-5");
        limiter.set_quotas(
            &key,
            KeyQuota {
                requests_per_minute: Some(NonZeroU32::new(60).unwrap()),
                tokens_per_minute: Some(NonZeroU32::new(6000).unwrap()),
            },
        );
        // Two lanes of the process share the clone: 6000 tokens go at once, 3000 more wait 30 s.
        let lane = limiter.clone();
        lane.acquire_tokens(&key, 6000).await;
        limiter.acquire_tokens(&key, 3000).await;
        assert_eq!(clock.sleeps().iter().sum::<Duration>(), Duration::from_secs(30));
        // Three live processes: each has a third, so 20 requests burst and the 21st waits 3 s.
        limiter.set_share(3);
        for _ in 0..21 {
            limiter.acquire(&key).await;
        }
        assert_eq!(clock.sleeps().last(), Some(&Duration::from_secs(3)));
        // A call larger than the whole share takes the share instead of waiting forever.
        let before = clock.sleeps().len();
        limiter.acquire_tokens(&key, 50_000).await;
        limiter.acquire_tokens(&key, 50_000).await;
        assert!(clock.sleeps().len() > before);
        assert!(
            clock.sleeps()[before..]
                .iter()
                .all(|wait| *wait <= Duration::from_secs(60))
        );
    }

    #[test]
    fn exhausted_headers_of_both_providers_give_the_wait_to_reset() {
        let now = chrono::DateTime::parse_from_rfc3339("2026-01-01T00:00:00Z")
            .unwrap()
            .with_timezone(&chrono::Utc);
        let mut anthropic = HeaderMap::new();
        anthropic.insert("anthropic-ratelimit-requests-remaining", HeaderValue::from_static("0"));
        anthropic.insert(
            "anthropic-ratelimit-requests-reset",
            HeaderValue::from_static("2026-01-01T00:00:05Z"),
        );
        assert_eq!(exhausted_until_reset(&anthropic, now), Some(Duration::from_secs(5)));
        let mut openai = HeaderMap::new();
        openai.insert("x-ratelimit-remaining-requests", HeaderValue::from_static("0"));
        openai.insert("x-ratelimit-reset-requests", HeaderValue::from_static("6m0.5s"));
        assert_eq!(
            exhausted_until_reset(&openai, now),
            Some(Duration::from_millis(360_500))
        );
        assert_eq!(parse_go_duration("12ms"), Some(Duration::from_millis(12)));
        assert_eq!(parse_go_duration("soon"), None);
    }
}
