//! Ingesting an ended batch: its results downloaded once and recorded on each request by
//! `custom_id`, with a cursor on the batch row (invariant 4).
//!
//! Results are final only when the whole body reads as the provider's own format and holds a line
//! for every request the provider counts, each once. Anything else (a line without end, an HTML
//! page, a body that ends early or stalls, a repeated `custom_id`) is a fault of the download, so
//! of the batch: the lines that did read stay recorded, the download is tried again after a
//! back-off, and after [`MAX_DOWNLOADS`] tries the requests still without an answer are re-planned
//! without spending an attempt. Results the provider answers 404 for past a grace are given up the
//! same way.
//!
//! A step reads results for at most [`DOWNLOAD_SLICE`] in all; a download that is not done by then
//! stays open, its batch's claim renewed, and the next step reads on from where it stopped, so a
//! large, slow or endless body is read beside the rest of the pipeline's work, never in front of
//! it. A download still open when its claim would have lapsed is a fault of the batch.

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, Duration, Utc};
use futures_util::StreamExt;
use memsift_core::BatchId;
use memsift_core::status::RequestStatus;
use memsift_llm::{Call, FaultClass, LlmError, ProviderFault};
use memsift_store::{BatchRow, WorkRequest};

use crate::{BatchCoordinator, BatchProvider, CoordinatorError, CoordinatorReport, ResultLine, parse_batch_id};

/// Downloads of one batch's results that may fail before its unanswered requests are re-planned.
pub const MAX_DOWNLOADS: i64 = 3;

/// How long one step reads results, all downloads together, before it goes on with the rest of
/// its work; what is left is read by the next step.
pub const DOWNLOAD_SLICE: std::time::Duration = std::time::Duration::from_secs(2);

/// A results download kept open between steps.
pub(crate) struct OpenDownload {
    batch: BatchRow,
    requests: HashMap<String, WorkRequest>,
    lines: crate::ResultStream,
    pass: Pass,
    seen: HashSet<String>,
    /// When it was opened, on the coordinator's clock: it must end within one claim lease.
    opened_at: DateTime<Utc>,
}

/// Where a step's share of reading left a download.
enum Reading {
    /// The body ended (or broke): judge it.
    Ended,
    /// The slice is used up: read on next step.
    Open,
    /// The store failed mid-way: stop here, resume after the claim lease.
    StoreBroken,
}

/// What one pass over a results body found.
#[derive(Default)]
struct Pass {
    /// Lines of this batch's requests, each `custom_id` once (the cursor counts these).
    n_own: i64,
    /// Lines naming a request that is not in this batch.
    n_foreign: u64,
    /// Lines repeating a `custom_id` already read in this pass.
    n_duplicates: u64,
    /// Lines the provider refused as invalid, and the first such refusal.
    n_refused: u64,
    first_refusal: Option<String>,
    /// Why the body cannot be final (unreadable, too long, stalled).
    fault: Option<String>,
}

impl BatchCoordinator {
    /// Reads every open download and every newly ended batch's results for this step's slice,
    /// finishing those whose body ends and keeping the others open.
    pub(crate) async fn ingest(&self, report: &mut CoordinatorReport) -> Result<(), CoordinatorError> {
        let deadline = tokio::time::Instant::now() + DOWNLOAD_SLICE;
        let mut open = std::mem::take(&mut *self.lock_downloads());
        let now = self.clock.now();
        for batch in self
            .store
            .batches()
            .claim_batches_to_ingest(&self.worker_id, now, self.settings.claim_lease, 10)
            .await?
        {
            // Our own download whose claim lapsed and was taken again: it reads on.
            if open.iter().any(|download| download.batch.id == batch.id) {
                continue;
            }
            match self.open_download(&batch, report).await {
                Ok(Some(download)) => open.push(download),
                Ok(None) => {}
                Err(CoordinatorError::Store(error)) => store_trouble(&batch.id, &error, report),
                Err(error) => return Err(error),
            }
        }
        let mut still_open = Vec::new();
        for mut download in open {
            let batch_id = download.batch.id.clone();
            match self.read_slice(&mut download, deadline, report).await {
                Ok(true) => still_open.push(download),
                Ok(false) => {}
                Err(CoordinatorError::Store(error)) => store_trouble(&batch_id, &error, report),
                Err(error) => {
                    *self.lock_downloads() = still_open;
                    return Err(error);
                }
            }
        }
        *self.lock_downloads() = still_open;
        Ok(())
    }

    /// Results downloads left open by the last step: a run is not idle while one is.
    pub fn downloads_in_flight(&self) -> usize {
        self.lock_downloads().len()
    }

    /// Closes every open download; what was read is recorded up to the batch's cursor, and the
    /// batch is read again once its claim lapses.
    pub fn close_downloads(&self) {
        self.lock_downloads().clear();
    }

