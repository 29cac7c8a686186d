//! The batch coordinator: the single submission point for every purpose's batch-lane requests.
//!
//! One [`BatchCoordinator::step`] moves every batch forward by at most one committed state:
//! 1. **pack and submit**: planned batch-lane requests of one config key are packed into a batch
//!    committed `submitting` *before* the provider's create call (invariant 3); create is never
//!    retried blindly — an unknown outcome leaves the row for the reconciler;
//! 2. **reconcile**: a batch left `submitting` past a grace period is looked up through the
//!    provider's list endpoint and adopted, or, after two misses a grace period apart, its
//!    requests are re-planned under the same ids;
//! 3. **poll**: a snooze with a growing, jittered `next_poll_at`, never an attempt (invariant 6);
//! 4. **ingest**: results are downloaded once per batch and recorded on each request by
//!    `custom_id`, with a cursor on the batch row (invariant 4); a step reads for at most
//!    [`DOWNLOAD_SLICE`] and leaves a longer download open for the next, so a slow or endless
//!    body never holds the other lanes and users behind it. Applying the recorded answers is
//!    the pipeline's one apply path, which drains every `succeeded` request whichever lane
//!    answered it; the coordinator never writes memories.
//!
//! A result line that cannot be recorded is logged against its request and the batch goes on; a
//! database that is unreachable stops the batch (its claim lapses and ingest resumes from the
//! cursor), never the other batches of the step.
//!
//! **Architecture invariant:** the coordinator holds no transaction across a provider call and
//! keeps no state in memory that the database does not also hold (an open download is a
//! connection, read from the batch's cursor on); a crash anywhere leaves rows that the next step
//! (in this process or another) resumes from.

#![deny(missing_docs)]

use std::collections::BTreeMap;
use std::sync::Arc;

use chrono::{DateTime, Duration, Utc};
use memsift_core::status::{Lane, RequestStatus};
use memsift_core::{BatchId, Clock};
use memsift_llm::{BreakerState, HealthBoard, HealthSignal, LaneKey, Permit, ProviderFault, ResolvedLlm};
use memsift_store::{BatchRow, PackPolicy, RequestUsage, Store, StoreError, WorkRequest};
use serde::Serialize;

pub use providers::{AnthropicBatchProvider, OpenAiBatchProvider};

/// Trips a fail point (feature `failpoints`): the step returns [`CoordinatorError::FailPoint`] as
/// if the process had died right there. Without the feature this compiles to nothing.
///
/// The point is named `{name}::{worker_id}`: fail points are process-wide, so a test arms one for
/// its own coordinator's worker id and cannot trip the tests running beside it.
macro_rules! fail_point {
    ($coordinator:expr, $name:literal) => {
        fail::fail_point!(&format!("{}::{}", $name, $coordinator.worker_id), |_| Err(
            CoordinatorError::FailPoint($name)
        ));
    };
}

mod ingest;
mod poll;
mod providers;

pub use ingest::{DOWNLOAD_SLICE, MAX_DOWNLOADS};

/// Timing and size settings.
#[derive(Clone, Debug)]
pub struct BatchSettings {
    /// Requests per provider batch at most.
    pub max_requests_per_batch: i64,
    /// How long a planned request waits for company before a smaller batch is sent.
    pub pack_max_wait: Duration,
    /// First poll after submission.
    pub poll_initial: Duration,
    /// Longest gap between polls.
    pub poll_max: Duration,
    /// How long a `submitting` batch is left alone before the reconciler looks for it, when its
    /// process died around the create (the create may still be running).
    pub reconcile_grace: Duration,
    /// How long after a pass that did not find a batch whose create answered without an outcome
    /// (a 5xx, a lost reply) it is looked for again: a provider's list catches up within seconds,
    /// and the batch's requests wait meanwhile.
    pub reconcile_recheck: Duration,
    /// How long one worker's claim on a batch step lasts.
    pub claim_lease: Duration,
    /// Delete what the provider keeps of a batch once it is ingested, when one of its users was
    /// erased while it was in flight (`[erasure] delete_provider_batches`).
    pub delete_erased_batches: bool,
    /// Batches a request may lose (given up: not found past the grace, results purged or
    /// unreadable, past expiry) before its lane is paused as a setting fault (`[batch]
    /// max_batch_losses`): a lasting cause would otherwise create a new billed batch forever.
    pub max_batch_losses: i64,
}

