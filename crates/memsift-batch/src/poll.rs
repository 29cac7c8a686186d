//! Reconciling batches whose create outcome is unknown, and polling submitted batches until they
//! end, are found gone (404 past a grace) or outlive their expiry (past a grace): every batch ends.

use chrono::{DateTime, Duration, Utc};
use memsift_core::BatchId;
use memsift_llm::{HealthSignal, LlmError};
use memsift_store::BatchRow;

use crate::{BatchCoordinator, CoordinatorError, CoordinatorReport, ProviderPoll, parse_batch_id};

impl BatchCoordinator {
    pub(crate) async fn reconcile(&self, report: &mut CoordinatorReport) -> Result<(), CoordinatorError> {
        let now = self.clock.now();
        for batch in self
            .store
            .batches()
            .batches_to_reconcile(now, self.settings.reconcile_grace)
            .await?
        {
            let batch_id = parse_batch_id(&batch.id)?;
            let Some(provider) = self.providers.get(&batch.config_key) else {
                continue;
            };
            let known = self.store.batches().known_provider_batch_ids(&batch.provider).await?;
            let request_ids: Vec<String> = self
                .store
                .batches()
                .batch_requests(batch_id)
                .await?
                .into_iter()
                .map(|request| request.id.to_string())
                .collect();
            let found = provider.find(&batch, &request_ids, &known).await;
            self.record(provider.as_ref(), found.as_ref().map(|_| ()));
            match found {
                Ok(Some(provider_batch_id)) => {
                    let next_poll_at = now + self.settings.poll_initial;
                    self.store
                        .batches()
                        .mark_batch_submitted(batch_id, &provider_batch_id, None, next_poll_at, now)
                        .await?;
                    report.n_batches_adopted += 1;
                    tracing::info!(%batch_id, provider_batch_id, "Reconciler adopted a batch created before a crash or lost reply.");
                }
                Ok(None) => {
                    let miss = self
                        .store
                        .batches()
                        .reconcile_miss(
                            batch_id,
                            now,
                            self.settings.reconcile_grace,
                            self.settings.reconcile_recheck,
                        )
                        .await?;
                    // Two misses apart (a recheck after a create without an outcome, a grace
                    // after a crash): a list that lags behind a create has had time to catch up,
                    // so the batch was never created.
                    if miss.misses >= 2 && miss.create_was_called {
                        // The provider failed the create and made no batch: a fault of the
                        // provider, never of the requests. The lane's breaker hears it (a failed
                        // probe keeps it open longer), and the requests wait for its next probe
                        // unspent, unless the pipeline moves them to the route's other way.
                        let fault = "a batch create that failed left no batch at the provider";
                        let lane = Self::lane_key(provider.as_ref());
                        // Unless a create has succeeded since (the provider is back), the lane
                        // stays shut, so the work goes the route's other way or waits for a probe.
                        if !matches!(self.health.state(&lane, now), memsift_llm::BreakerState::Closed { .. }) {
                            self.health
                                .record(&lane, &memsift_llm::HealthSignal::Trip(fault.to_owned()), now);
                        }
                        // Its requests go again at once on a lane still usable, else at its probe.
                        let not_before =
                            (!self.health.usable(&lane, now)).then(|| self.next_probe_at(provider.as_ref()));
                        self.store
                            .batches().replan_batch(
                                batch_id,
                                &format!("{fault} (two reconcile passes found none); requests re-planned without spending an attempt"),
                                now,
                                not_before,
                            )
                            .await?;
                        report.n_batches_replanned += 1;
                    } else if miss.misses >= 2 {
                        // The process died between the intent and the call: nothing was tried.
                        self.store
                            .batches()
                            .replan_batch(
                                batch_id,
                                "no provider batch found in two reconcile passes; requests re-planned",
                                now,
                                None,
                            )
                            .await?;
                        report.n_batches_replanned += 1;
                    }
                }
                Err(fault) => {
                    tracing::warn!(%batch_id, error = %fault, "Reconciler could not list provider batches; will retry.")
                }
            }
        }
        Ok(())
    }

