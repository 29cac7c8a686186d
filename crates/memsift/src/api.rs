//! The HTTP API (`memsift serve`): ingest turns, close segments, request extraction, read and
//! search a user's memories, admin listings, `/metrics` for Prometheus and `/openapi.json`.
//!
//! Every user route is scoped by its `{user}` path segment: another user's segment or memory is
//! answered as absent (404 or an empty list), never as forbidden, so ids cannot be probed.
//! Every route but `/healthz` and `/metrics` needs `Authorization: Bearer <token>`.
//!
//! Pipeline work (`POST …/extract`) is not `Send` (the provider clients' futures), so handlers,
//! which axum runs on spawned tasks, cannot await it. They send a job over a channel to a
//! [`PipelineWorker`] that owns the `App` and is driven on the task that called [`serve`] (or
//! that mounts the router, like the daemon): no `LocalSet` and no second runtime needed.

use std::future::Future;

use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, QueryRejection};
use axum::extract::{DefaultBodyLimit, Path, Query, Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodRouter, delete, get, post};
use memsift_core::{RequestId, SegmentId};
use memsift_store::StoreError;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};

use memsift_engine::app::App;
use memsift_engine::pipeline::{self, StepReport};
use memsift_engine::search::{SearchError, SearchRequest};

use crate::headers::set_security_headers;
pub use crate::token::{ApiToken, MIN_TOKEN_CHARS, TOKEN_ENV, TokenError};

/// The committed OpenAPI document, served at `GET /openapi.json`.
pub const OPENAPI_JSON: &str = include_str!("../../../docs/openapi.json");

/// Most pipeline steps one `POST …/extract` runs: enough for the heuristic and immediate lanes to
/// plan, answer and apply; batch-lane work then continues in the daemon's loop.
const EXTRACT_MAX_STEPS: usize = 8;

/// Default and largest page of `GET …/memories`.
const DEFAULT_LIMIT: i64 = 100;
const MAX_LIMIT: i64 = 1000;
/// Default `k` of a search.
const DEFAULT_K: usize = 10;

/// An API error: its status and one line saying what to fix, sent as `{"error": "…"}`.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// The input is wrong (400).
    #[error("{0}")]
    BadRequest(String),
    /// No or a wrong bearer token (401).
    #[error("{0}")]
    Unauthorized(String),
    /// Too many wrong bearer tokens from this client (429, with `Retry-After`).
    #[error("too many wrong tokens from this address; try again in {wait_secs} s")]
    Throttled {
        /// Seconds until the client may try again.
        wait_secs: u64,
    },
    /// The named thing does not exist for this user (404).
    #[error("{0}")]
    NotFound(String),
    /// The body is larger than `api.max_body_bytes`, or a message than `ingest.max_message_bytes` (413).
    #[error("{0}")]
    TooLarge(String),
    /// The pipeline worker is not running (503).
    #[error("{0}")]
    Unavailable(String),
    /// A bug or a database failure (500); the cause chain is logged, not sent.
    #[error("{0}")]
    Internal(String),
}

impl ApiError {
    fn status(&self) -> StatusCode {
        match self {
            ApiError::BadRequest(_) => StatusCode::BAD_REQUEST,
            ApiError::Unauthorized(_) => StatusCode::UNAUTHORIZED,
            ApiError::Throttled { .. } => StatusCode::TOO_MANY_REQUESTS,
            ApiError::NotFound(_) => StatusCode::NOT_FOUND,
            ApiError::TooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    fn internal(error: impl Into<anyhow::Error>) -> ApiError {
        let error = error.into();
        tracing::error!(error = format!("{error:#}"), "API request failed.");
        ApiError::Internal("internal error; the server log has the cause".to_owned())
    }
}

impl From<StoreError> for ApiError {
    fn from(error: StoreError) -> Self {
        match error {
            StoreError::NotFound(message) => ApiError::NotFound(message),
            StoreError::Invalid(message) => ApiError::BadRequest(message),
            other => ApiError::internal(other),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response = (self.status(), Json(json!({ "error": self.to_string() }))).into_response();
        if matches!(self, ApiError::Unauthorized(_)) {
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, header::HeaderValue::from_static("Bearer"));
        }
        if let ApiError::Throttled { wait_secs } = self {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, header::HeaderValue::from(wait_secs));
        }
        response
    }
}

type ApiResult<T> = Result<T, ApiError>;

/// A worker job that panicked: the worker logged the panic once and goes on with the next job;
/// the handler answers 500 with this.
#[derive(Debug, thiserror::Error)]
#[error(
    "internal error: the {job} job panicked and was stopped; the server keeps running, its log has the cause, and what the job committed before stays"
)]
struct JobPanicked {
    job: &'static str,
}