impl Default for BatchSettings {
    fn default() -> Self {
        Self {
            max_requests_per_batch: 1000,
            pack_max_wait: Duration::seconds(60),
            poll_initial: Duration::seconds(30),
            poll_max: Duration::seconds(600),
            reconcile_grace: Duration::seconds(300),
            reconcile_recheck: Duration::seconds(30),
            claim_lease: Duration::seconds(900),
            delete_erased_batches: true,
            max_batch_losses: 2,
        }
    }
}

/// What a provider said to a create call.
#[derive(Clone, Debug)]
pub enum ProviderCreate {
    /// Created: its id and processing deadline.
    Created {
        /// The provider's id.
        provider_batch_id: String,
        /// The end of its processing window.
        expires_at: Option<DateTime<Utc>>,
    },
    /// Definitely not created.
    Rejected {
        /// Why, classified: a setting fault pauses the lane without spending attempts.
        fault: ProviderFault,
        /// The same batch may succeed later (rate limit, overload, a server that never got it):
        /// re-plan its requests without spending their attempts, after `retry_after`.
        retry_after: Option<Duration>,
    },
    /// Maybe created: reconcile.
    Unknown(ProviderFault),
}

/// Where a provider batch is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProviderPoll {
    /// Still running (including `canceling`, which is not terminal).
    Running,
    /// Finished: counts of succeeded, errored, expired, canceled (as far as the provider reports them).
    Ended([i64; 4]),
}

/// One result line, provider-neutral.
#[derive(Clone, Debug)]
pub enum ResultLine {
    /// An answer.
    Answer {
        /// Our request id.
        custom_id: String,
        /// The text.
        raw_output: String,
        /// Why it stopped.
        stop_reason: Option<String>,
        /// Tokens and cost.
        usage: RequestUsage,
    },
    /// No answer.
    Failed {
        /// Our request id.
        custom_id: String,
        /// `errored`, `expired` or `canceled`.
        status: RequestStatus,
        /// Why.
        error: String,
        /// The provider refused the request as invalid (rather than failing to run it); a batch
        /// whose every line is refused so was refused for its settings.
        refused: bool,
    },
}

/// A provider-neutral stream of result lines.
///
/// `Send`, unlike the provider futures: an open download is kept in the coordinator between steps.
pub type ResultStream = std::pin::Pin<Box<dyn futures_util::Stream<Item = Result<ResultLine, ProviderFault>> + Send>>;

/// One provider's batch API, bound to one `{purpose}_{tier}` config.
///
/// The futures are not `Send`: the provider clients' retry futures hold higher-ranked borrows
/// that rustc cannot prove `Send` for every lifetime, so the coordinator is stepped on the task
/// that owns it (the CLI's and the daemon's main loop), never `tokio::spawn`ed.
#[async_trait::async_trait(?Send)]
pub trait BatchProvider: Send + Sync {
    /// `anthropic` or `openai`.
    fn kind(&self) -> &'static str;
    /// The section whose settings it sends with (its lane's health is judged by [`LaneKey`]).
    fn llm(&self) -> &ResolvedLlm;
    /// Creates a batch of these requests, `custom_id` = request id. Never retried inside.
    async fn create(&self, batch_id: BatchId, requests: &[WorkRequest]) -> ProviderCreate;
    /// Retrieves a batch's state.
    async fn retrieve(&self, provider_batch_id: &str) -> Result<ProviderPoll, ProviderFault>;
    /// Streams a finished batch's results (success and error outputs).
    async fn results(&self, provider_batch_id: &str) -> Result<ResultStream, ProviderFault>;
    /// Looks for a batch we may have created for `batch` (our id in metadata, or creation window
    /// and request count), skipping ids we already track.
    async fn find(
        &self,
        batch: &BatchRow,
        request_ids: &[String],
        known: &[String],
    ) -> Result<Option<String>, ProviderFault>;
    /// Deletes what the provider keeps of an ingested batch (Anthropic: the batch and its
    /// results; OpenAI: the input and output files), so an erased user's text is gone there too.
    async fn delete(&self, batch: &BatchRow) -> Result<(), ProviderFault>;
    /// Asks the provider to cancel a running batch. Its requests end `canceled` and are
    /// re-planned like any canceled request (invariant 5) once the poll sees the batch end.
    async fn cancel(&self, provider_batch_id: &str) -> Result<(), ProviderFault>;
}

