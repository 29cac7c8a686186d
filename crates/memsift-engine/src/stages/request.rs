//! Turning one unit of a stage's work into a routed, budgeted request row.

use std::collections::HashMap;

use memsift_core::config::ProviderKind;
use memsift_core::request::{RequestBody, RequestContext, RequestSubject};
use memsift_core::status::Purpose;
use memsift_core::{MemoryId, RequestId, UserId};
use memsift_payload::count_tokens;
use memsift_postprocess::StageRequest;
use memsift_postprocess::offline;
use memsift_store::{NewRequest, RunCap, Store};

use crate::app::App;
use crate::budget::{Pending, Reserved, reserve};

/// One user's share of a stage run.
pub(super) struct UserRun<'a> {
    pub(super) user_id: UserId,
    pub(super) external: &'a str,
    pub(super) cap: &'a RunCap,
    /// Budget reservations of this run's requests, written only once the user is planned.
    pub(super) pending: &'a Pending,
}

/// Requests to record, and memories relationship classification covered.
#[derive(Default)]
pub(super) struct Planned {
    pub(super) requests: Vec<NewRequest>,
    pub(super) related: Vec<MemoryId>,
}

pub(super) fn new_run_id() -> String {
    RequestId::new_v7().to_string()
}

/// Routes a stage request for `user_id` and wraps it as a request row; `None` when the user is
/// over their tier's daily budget and `[billing] over_budget = "defer"` (the next run plans it).
/// Over budget with `"heuristic"`, it goes to the offline judge, like extraction.
pub(super) async fn stage_request(
    app: &App,
    purpose: Purpose,
    user_id: UserId,
    request: StageRequest,
    subject: RequestSubject,
    pending: &Pending,
) -> anyhow::Result<Option<NewRequest>> {
    let extra = Extra::default();
    stage_request_with(app, purpose, user_id, request, subject, extra, pending).await
}

/// What a request planned from another request's answer also carries.
#[derive(Default)]
pub(super) struct Extra {
    /// The context snapshot its apply needs.
    pub(super) context: RequestContext,
    /// The request whose answer planned it.
    pub(super) parent_request_id: Option<RequestId>,
}

/// [`stage_request`] with a context snapshot and the request whose answer planned this one. The
/// request reserves its estimated cost like extraction's (`budget::within_budget`), counting the
/// reservations in `pending` that this planning pass has not written yet.
pub(super) async fn stage_request_with(
    app: &App,
    purpose: Purpose,
    user_id: UserId,
    request: StageRequest,
    subject: RequestSubject,
    extra: Extra,
    pending: &Pending,
) -> anyhow::Result<Option<NewRequest>> {
    let tier = app
        .billing
        .tier_of(app.store.users().user_billing_tier(user_id).await?.as_deref());
    let route = app.router.route(purpose, &tier, false, app.clock.now())?;
    let input_tokens = (count_tokens(&request.system) + count_tokens(&request.user_message)) as u64;
    let (route, reserved_usd, allowance) =
        match reserve(app, purpose, user_id, &tier, route, &[input_tokens], pending).await? {
            Reserved::Granted {
                route,
                reservations,
                allowance,
            } => (route, reservations[0], allowance),
            Reserved::Deferred(_) => return Ok(None),
        };
    let prompt = app.prompts.get(purpose.as_str())?;
    let prompt_version = match route.llm.provider {
        ProviderKind::Heuristic => offline::OFFLINE_VERSION.to_owned(),
        _ => prompt.version.clone(),
    };
    Ok(Some(NewRequest {
        id: RequestId::new_v7(),
        purpose,
        user_id,
        segment_id: subject.segment_id,
        chunk_index: 0,
        lane: route.lane,
        config_key: route.config_key.clone(),
        provider: route.llm.provider.as_str().to_owned(),
        model: route.recorded_model(),
        prompt_version,
        context: extra.context,
        request_body: RequestBody {
            system: request.system,
            user_message: request.user_message,
        },
        subject,
        parent_request_id: extra.parent_request_id,
        reserved_usd,
        max_output_tokens: allowance,
    }))
}

/// Unit vectors of a user's active memories (every one embedded first).
pub(super) async fn user_vectors(app: &App, user_id: UserId) -> anyhow::Result<HashMap<MemoryId, Vec<f32>>> {
    let index = app.vectors.fresh_index(&app.store, user_id).await?;
    let model = index.model_id().to_owned();
    let vectors = app.store.vectors().user_memory_vectors(user_id).await?;
    Ok(vectors
        .rows
        .into_iter()
        .filter(|row| row.model_id.as_deref() == Some(model.as_str()))
        .filter_map(|row| {
            let mut vector = row.vector?;
            let norm = vector.iter().map(|x| x * x).sum::<f32>().sqrt();
            if norm > 0.0 {
                vector.iter_mut().for_each(|x| *x /= norm);
            }
            Some((row.memory_id, vector))
        })
        .collect())
}

/// The texts of those of `ids` that are `user_id`'s active memories.
pub(super) async fn texts_of(
    store: &Store,
    user_id: UserId,
    ids: &[MemoryId],
) -> anyhow::Result<HashMap<MemoryId, String>> {
    Ok(store
        .segments()
        .active_memory_texts(user_id, ids)
        .await?
        .into_iter()
        .collect())
}