impl From<JobPanicked> for ApiError {
    fn from(panicked: JobPanicked) -> Self {
        // Already logged by the worker, so not through `ApiError::internal`, which logs again.
        ApiError::Internal(panicked.to_string())
    }
}

/// Where a worker job sends its result, or that it panicked.
type Reply<T> = oneshot::Sender<Result<T, JobPanicked>>;

/// Work sent from a handler to the [`PipelineWorker`] (it needs the provider clients, whose
/// futures are not `Send`).
enum WorkerJob {
    /// Run pipeline steps now.
    Extract { reply: Reply<anyhow::Result<StepReport>> },
    /// Erase a user, provider-side batch copies included.
    Erase {
        user: String,
        reply: Reply<anyhow::Result<memsift_store::ErasureReceipt>>,
    },
    /// Cancel a submitted batch at its provider.
    Cancel {
        batch_id: memsift_core::BatchId,
        reply: Reply<Result<(), ApiError>>,
    },
}

/// Runs the pipeline work the API asks for, on the task that owns the `App` (its futures are not
/// `Send`). Drive [`PipelineWorker::run`] next to the server; `serve` does.
pub struct PipelineWorker {
    app: App,
    jobs: mpsc::Receiver<WorkerJob>,
}

impl PipelineWorker {
    /// Answers jobs until every router holding the sender is gone. A job that panics is answered
    /// as [`JobPanicked`]; the worker, and the server or daemon driving it, go on.
    pub async fn run(mut self) {
        while let Some(job) = self.jobs.recv().await {
            let app = &self.app;
            match job {
                WorkerJob::Extract { reply } => run_job(app, "extract", reply, extract_steps(app)).await,
                WorkerJob::Erase { user, reply } => {
                    run_job(app, "erase", reply, memsift_engine::erase::erase_user(app, &user)).await;
                }
                WorkerJob::Cancel { batch_id, reply } => {
                    run_job(app, "cancel", reply, cancel_batch_now(app, batch_id)).await;
                }
            }
        }
    }
}

/// Runs one worker job and sends its result, catching a panic the way the daemon's scheduled jobs
/// do: logged once here, answered as [`JobPanicked`].
async fn run_job<T>(app: &App, job: &'static str, reply: Reply<T>, work: impl Future<Output = T>) {
    let work = async {
        memsift_engine::app::worker_fail_point("api::worker_job", &app.worker_id);
        work.await
    };
    let result = crate::panics::catch_panic(work).await.map_err(|panic| {
        tracing::error!(job, panic = %panic, "An API job panicked; it is answered 500 and the worker goes on.");
        JobPanicked { job }
    });
    // The caller may have hung up; the work is committed either way.
    let _ = reply.send(result);
}

async fn extract_steps(app: &App) -> anyhow::Result<StepReport> {
    let mut total = StepReport::default();
    for _ in 0..EXTRACT_MAX_STEPS {
        let step = pipeline::run_once(app).await?;
        total.add(&step);
        if !step.progressed() {
            break;
        }
    }
    Ok(total)
}

#[derive(Clone)]
struct ApiState {
    app: App,
    token: ApiToken,
    jobs: mpsc::Sender<WorkerJob>,
    /// Wrong bearer tokens per client, shared with the admin sign-in.
    throttle: crate::throttle::LoginThrottle,
}