/// Why a coordinator step stopped.
#[derive(Debug, thiserror::Error)]
pub enum CoordinatorError {
    /// The store failed; the step can be run again.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A fail point tripped (tests only).
    #[error("fail point {0} tripped")]
    FailPoint(&'static str),
}

/// What one step did, for reports and tests.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct CoordinatorReport {
    /// Batches committed `submitting` and sent.
    pub n_batches_created: u64,
    /// Create calls the provider refused.
    pub n_batches_rejected: u64,
    /// Create calls with an unknown outcome (left for the reconciler).
    pub n_creates_unknown: u64,
    /// `submitting` batches found at the provider and adopted.
    pub n_batches_adopted: u64,
    /// `submitting` batches proven absent; their requests were re-planned.
    pub n_batches_replanned: u64,
    /// Polls made.
    pub n_polls: u64,
    /// Batches found finished.
    pub n_batches_ended: u64,
    /// Batches fully ingested.
    pub n_batches_ingested: u64,
    /// Answers recorded.
    pub n_answers: u64,
    /// Failed results recorded.
    pub n_failures: u64,
    /// Result lines the store refused (each request marked errored with the reason).
    pub n_lines_refused: u64,
    /// Result lines a retried ingest skipped because an earlier pass recorded them (up to the
    /// batch's ingest cursor).
    pub n_lines_skipped: u64,
    /// Batches whose step failed in the store this time (each is taken up again later).
    pub n_batch_errors: u64,
    /// Provider copies deleted after ingest because a user of the batch was erased.
    pub n_provider_deletes: u64,
    /// Batches held back because their lane is paused by a setting fault (requests waiting,
    /// no attempt spent).
    pub n_batches_held: u64,
    /// Results downloads that could not be used (unreadable, cut short, stalled, repeated lines);
    /// each is tried again, and no request spends an attempt.
    pub n_download_failures: u64,
    /// Batches given up (gone at the provider, past their expiry, or their results unusable
    /// after every download): their unanswered requests re-planned without spending an attempt.
    pub n_batches_given_up: u64,
}

impl CoordinatorReport {
    /// Whether anything moved.
    pub fn progressed(&self) -> bool {
        // A batch that failed in the store did not move; it waits for its claim to lapse.
        let moved = CoordinatorReport {
            n_batch_errors: 0,
            ..self.clone()
        };
        moved != CoordinatorReport::default()
    }
}

/// The coordinator.
pub struct BatchCoordinator {
    store: Store,
    clock: Arc<dyn Clock>,
    worker_id: String,
    settings: BatchSettings,
    /// One provider per `{purpose}_{tier}` config key whose lane can be `batch`.
    providers: BTreeMap<String, Arc<dyn BatchProvider>>,
    /// Every lane's breaker: fed by every call made here, read before every create.
    health: Arc<HealthBoard>,
    /// Results downloads still open after a step's share of reading, resumed by the next step.
    downloads: std::sync::Mutex<Vec<ingest::OpenDownload>>,
}

impl BatchCoordinator {
    /// A coordinator over `store`; add providers before stepping.
    pub fn new(store: Store, clock: Arc<dyn Clock>, worker_id: String, settings: BatchSettings) -> Self {
        Self {
            store,
            clock,
            worker_id,
            settings,
            providers: BTreeMap::new(),
            health: Arc::new(HealthBoard::default()),
            downloads: std::sync::Mutex::new(Vec::new()),
        }
    }

    /// The same coordinator feeding and reading `health` (the board the router and the
    /// immediate lane share, so creates and polls count towards routing decisions).
    pub fn with_health(mut self, health: Arc<HealthBoard>) -> Self {
        self.health = health;
        self
    }

    fn lane_key(provider: &dyn BatchProvider) -> LaneKey {
        LaneKey::of(Lane::Batch, provider.llm())
    }

