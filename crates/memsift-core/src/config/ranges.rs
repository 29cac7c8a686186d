//! Every numeric setting's allowed range, checked on every load (so `check-config` and start-up
//! refuse the same values), and the durations the code builds from them.
//!
//! A time is at most [`MAX_SECS`]: added to any date the code meets it stays far inside chrono's
//! range, so a lease or a poll interval can never overflow a timestamp (`claim_lease_secs = 1e13`
//! once passed the check and panicked on every tick). A count is bounded where a huge one would be
//! a typo that allocates or loops; each bound is far above any useful value.

use chrono::Duration;

use super::Config;
use super::error::{ConfigError, invalid};

/// The longest time any setting may name: 366 days.
pub const MAX_SECS: u64 = 366 * 24 * 3600;

/// The longest age in days (retention, scoring): a hundred years.
pub const MAX_DAYS: u32 = 36_600;

/// One integer setting: its dotted key, value and allowed range, and what the default is.
struct Bound {
    key: &'static str,
    value: u64,
    min: u64,
    max: u64,
    unit: &'static str,
    hint: &'static str,
}

impl Bound {
    fn check(&self) -> Result<(), ConfigError> {
        if (self.min..=self.max).contains(&self.value) {
            return Ok(());
        }
        Err(invalid(
            self.key,
            self.value,
            &format!("use {} to {} {} ({})", self.min, self.max, self.unit, self.hint),
        ))
    }
}

/// A time in seconds from `min` to [`MAX_SECS`].
fn secs(key: &'static str, value: u64, min: u64, hint: &'static str) -> Bound {
    Bound {
        key,
        value,
        min,
        max: MAX_SECS,
        unit: "seconds",
        hint,
    }
}

/// A count from `min` to `max`.
fn count(key: &'static str, value: impl Into<u64>, min: u64, max: u64, hint: &'static str) -> Bound {
    Bound {
        key,
        value: value.into(),
        min,
        max,
        unit: "",
        hint,
    }
}

impl Config {
    /// Every integer setting of the plain sections within its range; a float within its own.
    pub(super) fn validate_ranges(&self) -> Result<(), ConfigError> {
        for bound in self.time_bounds().iter().chain(&self.count_bounds()) {
            bound.check()?;
        }
        if let Some(dimension) = self.embeddings.dimension {
            count(
                "embeddings.dimension",
                dimension,
                1,
                65_536,
                "the endpoint's vector length",
            )
            .check()?;
        }
        self.validate_llm_numbers()
    }

    /// The time settings, each in seconds up to a year.
    fn time_bounds(&self) -> [Bound; 11] {
        let batch = &self.batch;
        [
            secs(
                "segments.idle_timeout_secs",
                self.segments.idle_timeout_secs,
                1,
                "default 3600",
            ),
            secs(
                "extraction.claim_lease_secs",
                self.extraction.claim_lease_secs,
                1,
                "default 900",
            ),
            secs(
                "batch.pack_max_wait_secs",
                batch.pack_max_wait_secs,
                0,
                "default 60; 0 sends at once",
            ),
            // 0 polled about twenty times a second: a poll is a provider call.
            secs("batch.poll_initial_secs", batch.poll_initial_secs, 1, "default 30"),
            secs(
                "batch.poll_max_secs",
                batch.poll_max_secs,
                batch.poll_initial_secs.max(1),
                "at least batch.poll_initial_secs; default 600",
            ),
            secs(
                "batch.reconcile_grace_secs",
                batch.reconcile_grace_secs,
                0,
                "default 300",
            ),
            secs(
                "embeddings.idle_unload_secs",
                self.embeddings.idle_unload_secs,
                0,
                "default 300; 0 keeps it",
            ),
            secs("health.cool_down_secs", self.health.cool_down_secs, 1, "default 60"),
            secs(
                "health.max_cool_down_secs",
                self.health.max_cool_down_secs,
                self.health.cool_down_secs.max(1),
                "at least health.cool_down_secs; default 1800",
            ),
            secs(
                "schedules.lease_secs",
                self.schedules.lease_secs,
                1,
                "longer than the slowest run; default 900",
            ),
            secs(
                "daemon.drain_timeout_secs",
                self.daemon.drain_timeout_secs,
                0,
                "default 20",
            ),
        ]
    }