/// Whether a route needs the bearer token.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Access {
    Public,
    Token,
}

/// Every route, once: the router and [`route_list`] (which the OpenAPI test compares with
/// docs/openapi.json) are both built from this table, so they cannot drift apart.
fn routes() -> Vec<(&'static str, &'static str, Access, MethodRouter<ApiState>)> {
    use Access::{Public, Token};
    vec![
        ("GET", "/healthz", Public, get(healthz)),
        // Public only with `[api] metrics_public = true`: see `router`.
        ("GET", "/metrics", Token, get(metrics)),
        ("GET", "/openapi.json", Token, get(openapi)),
        ("POST", "/v1/users/{user}/messages", Token, post(ingest_messages)),
        (
            "POST",
            "/v1/users/{user}/segments/{segment_id}/close",
            Token,
            post(close_segment),
        ),
        ("POST", "/v1/users/{user}/extract", Token, post(extract)),
        ("GET", "/v1/users/{user}/memories", Token, get(list_memories)),
        ("GET", "/v1/users/{user}/memories/search", Token, get(search_memories)),
        ("GET", "/v1/admin/batches", Token, get(admin_batches)),
        ("GET", "/v1/admin/segments", Token, get(admin_segments)),
        ("GET", "/v1/admin/requests", Token, get(admin_requests)),
        ("GET", "/v1/admin/requests/{id}", Token, get(admin_request)),
        ("DELETE", "/v1/users/{user}", Token, delete(erase_user)),
        (
            "POST",
            "/v1/users/{user}/operations/{id}/undo",
            Token,
            post(undo_operation),
        ),
        ("POST", "/v1/admin/segments/{id}/retry", Token, post(retry_segment)),
        ("POST", "/v1/admin/batches/{id}/cancel", Token, post(cancel_batch)),
    ]
}

/// Every route as (method, path), in the table's order.
pub fn route_list() -> Vec<(String, String)> {
    routes()
        .into_iter()
        .map(|(method, path, _, _)| (method.to_owned(), path.to_owned()))
        .chain(
            crate::admin::route_list()
                .into_iter()
                .map(|(method, path)| (method.to_owned(), path.to_owned())),
        )
        .collect()
}

/// The API router over `app`, and the worker that must be driven beside it for `…/extract`.
pub fn router(app: App, token: ApiToken) -> (axum::Router, PipelineWorker) {
    let (jobs_tx, jobs_rx) = mpsc::channel(16);
    let max_body_bytes = usize::try_from(app.config.api.max_body_bytes).unwrap_or(usize::MAX);
    let throttle = crate::throttle::LoginThrottle::default();
    let admin = crate::admin::router_with_throttle(app.clone(), Some(token.clone()), throttle.clone());
    let state = ApiState {
        app: app.clone(),
        token,
        jobs: jobs_tx,
        throttle,
    };
    let mut public = axum::Router::new();
    let mut protected = axum::Router::new();
    for (_, path, access, handler) in routes() {
        // A scraper without the token is the operator's choice, never the default: the totals
        // say how much each stage costs and drops.
        let access = if path == "/metrics" && app.config.api.metrics_public {
            Access::Public
        } else {
            access
        };
        match access {
            Access::Public => public = public.route(path, handler),
            Access::Token => protected = protected.route(path, handler),
        }
    }
    let protected = protected.route_layer(axum::middleware::from_fn_with_state(state.clone(), require_token));
    let router = public
        .merge(protected)
        .fallback(not_found)
        .layer(DefaultBodyLimit::max(max_body_bytes))
        .layer(axum::middleware::map_response(api_headers))
        .with_state(state)
        .merge(admin);
    (router, PipelineWorker { app, jobs: jobs_rx })
}