    /// Feeds one call's outcome to the provider's batch lane. Only a create proves the lane
    /// works: a provider whose reads answer while every create fails is not healthy, so a read
    /// that succeeds says nothing, while one that fails counts like any failure.
    fn record(&self, provider: &dyn BatchProvider, outcome: Result<(), &ProviderFault>) {
        self.record_call(provider, outcome, false);
    }

    fn record_create(&self, provider: &dyn BatchProvider, outcome: Result<(), &ProviderFault>) {
        self.record_call(provider, outcome, true);
    }

    fn record_call(&self, provider: &dyn BatchProvider, outcome: Result<(), &ProviderFault>, create: bool) {
        // A failed create is one outage like any other: one 5xx pausing a lane (and with no other
        // way, the whole run) cost more than it saved, and its batch is looked for at once.
        let signal = match outcome {
            Ok(()) if create => HealthSignal::Success,
            Ok(()) => HealthSignal::Neutral,
            Err(fault) => HealthSignal::of_fault(fault),
        };
        self.health.record(&Self::lane_key(provider), &signal, self.clock.now());
    }

    /// When a paused lane may be tried again: its next probe.
    fn next_probe_at(&self, provider: &dyn BatchProvider) -> DateTime<Utc> {
        let now = self.clock.now();
        match self.health.state(&Self::lane_key(provider), now) {
            BreakerState::Open { until, .. } => until,
            _ => now + self.health.policy().cool_down,
        }
    }

    /// Deletes the provider-side data of ingested batches (erasure); batches of a config key this
    /// coordinator has no provider for, or not yet ingested, are left and counted as skipped.
    /// Returns (deleted, skipped, failures with their reasons).
    pub async fn delete_provider_data(&self, batches: &[BatchRow]) -> (u64, u64, Vec<String>) {
        let (mut deleted, mut skipped, mut failures) = (0, 0, Vec::new());
        for batch in batches {
            let provider = self.providers.get(&batch.config_key);
            match (provider, batch.status.as_str(), &batch.provider_batch_id) {
                (Some(provider), "ingested", Some(_)) => match provider.delete(batch).await {
                    Ok(()) => deleted += 1,
                    Err(fault) => failures.push(format!("batch {}: {fault}", batch.id)),
                },
                _ => skipped += 1,
            }
        }
        (deleted, skipped, failures)
    }

    /// Cancels a submitted batch at its provider (an admin's decision); the normal poll then
    /// ingests what finished and re-plans the rest.
    pub async fn cancel(&self, batch: &BatchRow) -> Result<(), String> {
        let provider_batch_id = match (batch.status.as_str(), batch.provider_batch_id.as_deref()) {
            ("submitted", Some(id)) => id,
            (status, _) => {
                return Err(format!(
                    "batch {} is `{status}`; only a submitted batch can be canceled",
                    batch.id
                ));
            }
        };
        let provider = self.providers.get(&batch.config_key).ok_or_else(|| {
            format!(
                "no provider is configured for `{}`; this daemon cannot reach batch {}",
                batch.config_key, batch.id
            )
        })?;
        provider
            .cancel(provider_batch_id)
            .await
            .map_err(|fault| fault.to_string())
    }

    /// Serves batch-lane requests of `config_key` through `provider`.
    pub fn add_provider(&mut self, config_key: &str, provider: Arc<dyn BatchProvider>) {
        self.providers.insert(config_key.to_owned(), provider);
    }

    /// Whether any provider is configured (no batch lane otherwise).
    pub fn has_providers(&self) -> bool {
        !self.providers.is_empty()
    }

    /// Moves every batch forward by at most one state.
    pub async fn step(&self) -> Result<CoordinatorReport, CoordinatorError> {
        let mut report = CoordinatorReport::default();
        self.pack_and_submit(&mut report).await?;
        self.reconcile(&mut report).await?;
        self.poll(&mut report).await?;
        self.ingest(&mut report).await?;
        Ok(report)
    }