    fn lock_downloads(&self) -> std::sync::MutexGuard<'_, Vec<OpenDownload>> {
        self.downloads.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Opens one ended batch's results; `None` when there is nothing to read (no provider for it
    /// any more, or the download failed and was recorded as the batch's fault).
    async fn open_download(
        &self,
        batch: &BatchRow,
        report: &mut CoordinatorReport,
    ) -> Result<Option<OpenDownload>, CoordinatorError> {
        let batch_id = parse_batch_id(&batch.id)?;
        let (Some(provider), Some(provider_batch_id)) = (
            self.providers.get(&batch.config_key),
            batch.provider_batch_id.as_deref(),
        ) else {
            return Ok(None);
        };
        let requests: HashMap<String, WorkRequest> = self
            .store
            .batches()
            .batch_requests(batch_id)
            .await?
            .into_iter()
            .map(|request| (request.id.to_string(), request))
            .collect();
        match provider.results(provider_batch_id).await {
            Ok(lines) => Ok(Some(OpenDownload {
                batch: batch.clone(),
                requests,
                lines,
                pass: Pass::default(),
                seen: HashSet::new(),
                opened_at: self.clock.now(),
            })),
            Err(fault) if matches!(fault.error, LlmError::NotFound { .. }) => {
                self.results_missing(batch, &fault, report).await?;
                Ok(None)
            }
            Err(fault) => {
                self.record(provider.as_ref(), Err(&fault));
                let reason = format!("the results could not be downloaded: {fault}");
                self.download_failed(batch, &reason, report).await?;
                Ok(None)
            }
        }
    }

    /// Reads one download until its body ends or `deadline`; `true` when it stays open.
    async fn read_slice(
        &self,
        download: &mut OpenDownload,
        deadline: tokio::time::Instant,
        report: &mut CoordinatorReport,
    ) -> Result<bool, CoordinatorError> {
        let batch_id = parse_batch_id(&download.batch.id)?;
        match self.record_lines(download, deadline, report).await? {
            Reading::StoreBroken => Ok(false),
            Reading::Ended => {
                self.finish_download(download, report).await?;
                Ok(false)
            }
            Reading::Open => {
                self.store
                    .batches()
                    .advance_ingest_cursor(batch_id, download.pass.n_own)
                    .await?;
                let now = self.clock.now();
                let lease = self.settings.claim_lease;
                if now - download.opened_at >= lease {
                    let reason = format!(
                        "the results were still downloading after {} s, the claim lease, with {} lines read",
                        lease.num_seconds(),
                        download.pass.n_own
                    );
                    self.download_failed(&download.batch, &reason, report).await?;
                    return Ok(false);
                }
                // Still ours to read; another worker that took it after a lapse reads it instead.
                let ours = self
                    .store
                    .batches()
                    .renew_ingest_claim(batch_id, &self.worker_id, now + lease)
                    .await?;
                Ok(ours)
            }
        }
    }

    /// Judges a body that ended: final, or the batch's fault to download again.
    async fn finish_download(
        &self,
        download: &OpenDownload,
        report: &mut CoordinatorReport,
    ) -> Result<(), CoordinatorError> {
        let OpenDownload { batch, pass, .. } = download;
        let batch_id = parse_batch_id(&batch.id)?;
        let Some(provider) = self.providers.get(&batch.config_key) else {
            return Ok(());
        };
        self.store.batches().advance_ingest_cursor(batch_id, pass.n_own).await?;
        if pass.n_foreign > 0 {
            // One line for the lot: a proxy that mixes files can send thousands.
            tracing::warn!(%batch_id, n_foreign = pass.n_foreign, "Result lines named requests that are not in this batch; ignored.");
        }
        if let Some(problem) = final_problem(batch, pass) {
            return self.download_failed(batch, &problem, report).await;
        }
        let n_missing = self.store.batches().finish_ingest(batch_id, self.clock.now()).await?;
        if n_missing > 0 {
            tracing::warn!(%batch_id, n_missing, "Requests without a result line were marked errored and will be re-planned.");
        }
        report.n_batches_ingested += 1;
        self.delete_if_erased(provider.as_ref(), batch, report).await?;
        let every_line_refused = pass.n_refused as i64 == pass.n_own && pass.n_own == batch.n_requests;
        if let Some(refusal) = pass.first_refusal.clone().filter(|_| every_line_refused) {
            self.hold_refused_batch(provider.as_ref(), batch_id, &refusal, report)
                .await?;
        }
        Ok(())
    }