/// Serves the API on `listener` until `shutdown` completes, driving the pipeline worker on this task.
pub async fn serve(
    app: App,
    token: ApiToken,
    listener: tokio::net::TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let (router, worker) = router(app, token);
    let server = std::pin::pin!(
        // The peer address reaches handlers, so sign-in is throttled per client.
        axum::serve(
            listener,
            router.into_make_service_with_connect_info::<std::net::SocketAddr>(),
        )
        .with_graceful_shutdown(shutdown)
        .into_future()
    );
    let worker = std::pin::pin!(worker.run());
    // The worker only ends when the router's sender is dropped, i.e. after the server stopped.
    tokio::select! {
        result = server => result,
        () = worker => Ok(()),
    }
}

/// The API answers JSON and text only: its policy allows nothing to load or frame it.
async fn api_headers(mut response: Response) -> Response {
    set_security_headers(
        response.headers_mut(),
        header::HeaderValue::from_static("default-src 'none'; frame-ancestors 'none'; base-uri 'none'"),
    );
    response
}

/// The bearer check of every `/v1` route. A wrong token spends one of the client's tries (by
/// address, as the listener saw it; `crate::throttle`, shared with the admin sign-in); a client
/// with none left gets 429 with `Retry-After`, whatever it sends, until its bucket refills, so
/// guessing is as slow here as at `/admin/login`. A missing header is no guess and spends nothing.
async fn require_token(State(state): State<ApiState>, request: Request, next: Next) -> Response {
    let client = request
        .extensions()
        .get::<axum::extract::ConnectInfo<std::net::SocketAddr>>()
        .map(|info| info.0.ip());
    let now = state.app.clock.now();
    if let Err(wait_secs) = state.throttle.check(client, now) {
        return ApiError::Throttled { wait_secs }.into_response();
    }
    let offered = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("Bearer "));
    match offered {
        Some(offered) if state.token.matches(offered.trim()) => next.run(request).await,
        Some(_) => {
            state.throttle.failed(client, now);
            tracing::warn!(client = ?client, "API request with a wrong bearer token.");
            ApiError::Unauthorized(
                "the bearer token is wrong; use the one in MEMSIFT_API_TOKEN or [api] token_file".to_owned(),
            )
            .into_response()
        }
        None => ApiError::Unauthorized("missing `Authorization: Bearer <token>` header".to_owned()).into_response(),
    }
}

async fn not_found() -> ApiError {
    ApiError::NotFound("no such route; see GET /openapi.json".to_owned())
}

async fn healthz() -> Json<Value> {
    Json(json!({ "status": "ok" }))
}

async fn openapi() -> Response {
    ([(header::CONTENT_TYPE, "application/json")], OPENAPI_JSON).into_response()
}

fn body_bytes(body: Result<Bytes, BytesRejection>, limit: u64) -> ApiResult<Bytes> {
    body.map_err(|rejection| {
        if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::TooLarge(format!(
                "the body is larger than {limit} bytes ([api] max_body_bytes); send fewer messages per call"
            ))
        } else {
            ApiError::BadRequest(format!("cannot read the body: {}", rejection.body_text()))
        }
    })
}

fn query<T>(query: Result<Query<T>, QueryRejection>) -> ApiResult<T> {
    query
        .map(|Query(value)| value)
        .map_err(|rejection| ApiError::BadRequest(rejection.body_text()))
}

/// The canonical form of a `{user}` path segment (or `user` query value), so every spelling of
/// one id reaches one user; an id that cannot be stored faithfully is a 400 naming it.
fn check_user(field: &str, user: &str) -> ApiResult<String> {
    memsift_core::message::canonical_user_id(user)
        .map_err(|error| ApiError::BadRequest(format!("{field} `{}`: {error}", user.escape_debug())))
}

/// [`check_user`] of an optional `user` query value.
fn check_user_query(user: Option<&str>) -> ApiResult<Option<String>> {
    user.map(|user| check_user("query `user`", user)).transpose()
}