    /// The counts and sizes.
    fn count_bounds(&self) -> [Bound; 17] {
        let (batch, extraction) = (&self.batch, &self.extraction);
        [
            count(
                "database.max_connections",
                self.database.max_connections,
                1,
                1000,
                "default 8",
            ),
            count(
                "ingest.max_message_bytes",
                self.ingest.max_message_bytes,
                1,
                1 << 30,
                "bytes; default 1048576",
            ),
            count(
                "api.max_body_bytes",
                self.api.max_body_bytes,
                1,
                1 << 32,
                "bytes; default 4194304",
            ),
            count("extraction.max_attempts", extraction.max_attempts, 1, 100, "default 3"),
            count(
                "extraction.max_apply_attempts",
                extraction.max_apply_attempts,
                1,
                100,
                "default 3",
            ),
            count(
                "extraction.max_continuations",
                extraction.max_continuations,
                0,
                20,
                "default 6",
            ),
            count(
                "extraction.similar_memories",
                extraction.similar_memories,
                0,
                1000,
                "default 20",
            ),
            count("batch.max_batch_losses", batch.max_batch_losses, 1, 100, "default 2"),
            count(
                "embeddings.turns_per_pass",
                self.embeddings.turns_per_pass,
                1,
                1_000_000,
                "default 512",
            ),
            count(
                "batch.chunk_budget_tokens",
                batch.chunk_budget_tokens,
                256,
                2_000_000,
                "tokens; default 6000",
            ),
            count(
                "batch.max_known_memories",
                batch.max_known_memories,
                0,
                1000,
                "default 40",
            ),
            count(
                "retention.raw_output_days",
                self.retention.raw_output_days,
                0,
                MAX_DAYS.into(),
                "days; 0 keeps",
            ),
            count(
                "scoring.min_age_days",
                self.scoring.min_age_days,
                0,
                MAX_DAYS.into(),
                "days; default 30",
            ),
            count(
                "postprocess.max_relate_per_run",
                self.postprocess.max_relate_per_run,
                0,
                1_000_000,
                "default 500",
            ),
            count(
                "postprocess.max_entity_reviews_per_run",
                self.postprocess.max_entity_reviews_per_run,
                0,
                1_000_000,
                "default 50",
            ),
            count(
                "search.held_mb",
                self.search.held_mb,
                1,
                1 << 20,
                "megabytes; default 256",
            ),
            count(
                "health.failure_threshold",
                self.health.failure_threshold,
                1,
                1000,
                "default 5",
            ),
        ]
    }

    /// Each `[llm.*]` section's output cap and sampling numbers are ones a provider takes.
    fn validate_llm_numbers(&self) -> Result<(), ConfigError> {
        for (key, llm) in &self.llm {
            let field = |name: &str| format!("llm.{key}.{name}");
            if !(1..=1_000_000).contains(&llm.max_tokens) {
                return Err(invalid(&field("max_tokens"), llm.max_tokens, "use 1 to 1000000 tokens"));
            }
            if let Some(budget) = llm.thinking_budget_tokens
                && !(1024..llm.max_tokens).contains(&budget)
            {
                return Err(invalid(
                    &field("thinking_budget_tokens"),
                    budget,
                    &format!("use at least 1024 and below max_tokens ({})", llm.max_tokens),
                ));
            }
            if let Some(temperature) = llm.temperature
                && !(0.0..=2.0).contains(&temperature)
            {
                return Err(invalid(
                    &field("temperature"),
                    temperature,
                    "use 0 to 2 (Anthropic: 0 to 1)",
                ));
            }
        }
        Ok(())
    }

    /// How long a claim on a segment holds.
    pub fn claim_lease(&self) -> Duration {
        seconds(self.extraction.claim_lease_secs)
    }

    /// How long a planned batch request waits for others.
    pub fn pack_max_wait(&self) -> Duration {
        seconds(self.batch.pack_max_wait_secs)
    }

    /// The first poll after a batch is submitted.
    pub fn poll_initial(&self) -> Duration {
        seconds(self.batch.poll_initial_secs)
    }

    /// The longest gap between polls.
    pub fn poll_max(&self) -> Duration {
        seconds(self.batch.poll_max_secs)
    }

    /// How long a batch of unknown create outcome waits before it is reconciled.
    pub fn reconcile_grace(&self) -> Duration {
        seconds(self.batch.reconcile_grace_secs)
    }

    /// How long a daemon job's claim holds.
    pub fn schedule_lease(&self) -> Duration {
        seconds(self.schedules.lease_secs)
    }

    /// How long a stopping daemon lets its step run on.
    pub fn drain_timeout(&self) -> std::time::Duration {
        std::time::Duration::from_secs(self.daemon.drain_timeout_secs)
    }
}

/// A validated number of seconds as a duration (validation caps it at [`MAX_SECS`]; a larger
/// value, from a `Config` built by hand, is capped too rather than panicking).
pub(super) fn seconds(value: u64) -> Duration {
    Duration::seconds(value.min(MAX_SECS) as i64)
}
