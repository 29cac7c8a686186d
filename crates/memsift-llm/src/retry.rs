//! Retry policy and the injected time source it sleeps through.
//!
//! Every wait (backoff, `retry-after`, rate limiting) goes through a [`Timekeeper`], so tests use a
//! [`VirtualTimekeeper`] that records the waits and returns at once instead of sleeping.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use backon::{ExponentialBuilder, Retryable};

use crate::error::LlmError;

/// A boxed sleep future.
pub type SleepFuture = Pin<Box<dyn Future<Output = ()> + Send>>;

/// A monotonic clock plus a way to wait on it.
pub trait Timekeeper: Send + Sync + std::fmt::Debug + 'static {
    /// Time elapsed since this timekeeper's own epoch.
    fn now(&self) -> Duration;
    /// Waits `duration`.
    fn sleep(&self, duration: Duration) -> SleepFuture;
}

/// Real time, through tokio (so `tokio::time::pause` also works).
#[derive(Debug, Clone)]
pub struct TokioTimekeeper {
    start: tokio::time::Instant,
}

impl TokioTimekeeper {
    /// A timekeeper whose epoch is now.
    pub fn new() -> Self {
        Self {
            start: tokio::time::Instant::now(),
        }
    }
}

impl Default for TokioTimekeeper {
    fn default() -> Self {
        Self::new()
    }
}

impl Timekeeper for TokioTimekeeper {
    fn now(&self) -> Duration {
        self.start.elapsed()
    }

    fn sleep(&self, duration: Duration) -> SleepFuture {
        Box::pin(tokio::time::sleep(duration))
    }
}

/// Test time: `sleep` advances the virtual clock and records the wait, returning immediately.
#[derive(Debug, Default)]
pub struct VirtualTimekeeper {
    state: Mutex<VirtualState>,
}

#[derive(Debug, Default)]
struct VirtualState {
    now: Duration,
    sleeps: Vec<Duration>,
}

impl VirtualTimekeeper {
    /// A virtual clock at zero.
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// Every wait requested so far, in order.
    pub fn sleeps(&self) -> Vec<Duration> {
        self.lock().sleeps.clone()
    }

    /// Moves the virtual clock without recording a sleep.
    pub fn advance(&self, by: Duration) {
        self.lock().now += by;
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, VirtualState> {
        self.state
            .lock()
            .expect("virtual clock mutex is never poisoned: nothing panics while holding it")
    }
}

impl Timekeeper for VirtualTimekeeper {
    fn now(&self) -> Duration {
        self.lock().now
    }

    fn sleep(&self, duration: Duration) -> SleepFuture {
        let mut state = self.lock();
        state.now += duration;
        state.sleeps.push(duration);
        Box::pin(std::future::ready(()))
    }
}

/// How reads and immediate calls are retried. Creates and uploads are never retried (see `CreateOutcome`).
#[derive(Debug, Clone)]
pub struct RetryPolicy {
    /// Retries after the first attempt.
    pub max_retries: usize,
    /// The first backoff delay.
    pub min_delay: Duration,
    /// The largest backoff delay.
    pub max_delay: Duration,
    /// The longest `retry-after` honoured; longer asks are capped so one call never stalls for hours.
    pub max_retry_after: Duration,
    /// Randomise each delay (full jitter on top of the exponential step) so clients do not retry in step.
    pub jitter: bool,
    /// Where waits happen.
    pub timekeeper: Arc<dyn Timekeeper>,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_retries: 4,
            min_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(30),
            max_retry_after: Duration::from_secs(120),
            jitter: true,
            timekeeper: Arc::new(TokioTimekeeper::new()),
        }
    }
}

/// Which failures a call may retry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetryMode {
    /// Reads and immediate calls: transient, rate-limited and overloaded failures.
    Idempotent,
    /// Reads of an id the provider gave us: also 404, which providers return for a while after create.
    KnownId,
}

impl RetryMode {
    fn retries(self, error: &LlmError) -> bool {
        match self {
            RetryMode::Idempotent => error.is_transient(),
            RetryMode::KnownId => error.is_transient() || matches!(error, LlmError::NotFound { .. }),
        }
    }
}

impl RetryPolicy {
    /// Runs `attempt` until it succeeds, fails permanently, or the retries run out; the last error is returned.
    pub async fn run<T, F, Fut>(&self, mode: RetryMode, operation: &str, attempt: F) -> Result<T, LlmError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, LlmError>>,
    {
        let mut backoff = ExponentialBuilder::default()
            .with_min_delay(self.min_delay)
            .with_max_delay(self.max_delay)
            .with_max_times(self.max_retries);
        if self.jitter {
            backoff = backoff.with_jitter();
        }
        let timekeeper = Arc::clone(&self.timekeeper);
        let max_retry_after = self.max_retry_after;
        attempt
            .retry(backoff)
            .sleep(move |duration| timekeeper.sleep(duration))
            .when(|error| mode.retries(error))
            // `None` means the retries are used up; only a planned retry takes the provider's wait.
            .adjust(move |error, planned| {
                planned.map(|planned| error.retry_after().map_or(planned, |asked| asked.min(max_retry_after)))
            })
            .notify(|error, wait| {
                tracing::warn!(operation, wait_ms = wait.as_millis() as u64, %error, "retrying provider call");
            })
            .await
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    fn policy(timekeeper: &Arc<VirtualTimekeeper>) -> RetryPolicy {
        RetryPolicy {
            max_retries: 3,
            jitter: false,
            timekeeper: timekeeper.clone(),
            ..RetryPolicy::default()
        }
    }

    fn transient() -> LlmError {
        LlmError::Transient {
            provider: "test",
            status: Some(500),
            detail: "boom".into(),
        }
    }

    #[tokio::test]
    async fn transient_failures_back_off_exponentially_then_give_up_with_the_last_error() {
        let clock = VirtualTimekeeper::new();
        let calls = AtomicUsize::new(0);
        let result: Result<(), LlmError> = policy(&clock)
            .run(RetryMode::Idempotent, "test", || async {
                calls.fetch_add(1, Ordering::SeqCst);
                Err(transient())
            })
            .await;
        assert_eq!(result.unwrap_err(), transient());
        assert_eq!(calls.load(Ordering::SeqCst), 4);
        let ms: Vec<u128> = clock.sleeps().iter().map(Duration::as_millis).collect();
        assert_eq!(ms, vec![500, 1000, 2000]);
    }

    #[tokio::test]
    async fn a_retry_after_replaces_the_backoff_and_permanent_errors_are_not_retried() {
        let clock = VirtualTimekeeper::new();
        let calls = AtomicUsize::new(0);
        let result = policy(&clock)
            .run(RetryMode::Idempotent, "test", || async {
                match calls.fetch_add(1, Ordering::SeqCst) {
                    0 => Err(LlmError::RateLimited {
                        provider: "test",
                        retry_after: Some(Duration::from_secs(7)),
                        detail: "slow down".into(),
                    }),
                    1 => Err(LlmError::NotFound {
                        provider: "test",
                        detail: "gone".into(),
                    }),
                    _ => Ok(()),
                }
            })
            .await;
        assert!(matches!(result, Err(LlmError::NotFound { .. })));
        assert_eq!(clock.sleeps(), vec![Duration::from_secs(7)]);
    }
}