async fn ingest_messages(
    State(state): State<ApiState>,
    Path(user): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Response> {
    let user = check_user("path segment `user`", &user)?;
    let body = body_bytes(body, state.app.config.api.max_body_bytes)?;
    let messages = crate::import::parse_api_messages(&user, &body, state.app.config.ingest.max_message_len()).map_err(
        |error| match error {
            crate::import::BodyError::Invalid(message) => ApiError::BadRequest(message),
            crate::import::BodyError::TooLarge(message) => ApiError::TooLarge(message),
        },
    )?;
    let app = &state.app;
    let report = app
        .store
        .messages()
        .ingest(&messages, app.config.idle_timeout(), app.clock.now(), &|_| {})
        .await?;
    memsift_engine::ingest::warn_of_changes(&report, &format!("user {user}"));
    Ok((StatusCode::OK, Json(json!(report))).into_response())
}

async fn close_segment(
    State(state): State<ApiState>,
    Path((user, segment_id)): Path<(String, String)>,
) -> ApiResult<Json<Value>> {
    let user = check_user("path segment `user`", &user)?;
    let id = SegmentId::parse(segment_id.trim()).map_err(|_| {
        ApiError::BadRequest(format!(
            "path segment `segment_id`: `{segment_id}` is not a segment id; list them with GET /v1/admin/segments"
        ))
    })?;
    let closed = state
        .app
        .store
        .messages()
        .close_user_segment(&user, id, state.app.clock.now())
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("user `{user}` has no segment {id}")))?;
    Ok(Json(json!(closed)))
}

async fn extract(State(state): State<ApiState>, Path(user): Path<String>) -> ApiResult<Json<Value>> {
    let user = check_user("path segment `user`", &user)?;
    let app = &state.app;
    // Closing is plain store work and scoped to this user; the steps that follow run every
    // user's due work, which is what the daemon's loop would do next anyway.
    let n_closed = app.store.messages().close_user_segments(&user, app.clock.now()).await?;
    let (reply, answer) = oneshot::channel();
    let unavailable = || ApiError::Unavailable("the pipeline worker is not running; retry later".to_owned());
    state
        .jobs
        .send(WorkerJob::Extract { reply })
        .await
        .map_err(|_| unavailable())?;
    let report = answer.await.map_err(|_| unavailable())??.map_err(ApiError::internal)?;
    Ok(Json(
        json!({ "n_segments_closed_by_request": n_closed, "report": report }),
    ))
}

#[derive(Deserialize)]
struct MemoriesQuery {
    limit: Option<i64>,
}

async fn list_memories(
    State(state): State<ApiState>,
    Path(user): Path<String>,
    params: Result<Query<MemoriesQuery>, QueryRejection>,
) -> ApiResult<Json<Value>> {
    let user = check_user("path segment `user`", &user)?;
    let params = query(params)?;
    let limit = params.limit.unwrap_or(DEFAULT_LIMIT);
    if !(1..=MAX_LIMIT).contains(&limit) {
        return Err(ApiError::BadRequest(format!(
            "query `limit`: {limit} is out of range; use 1 to {MAX_LIMIT}"
        )));
    }
    let app = &state.app;
    let rows = app.store.listing().list_memories(&user, Some(limit)).await?;
    let ids: Vec<String> = rows.iter().map(|row| row.id.clone()).collect();
    app.store
        .listing()
        .record_memory_access(&user, &ids, app.clock.now())
        .await?;
    Ok(Json(json!({ "memories": rows })))
}

#[derive(Debug, Deserialize)]
struct SearchQuery {
    q: Option<String>,
    k: Option<usize>,
    budget_tokens: Option<usize>,
    include_turns: Option<bool>,
    since: Option<String>,
    until: Option<String>,
}

/// An RFC 3339 query parameter, or a 400 naming it.
fn query_time(name: &str, value: Option<&str>) -> ApiResult<Option<chrono::DateTime<chrono::Utc>>> {
    value
        .map(|text| {
            chrono::DateTime::parse_from_rfc3339(text.trim())
                .map(|at| at.with_timezone(&chrono::Utc))
                .map_err(|_| {
                    ApiError::BadRequest(format!(
                        "query `{name}`: `{text}` is not a time; use RFC 3339 such as 2026-03-01T10:00:00Z"
                    ))
                })
        })
        .transpose()
}