    /// Reads the body until it ends or `deadline`, recording each line of this batch's requests
    /// past the cursor once.
    async fn record_lines(
        &self,
        download: &mut OpenDownload,
        deadline: tokio::time::Instant,
        report: &mut CoordinatorReport,
    ) -> Result<Reading, CoordinatorError> {
        let OpenDownload {
            batch,
            requests,
            lines,
            pass,
            seen,
            ..
        } = download;
        let batch_id = parse_batch_id(&batch.id)?;
        // An earlier pass that stopped (a crash, a lost database, a broken download) recorded
        // every line of this batch's requests up to the cursor; the provider serves the same
        // file again, and those lines are not recorded twice (they still count towards the
        // totals and towards telling a refused batch).
        let resume_after = batch.ingest_cursor.max(0);
        let mut read_any = false;
        loop {
            // Past the deadline, a download still reads one line that is ready, so one that an
            // earlier download's share left no time for moves every step all the same.
            if read_any && tokio::time::Instant::now() >= deadline {
                return Ok(Reading::Open);
            }
            read_any = true;
            let line = match tokio::time::timeout_at(deadline, lines.next()).await {
                Err(_) => return Ok(Reading::Open),
                Ok(None) => return Ok(Reading::Ended),
                Ok(Some(line)) => line,
            };
            let line = match line {
                Ok(line) => line,
                Err(fault) => {
                    pass.fault = Some(format!(
                        "the results are not the provider's format after {} lines: {fault}",
                        pass.n_own
                    ));
                    return Ok(Reading::Ended);
                }
            };
            let (custom_id, answered) = match &line {
                ResultLine::Answer { custom_id, .. } => (custom_id.clone(), true),
                ResultLine::Failed { custom_id, .. } => (custom_id.clone(), false),
            };
            let Some(request) = requests.get(&custom_id) else {
                pass.n_foreign += 1;
                continue;
            };
            if !seen.insert(custom_id) {
                pass.n_duplicates += 1;
                continue;
            }
            pass.n_own += 1;
            if let ResultLine::Failed {
                refused: true, error, ..
            } = &line
            {
                pass.n_refused += 1;
                pass.first_refusal.get_or_insert_with(|| error.clone());
            }
            if pass.n_own <= resume_after {
                report.n_lines_skipped += 1;
                continue;
            }
            let now = self.clock.now();
            let recorded = match line {
                ResultLine::Answer {
                    raw_output,
                    stop_reason,
                    usage,
                    ..
                } => {
                    self.store
                        .requests()
                        .record_answer(request.id, &raw_output, stop_reason.as_deref(), &usage, now)
                        .await
                }
                ResultLine::Failed { status, error, .. } => {
                    self.store
                        .requests()
                        .record_failure(request.id, status, &error, now)
                        .await
                }
            };
            match recorded {
                Ok(true) if answered => report.n_answers += 1,
                Ok(true) => report.n_failures += 1,
                Ok(false) => {}
                // The database is unwell: stop this batch where it is; the claim lapses and a
                // later step resumes from the cursor.
                Err(error) if error.is_transient() => {
                    tracing::warn!(%batch_id, cursor = pass.n_own, error = %error, "Recording a result failed; ingest resumes later.");
                    return Ok(Reading::StoreBroken);
                }
                // This line cannot be stored: record why on its request and go on with the
                // rest. The request is re-planned like any failed attempt.
                Err(error) => {
                    report.n_lines_refused += 1;
                    tracing::warn!(%batch_id, request_id = %request.id, error = %error, "A result line could not be stored; its request is marked errored.");
                    let reason = format!("the result line could not be stored: {error}");
                    if let Err(error) = self
                        .store
                        .requests()
                        .record_failure(request.id, RequestStatus::Errored, &reason, now)
                        .await
                    {
                        tracing::warn!(request_id = %request.id, error = %error, "Could not mark the request errored either; finishing the ingest will.");
                    }
                }
            }
            fail_point!(self, "batch::mid_ingest");
            if pass.n_own % 100 == 0 {
                self.store.batches().advance_ingest_cursor(batch_id, pass.n_own).await?;
            }
        }
    }

    /// A download that cannot be final: counted against the batch and tried again after a
    /// back-off; after [`MAX_DOWNLOADS`] the batch is given up.
    async fn download_failed(
        &self,
        batch: &BatchRow,
        reason: &str,
        report: &mut CoordinatorReport,
    ) -> Result<(), CoordinatorError> {
        let batch_id = parse_batch_id(&batch.id)?;
        let now = self.clock.now();
        let retry_at = now + self.download_backoff(batch.download_failures);
        let n_failures = self
            .store
            .batches()
            .note_download_failure(batch_id, reason, retry_at)
            .await?;
        report.n_download_failures += 1;
        if n_failures >= MAX_DOWNLOADS {
            let reason = format!("{reason}; {n_failures} downloads failed, so the requests without an answer go again");
            return self.give_up(batch_id, &batch.config_key, &reason, report).await;
        }
        tracing::warn!(%batch_id, n_failures, %retry_at, reason, "A results download cannot be used; it is tried again, and no request spends an attempt.");
        Ok(())
    }