    async fn pack_and_submit(&self, report: &mut CoordinatorReport) -> Result<(), CoordinatorError> {
        for (provider_kind, config_key) in self.store.batches().planned_batch_groups().await? {
            let Some(provider) = self.providers.get(&config_key) else {
                tracing::warn!(
                    config_key,
                    provider = provider_kind,
                    "Planned batch requests have no batch provider configured."
                );
                continue;
            };
            let lane = Self::lane_key(provider.as_ref());
            loop {
                let now = self.clock.now();
                // A lane that is not usable (paused by a setting fault, or open after an outage)
                // waits for its probe: its work was moved by the pipeline where the route has
                // another way, and otherwise waits without spending an attempt.
                if !self.health.usable(&lane, now) {
                    break;
                }
                let packed = self
                    .store
                    .batches()
                    .pack_batch(
                        &provider_kind,
                        &config_key,
                        &self.worker_id,
                        now,
                        PackPolicy {
                            max_requests: self.settings.max_requests_per_batch,
                            max_wait: self.settings.pack_max_wait,
                            lease: self.settings.claim_lease,
                        },
                    )
                    .await?;
                let Some(packed) = packed else { break };
                // This create is the half-open probe when the lane waits for one.
                if let Permit::Probe = self.health.acquire(&lane, now) {
                    tracing::info!(lane = %lane.name(), batch_id = %packed.id, "Probing a paused lane with this batch.");
                }
                fail_point!(self, "batch::after_intent");
                let outcome = provider.create(packed.id, &packed.requests).await;
                fail_point!(self, "batch::after_create");
                let now = self.clock.now();
                match outcome {
                    ProviderCreate::Created {
                        provider_batch_id,
                        expires_at,
                    } => {
                        self.record_create(provider.as_ref(), Ok(()));
                        let next_poll_at = now + self.settings.poll_initial;
                        self.store
                            .batches()
                            .mark_batch_submitted(packed.id, &provider_batch_id, expires_at, next_poll_at, now)
                            .await?;
                        report.n_batches_created += 1;
                        tracing::info!(batch_id = %packed.id, provider_batch_id, n_requests = packed.requests.len(), "Batch submitted.");
                    }
                    ProviderCreate::Rejected { fault, .. } if fault.is_setting() => {
                        self.record_create(provider.as_ref(), Err(&fault));
                        let reason = format!("lane {} paused: {fault}", lane.name());
                        let not_before = self.next_probe_at(provider.as_ref());
                        self.store
                            .batches()
                            .hold_batch(packed.id, &reason, not_before, now)
                            .await?;
                        report.n_batches_held += 1;
                        tracing::warn!(batch_id = %packed.id, %reason, %not_before, "A setting fault refused the batch; its requests wait without spending attempts.");
                        break;
                    }
                    ProviderCreate::Rejected {
                        fault,
                        retry_after: Some(wait),
                    } => {
                        self.record_create(provider.as_ref(), Err(&fault));
                        self.store
                            .batches()
                            .replan_batch(
                                packed.id,
                                &format!("create refused for now: {fault}"),
                                now,
                                Some(now + wait),
                            )
                            .await?;
                        report.n_batches_rejected += 1;
                        tracing::warn!(batch_id = %packed.id, error = %fault, "Provider refused the batch for now; its requests wait and go again.");
                        // Try this group again on a later step, not in a tight loop.
                        break;
                    }
                    ProviderCreate::Rejected {
                        fault,
                        retry_after: None,
                    } => {
                        self.record_create(provider.as_ref(), Err(&fault));
                        let error = fault.to_string();
                        self.store.batches().mark_batch_rejected(packed.id, &error, now).await?;
                        report.n_batches_rejected += 1;
                        tracing::warn!(batch_id = %packed.id, error, "Provider refused the batch; its requests count a failed attempt.");
                    }
                    ProviderCreate::Unknown(fault) => {
                        self.record_create(provider.as_ref(), Err(&fault));
                        let error = fault.to_string();
                        self.store.batches().note_create_unknown(packed.id, &error).await?;
                        report.n_creates_unknown += 1;
                        tracing::warn!(batch_id = %packed.id, error, "Batch create outcome unknown; the reconciler will look for it.");
                    }
                }
                fail_point!(self, "batch::after_record");
            }
        }
        Ok(())
    }
}

fn parse_batch_id(id: &str) -> Result<BatchId, CoordinatorError> {
    BatchId::parse(id).map_err(|error| {
        CoordinatorError::Store(StoreError::Corrupt {
            table: "batches",
            detail: error.to_string(),
        })
    })
}