async fn search_memories(
    State(state): State<ApiState>,
    Path(user): Path<String>,
    params: Result<Query<SearchQuery>, QueryRejection>,
) -> ApiResult<Json<Value>> {
    let user = check_user("path segment `user`", &user)?;
    let params = query(params)?;
    if params.q.as_deref().is_none_or(|q| q.trim().is_empty()) {
        return Err(ApiError::BadRequest(
            "query `q` is missing or empty; give the text to search for".to_owned(),
        ));
    }
    let k = params.k.unwrap_or(DEFAULT_K);
    if !(1..=memsift_engine::search::MAX_K).contains(&k) {
        return Err(ApiError::BadRequest(format!(
            "query `k`: {k} is out of range; use 1 to {}",
            memsift_engine::search::MAX_K
        )));
    }
    let request = SearchRequest {
        k,
        budget_tokens: params.budget_tokens,
        include_turns: params.include_turns.unwrap_or(false),
        since: query_time("since", params.since.as_deref())?,
        until: query_time("until", params.until.as_deref())?,
        ..SearchRequest::new(user, params.q.unwrap_or_default())
    };
    match memsift_engine::search::search(&state.app, &request).await {
        Ok(answer) => Ok(Json(serde_json::to_value(answer).map_err(ApiError::internal)?)),
        Err(error) => match error.downcast_ref::<SearchError>() {
            Some(invalid) => Err(ApiError::BadRequest(format!("search: {invalid}"))),
            None => Err(ApiError::internal(error)),
        },
    }
}

#[derive(Deserialize)]
struct AdminQuery {
    user: Option<String>,
    status: Option<String>,
    limit: Option<i64>,
}

async fn admin_batches(
    State(state): State<ApiState>,
    params: Result<Query<AdminQuery>, QueryRejection>,
) -> ApiResult<Json<Value>> {
    let params = query(params)?;
    let rows = state
        .app
        .store
        .batches()
        .list_batches(params.status.as_deref(), params.limit)
        .await?;
    Ok(Json(json!({ "batches": rows })))
}

async fn admin_segments(
    State(state): State<ApiState>,
    params: Result<Query<AdminQuery>, QueryRejection>,
) -> ApiResult<Json<Value>> {
    let params = query(params)?;
    let rows = state
        .app
        .store
        .listing()
        .list_segments(
            check_user_query(params.user.as_deref())?.as_deref(),
            params.status.as_deref(),
            params.limit,
        )
        .await?;
    Ok(Json(json!({ "segments": rows })))
}

async fn admin_requests(
    State(state): State<ApiState>,
    params: Result<Query<AdminQuery>, QueryRejection>,
) -> ApiResult<Json<Value>> {
    let params = query(params)?;
    let rows = state
        .app
        .store
        .listing()
        .list_requests(
            check_user_query(params.user.as_deref())?.as_deref(),
            params.status.as_deref(),
            params.limit,
        )
        .await?;
    Ok(Json(json!({ "requests": rows })))
}

async fn admin_request(State(state): State<ApiState>, Path(id): Path<String>) -> ApiResult<Json<Value>> {
    let id = RequestId::parse(id.trim()).map_err(|_| {
        ApiError::BadRequest(format!(
            "path segment `id`: `{id}` is not a request id; list them with GET /v1/admin/requests"
        ))
    })?;
    let detail = state.app.store.listing().request_detail(id).await?;
    Ok(Json(json!(detail)))
}

async fn metrics(State(state): State<ApiState>) -> ApiResult<Response> {
    let snapshot = state.app.store.listing().metrics_snapshot().await?;
    let lanes = state.app.store.lanes().lane_health().await?;
    let embedder = crate::metrics::ProcessState::of(&state.app);
    let text = crate::metrics::render(&snapshot, &lanes, embedder).map_err(ApiError::internal)?;
    Ok(([(header::CONTENT_TYPE, prometheus::TEXT_FORMAT)], text).into_response())
}