    pub(crate) async fn poll(&self, report: &mut CoordinatorReport) -> Result<(), CoordinatorError> {
        let now = self.clock.now();
        for batch in self
            .store
            .batches()
            .claim_batches_to_poll(now, self.settings.claim_lease, 100)
            .await?
        {
            let batch_id = parse_batch_id(&batch.id)?;
            let (Some(provider), Some(provider_batch_id)) = (
                self.providers.get(&batch.config_key),
                batch.provider_batch_id.as_deref(),
            ) else {
                continue;
            };
            report.n_polls += 1;
            fail_point!(self, "batch::before_poll");
            let polled = provider.retrieve(provider_batch_id).await;
            self.record(provider.as_ref(), polled.as_ref().map(|_| ()));
            let now = self.clock.now();
            let next = now + self.poll_interval(batch.n_polls + 1);
            match polled {
                Ok(ProviderPoll::Ended(counts)) => {
                    self.store.batches().mark_batch_ended(batch_id, counts, now).await?;
                    report.n_batches_ended += 1;
                }
                Ok(ProviderPoll::Running) => match overdue(&batch, now, self.settings.reconcile_grace) {
                    // Past its expiry and a grace: the provider will not end it. What it may still
                    // hold is not waited for; its requests go again elsewhere.
                    Some(expired_at) => {
                        if let Err(fault) = provider.cancel(provider_batch_id).await {
                            tracing::warn!(%batch_id, error = %fault, "Could not cancel a batch past its expiry; it is given up all the same.");
                        }
                        let reason = format!(
                            "the provider still reports the batch in progress after its expiry at {expired_at}; canceled and given up"
                        );
                        self.give_up(batch_id, &batch.config_key, &reason, report).await?;
                    }
                    None => self.store.batches().snooze_batch(batch_id, next, None).await?,
                },
                Err(fault) if matches!(fault.error, LlmError::NotFound { .. }) => {
                    // A 404 right after create is the provider catching up; one that lasts past a
                    // grace is a batch the provider no longer has.
                    let reason = format!("the provider does not find this batch: {fault}");
                    let since = self
                        .store
                        .batches()
                        .note_batch_missing(batch_id, &reason, now, next, self.settings.reconcile_grace)
                        .await?;
                    if now - since >= self.settings.reconcile_grace {
                        let reason = format!("{reason} (since {since}); given up");
                        self.give_up(batch_id, &batch.config_key, &reason, report).await?;
                    }
                }
                Err(fault) => {
                    // A transient failure is a snooze too.
                    self.store
                        .batches()
                        .snooze_batch(batch_id, next, Some(&fault.to_string()))
                        .await?;
                }
            }
        }
        Ok(())
    }

    /// A batch that will give nothing more: what it recorded stays, its other requests are
    /// re-planned under their ids without spending an attempt (no fault of their content). When
    /// they have now lost `max_batch_losses` batches, the cause lasts (a proxy answering for the
    /// provider, a provider that drops this account's batches): the lane is paused as a setting
    /// fault, so no further batch is created and billed until a probe or an operator clears it.
    pub(crate) async fn give_up(
        &self,
        batch_id: BatchId,
        config_key: &str,
        reason: &str,
        report: &mut CoordinatorReport,
    ) -> Result<(), CoordinatorError> {
        let given_up = self
            .store
            .batches()
            .give_up_batch(batch_id, reason, self.clock.now())
            .await?;
        report.n_batches_given_up += 1;
        tracing::warn!(%batch_id, n_replanned = given_up.n_replanned, reason, "A batch was given up; its unanswered requests go again without spending an attempt.");
        if given_up.most_losses >= self.settings.max_batch_losses
            && let Some(provider) = self.providers.get(config_key)
        {
            let signal = HealthSignal::Setting {
                reason: format!(
                    "the provider lost {} batches in a row carrying the same requests; the last: {reason}",
                    given_up.most_losses
                ),
                fix: Some(
                    "check the endpoint and anything between memsift and it (a proxy answering in the provider's place); \
                     the requests wait unspent, and the lane is probed again after its cool-down"
                        .to_owned(),
                ),
            };
            self.health
                .record(&Self::lane_key(provider.as_ref()), &signal, self.clock.now());
        }
        Ok(())
    }

    /// Growing interval with ±10 % jitter: initial × 1.5^n, capped.
    pub(crate) fn poll_interval(&self, n_polls: i64) -> Duration {
        let base = self.settings.poll_initial.num_milliseconds() as f64 * 1.5_f64.powi(n_polls.clamp(0, 30) as i32);
        let capped = base.min(self.settings.poll_max.num_milliseconds() as f64);
        let jitter = 0.9 + rand::random::<f64>() * 0.2;
        Duration::milliseconds((capped * jitter) as i64)
    }
}

/// When a batch still running is past its provider's expiry by more than `grace`: that expiry.
fn overdue(batch: &BatchRow, now: DateTime<Utc>, grace: Duration) -> Option<DateTime<Utc>> {
    batch.provider_expires_at.filter(|expires| now >= *expires + grace)
}
