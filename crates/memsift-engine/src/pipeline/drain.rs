//! Applying every recorded answer once per step, whichever lane answered it.

use memsift_core::{RequestId, SegmentId};
use memsift_store::ApplyFailure;

use crate::app::App;
use crate::apply::{apply_request_output, apply_stored_output, embed_ahead};
use crate::context::is_environment_fault;
use crate::timings::{Phase, timed};

use super::{CLAIM_BATCH, StepReport};

/// Applies every recorded answer once, whichever lane answered it: the one apply path.
///
/// Each answer is tried at most once per step. One whose apply fails is recorded on its request
/// and tried again on a later step, behind fresher answers (so no number of failing answers can
/// starve the rest), and quarantined as `failed` after `max_apply_attempts`. A failure of the
/// environment stops the drain with the error and counts against no answer.
pub async fn drain_answers(app: &App, report: &mut StepReport) -> anyhow::Result<()> {
    drain_answers_of(app, None, report).await
}

/// [`drain_answers`], only of `segment`'s requests when given.
pub(super) async fn drain_answers_of(
    app: &App,
    segment: Option<SegmentId>,
    report: &mut StepReport,
) -> anyhow::Result<()> {
    let context = app.apply_context();
    let max_apply_attempts = i64::from(app.config.extraction.max_apply_attempts);
    let mut tried = std::collections::HashSet::new();
    loop {
        let page = {
            let _reads = timed(Phase::Reads);
            app.store
                .requests()
                .unapplied_answers_of(segment, CLAIM_BATCH + tried.len() as i64)
                .await?
        };
        let fresh: Vec<RequestId> = page.into_iter().filter(|id| !tried.contains(id)).collect();
        if fresh.is_empty() {
            return Ok(());
        }
        let mut read = embed_ahead(&context, &fresh).await;
        for request_id in fresh {
            tried.insert(request_id);
            let applied = match read.remove(&request_id) {
                Some(stored) => apply_stored_output(&context, stored).await,
                None => apply_request_output(&context, request_id).await,
            };
            let error = match applied {
                Ok(applied) => {
                    report.add_applied(&applied);
                    continue;
                }
                Err(error) if is_environment_fault(&error) => {
                    return Err(error.context(format!(
                        "applying request {request_id} stopped; it and every other recorded answer wait, nothing counted against them"
                    )));
                }
                Err(error) => error,
            };
            let message = format!("{error:#}");
            match app
                .store
                .requests()
                .record_apply_failure(request_id, &message, max_apply_attempts, app.clock.now())
                .await?
            {
                ApplyFailure::WillRetry { attempts } => {
                    report.n_apply_failures += 1;
                    tracing::warn!(%request_id, attempts, error = %message, "Applying an answer failed; it is tried again on a later step.");
                }
                ApplyFailure::Quarantined { attempts } => {
                    report.n_apply_failures += 1;
                    report.n_requests_quarantined += 1;
                    tracing::error!(%request_id, attempts, error = %message, "An answer could not be applied and is quarantined as failed; see `memsift show` and retry its segment after fixing the cause.");
                }
                ApplyFailure::NotPending => {}
            }
        }
    }
}