    /// The provider answers 404 for the results of a batch it said had ended: once that has
    /// lasted a grace period, the results are gone (purged), and the batch is given up.
    async fn results_missing(
        &self,
        batch: &BatchRow,
        fault: &ProviderFault,
        report: &mut CoordinatorReport,
    ) -> Result<(), CoordinatorError> {
        let batch_id = parse_batch_id(&batch.id)?;
        let now = self.clock.now();
        let reason = format!("the provider does not find this batch's results: {fault}");
        let next_at = now + self.download_backoff(0);
        let since = self
            .store
            .batches()
            .note_batch_missing(batch_id, &reason, now, next_at, self.settings.reconcile_grace)
            .await?;
        if now - since >= self.settings.reconcile_grace {
            let reason = format!("{reason} (since {since}); given up");
            return self.give_up(batch_id, &batch.config_key, &reason, report).await;
        }
        Ok(())
    }

    /// The wait before downloading again: the first poll interval, doubled per failure, capped.
    fn download_backoff(&self, failures: i64) -> Duration {
        let base = self.settings.poll_initial.max(Duration::seconds(1));
        let factor = 1_i32 << failures.clamp(0, 10);
        (base * factor).min(self.settings.poll_max.max(base))
    }

    /// A user of this batch was erased while it was in flight: what the provider keeps of it
    /// (requests, results, files) goes now that nothing more is needed from it.
    async fn delete_if_erased(
        &self,
        provider: &dyn BatchProvider,
        batch: &BatchRow,
        report: &mut CoordinatorReport,
    ) -> Result<(), CoordinatorError> {
        let batch_id = parse_batch_id(&batch.id)?;
        if !self.settings.delete_erased_batches || !self.store.batches().provider_deletion_pending(batch_id).await? {
            return Ok(());
        }
        let mut ingested = batch.clone();
        ingested.status = "ingested".to_owned();
        match provider.delete(&ingested).await {
            Ok(()) => {
                self.store.batches().clear_provider_deletion(batch_id).await?;
                report.n_provider_deletes += 1;
                tracing::info!(%batch_id, "Deleted the provider's copies of a batch that held an erased user's text.");
            }
            Err(error) => {
                tracing::warn!(%batch_id, error = %error, "Could not delete the provider's copies of a batch that held an erased user's text; delete it by hand.");
            }
        }
        Ok(())
    }

    /// Every request of the batch was refused as invalid: a setting fault of the lane. The
    /// refusals are taken back (no attempt spent) and the requests wait for the lane's probe.
    async fn hold_refused_batch(
        &self,
        provider: &dyn BatchProvider,
        batch_id: BatchId,
        refusal: &str,
        report: &mut CoordinatorReport,
    ) -> Result<(), CoordinatorError> {
        let detail = format!("the provider refused every request of the batch, e.g. {refusal}");
        let error = LlmError::InvalidRequest {
            provider: provider.kind(),
            status: 400,
            detail: detail.into(),
        };
        let fault = ProviderFault::classify(error, Call::Create, provider.llm());
        debug_assert_eq!(fault.class, FaultClass::Setting);
        self.record_create(provider, Err(&fault));
        let lane = Self::lane_key(provider);
        let reason = format!("lane {} paused: {fault}", lane.name());
        let not_before = self.next_probe_at(provider);
        let n_held = self
            .store
            .batches()
            .hold_refused_batch(batch_id, &reason, not_before)
            .await?;
        report.n_batches_held += 1;
        tracing::warn!(%batch_id, n_held, %reason, "Every request of a batch was refused; they wait without spending attempts.");
        Ok(())
    }
}

/// Why a fully read body is not final, if it is not: unreadable, a repeated `custom_id`, or fewer
/// lines of this batch's requests than the provider counts.
fn final_problem(batch: &BatchRow, pass: &Pass) -> Option<String> {
    if let Some(fault) = &pass.fault {
        return Some(fault.clone());
    }
    if pass.n_duplicates > 0 {
        return Some(format!(
            "the results repeat a request's line {} times; a provider sends one line per request",
            pass.n_duplicates
        ));
    }
    let counted = batch.n_succeeded + batch.n_errored + batch.n_expired + batch.n_canceled;
    (pass.n_own < counted).then(|| {
        format!(
            "the results hold {} lines of this batch's requests where the provider counts {counted}",
            pass.n_own
        )
    })
}

/// One batch's trouble with the store stays with it: its claim lapses and a later step resumes
/// it, while the other batches of this step are ingested.
fn store_trouble(batch_id: &str, error: &memsift_store::StoreError, report: &mut CoordinatorReport) {
    report.n_batch_errors += 1;
    tracing::warn!(batch_id, error = %error, "Ingesting a batch failed; it is taken up again after its claim lease.");
}
