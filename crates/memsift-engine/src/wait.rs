//! How a run waits for work that is due later: the wall clock sleeps, a test's clock jumps.

use chrono::{DateTime, Utc};

/// How `run --until-idle` waits for work that is due later.
#[async_trait::async_trait]
pub trait Waiter: Send + Sync {
    /// Returns once `due` has come (the wall clock sleeps; a test clock jumps).
    async fn wait_until(&self, due: DateTime<Utc>);
}

/// Sleeps on the wall clock.
pub struct SleepWaiter;

#[async_trait::async_trait]
impl Waiter for SleepWaiter {
    async fn wait_until(&self, due: DateTime<Utc>) {
        let wait = (due - Utc::now()).to_std().unwrap_or_default();
        tokio::time::sleep(wait.min(std::time::Duration::from_secs(60))).await;
    }
}