/// `?confirm=erase`: erasure cannot be undone, so the caller says so in the request.
#[derive(Debug, Deserialize)]
struct EraseQuery {
    confirm: Option<String>,
}

async fn erase_user(
    State(state): State<ApiState>,
    Path(user): Path<String>,
    Query(query): Query<EraseQuery>,
) -> ApiResult<Json<Value>> {
    let user = check_user("path segment `user`", &user)?;
    if query.confirm.as_deref() != Some("erase") {
        return Err(ApiError::BadRequest(format!(
            "erasing `{user}` removes their memories and conversations for good; add ?confirm=erase to do it"
        )));
    }
    let (reply, answer) = oneshot::channel();
    let unavailable = || ApiError::Unavailable("the pipeline worker is not running; retry later".to_owned());
    state
        .jobs
        .send(WorkerJob::Erase { user, reply })
        .await
        .map_err(|_| unavailable())?;
    let receipt = answer
        .await
        .map_err(|_| unavailable())??
        .map_err(|error| match error.downcast::<StoreError>() {
            Ok(store_error) => ApiError::from(store_error),
            Err(other) => ApiError::internal(other),
        })?;
    Ok(Json(json!(receipt)))
}

async fn undo_operation(
    State(state): State<ApiState>,
    Path((user, id)): Path<(String, String)>,
) -> ApiResult<Json<Value>> {
    let user = check_user("path segment `user`", &user)?;
    let id = memsift_core::OperationId::parse(id.trim())
        .map_err(|_| ApiError::BadRequest(format!("path segment `id`: `{id}` is not an operation id")))?;
    let undone = state
        .app
        .store
        .memories()
        .undo_operation(&user, id, state.app.clock.now())
        .await?;
    Ok(Json(json!(undone)))
}

async fn retry_segment(State(state): State<ApiState>, Path(id): Path<String>) -> ApiResult<Json<Value>> {
    let segment_id = memsift_core::SegmentId::parse(id.trim()).map_err(|_| {
        ApiError::BadRequest(format!(
            "path segment `id`: `{id}` is not a segment id; list them with GET /v1/admin/segments"
        ))
    })?;
    if !state.app.store.segments().retry_segment(segment_id).await? {
        return Err(ApiError::NotFound(format!(
            "no failed or dead segment {segment_id}; only those can be retried"
        )));
    }
    Ok(Json(
        json!({ "segment_id": segment_id.to_string(), "status": "closed" }),
    ))
}

async fn cancel_batch_now(app: &App, batch_id: memsift_core::BatchId) -> Result<(), ApiError> {
    let batch = app
        .store
        .batches()
        .batch(batch_id)
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("no batch {batch_id}; list them with GET /v1/admin/batches")))?;
    let coordinator = app
        .coordinator
        .as_ref()
        .ok_or_else(|| ApiError::BadRequest("no batch lane is configured on this daemon".to_owned()))?;
    coordinator.cancel(&batch).await.map_err(ApiError::BadRequest)
}

async fn cancel_batch(State(state): State<ApiState>, Path(id): Path<String>) -> ApiResult<Json<Value>> {
    let batch_id = memsift_core::BatchId::parse(id.trim()).map_err(|_| {
        ApiError::BadRequest(format!(
            "path segment `id`: `{id}` is not a batch id; list them with GET /v1/admin/batches"
        ))
    })?;
    let (reply, answer) = oneshot::channel();
    let unavailable = || ApiError::Unavailable("the pipeline worker is not running; retry later".to_owned());
    state
        .jobs
        .send(WorkerJob::Cancel { batch_id, reply })
        .await
        .map_err(|_| unavailable())?;
    answer.await.map_err(|_| unavailable())???;
    Ok(Json(json!({
        "batch_id": batch_id.to_string(),
        "cancel_requested": true,
        "next": "the next poll ingests what finished and re-plans the rest"
    })))
}
