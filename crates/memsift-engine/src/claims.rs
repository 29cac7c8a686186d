//! This process's segment claims: how many statements, how many segments, and how long each
//! statement took, for `/metrics` (several daemons contending for one PostgreSQL show up here).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// The upper bounds (seconds) of the claim-latency histogram's buckets: a claim is one short
/// statement, so the interesting range is a millisecond to a second.
pub const CLAIM_BUCKETS_SECS: [f64; 12] = [0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0];

/// Counters a claim adds to; shared by every clone of the application.
#[derive(Debug, Default)]
pub struct ClaimStats {
    n_claims: AtomicU64,
    n_segments: AtomicU64,
    sum_micros: AtomicU64,
    /// Claims at or under each bound (not cumulative here; [`ClaimStats::snapshot`] sums them).
    in_bucket: [AtomicU64; CLAIM_BUCKETS_SECS.len()],
}

/// What [`ClaimStats`] held when read.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ClaimSnapshot {
    /// Claim statements run (including those that found nothing to claim).
    pub n_claims: u64,
    /// Segments they claimed.
    pub n_segments: u64,
    /// Their total time, in seconds.
    pub sum_secs: f64,
    /// Claims that took at most each bound of [`CLAIM_BUCKETS_SECS`] (cumulative, as Prometheus
    /// histograms count).
    pub at_most: [u64; CLAIM_BUCKETS_SECS.len()],
}

impl ClaimStats {
    /// Records one claim statement that took `elapsed` and claimed `n_segments`.
    pub fn record(&self, elapsed: Duration, n_segments: usize) {
        self.n_claims.fetch_add(1, Ordering::Relaxed);
        self.n_segments.fetch_add(n_segments as u64, Ordering::Relaxed);
        let micros = u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX);
        self.sum_micros.fetch_add(micros, Ordering::Relaxed);
        let secs = elapsed.as_secs_f64();
        if let Some(bucket) = CLAIM_BUCKETS_SECS.iter().position(|bound| secs <= *bound) {
            self.in_bucket[bucket].fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The counts now.
    pub fn snapshot(&self) -> ClaimSnapshot {
        let mut at_most = [0; CLAIM_BUCKETS_SECS.len()];
        let mut running = 0;
        for (slot, count) in at_most.iter_mut().zip(&self.in_bucket) {
            running += count.load(Ordering::Relaxed);
            *slot = running;
        }
        ClaimSnapshot {
            n_claims: self.n_claims.load(Ordering::Relaxed),
            n_segments: self.n_segments.load(Ordering::Relaxed),
            sum_secs: self.sum_micros.load(Ordering::Relaxed) as f64 / 1e6,
            at_most,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_claim_is_counted_in_its_bucket_and_every_bucket_above() {
        let stats = ClaimStats::default();
        stats.record(Duration::from_micros(700), 3);
        stats.record(Duration::from_millis(30), 0);
        stats.record(Duration::from_secs(9), 1);
        let snapshot = stats.snapshot();
        assert_eq!(snapshot.n_claims, 3);
        assert_eq!(snapshot.n_segments, 4);
        assert!((snapshot.sum_secs - 9.0307).abs() < 1e-9, "{}", snapshot.sum_secs);
        // ≤1 ms: the first; ≤50 ms: the first two; the 9 s claim is past every bound (only +Inf).
        assert_eq!(snapshot.at_most, [1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2]);
    }
}
