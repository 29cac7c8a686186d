//! A protocol-faithful local provider for tests, benchmarks and the SDK conformance script.
//!
//! It speaks Anthropic's Messages and Message Batches and OpenAI's chat, embeddings, Files and
//! Batches wire formats on one listener, answers with a pluggable [`Responder`], injects seeded,
//! reproducible faults from a [`FaultConfig`], refuses what each provider refuses for a model's
//! context window and output cap (read from the same `[prices]` table memsift uses), and moves
//! batches along on an injectable clock, so tests never sleep. `GET /_sim/counters` (and [`SimHandle::counters`]) is the tests' oracle.

#![deny(missing_docs)]
// Handler helpers return the finished error `Response` as their `Err`; it is moved once, on an
// error path, so boxing it would add an allocation and buy nothing.
#![allow(clippy::result_large_err)]

mod anthropic;
mod bodies;
pub mod config;
mod error;
mod limits;
mod models;
mod openai;
mod records;
pub mod responder;
mod state;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::{DefaultBodyLimit, State};
use axum::routing::{get, post};
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

pub use config::{
    FaultConfig, HttpFault, LostCreateFault, LostCreateMode, MalformedKind, ResultsFault, ResultsFaultKind, SimConfig,
    SimConfigError,
};
pub use openai::DEFAULT_EMBEDDING_DIMENSIONS;
pub use responder::{
    HeuristicResponder, LocomoResponder, Responder, ResponderReply, ResponderRequest, ScriptedResponder,
};
pub use state::{Counters, embed};

use crate::state::{Shared, SharedState};

/// Bodies up to this size are accepted, so a full-size Anthropic batch (256 MB) can be posted.
const MAX_BODY_BYTES: usize = 300 * 1024 * 1024;

fn router(shared: SharedState) -> Router {
    Router::new()
        .route("/v1/messages", post(anthropic::create_message))
        .route(
            "/v1/messages/batches",
            post(anthropic::create_batch).get(anthropic::list_batches),
        )
        .route(
            "/v1/messages/batches/{id}",
            get(anthropic::retrieve_batch).delete(anthropic::delete_batch),
        )
        .route("/v1/messages/batches/{id}/cancel", post(anthropic::cancel_batch))
        .route("/v1/messages/batches/{id}/results", get(anthropic::batch_results))
        .route("/v1/models", get(models::list_models))
        .route("/v1/models/{id}", get(models::retrieve_model))
        .route("/v1/chat/completions", post(openai::chat_completions))
        .route("/v1/embeddings", post(openai::embeddings))
        .route("/v1/files", post(openai::upload_file).get(openai::list_files))
        .route("/v1/files/{id}", get(openai::retrieve_file).delete(openai::delete_file))
        .route("/v1/files/{id}/content", get(openai::file_content))
        .route("/v1/batches", post(openai::create_batch).get(openai::list_batches))
        .route("/v1/batches/{id}", get(openai::retrieve_batch))
        .route("/v1/batches/{id}/cancel", post(openai::cancel_batch))
        .route("/_sim/counters", get(counters))
        .fallback(unknown_path)
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(shared)
}

/// A path neither provider serves (a base URL missing `/v1`, say): 404 in OpenAI's words, after
/// reading the body as the providers do, so the client sees the answer rather than a reset.
async fn unknown_path(
    method: axum::http::Method,
    uri: axum::http::Uri,
    _body: axum::body::Bytes,
) -> axum::response::Response {
    state::openai_error(
        axum::http::StatusCode::NOT_FOUND,
        "invalid_request_error",
        None,
        &format!("Invalid URL ({method} {})", uri.path()),
    )
}

async fn counters(State(shared): State<SharedState>) -> axum::Json<Counters> {
    axum::Json(shared.counters())
}

fn shared_for(listener: &TcpListener, config: SimConfig) -> std::io::Result<SharedState> {
    let base_url = match &config.public_base_url {
        Some(url) => url.trim_end_matches('/').to_owned(),
        None => format!("http://{}", listener.local_addr()?),
    };
    Ok(Arc::new(Shared::new(config, base_url)))
}

async fn serve_shared(
    listener: TcpListener,
    shared: SharedState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(listener, router(shared))
        .with_graceful_shutdown(shutdown)
        .await
}

/// Serves the simulator on `listener` until `shutdown` completes. This is what
/// `memsift sim --listen ADDR --responder R --faults FILE` runs.
pub async fn serve(
    listener: TcpListener,
    config: SimConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let shared = shared_for(&listener, config)?;
    tracing::info!(base_url = %shared.base_url, "simulator listening");
    serve_shared(listener, shared, shutdown).await
}

/// An in-process simulator for tests.
pub struct Sim;

impl Sim {
    /// Starts a simulator on `127.0.0.1:0` in the current tokio runtime.
    pub async fn start(config: SimConfig) -> std::io::Result<SimHandle> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let address = listener.local_addr()?;
        let shared = shared_for(&listener, config)?;
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(serve_shared(listener, Arc::clone(&shared), async move {
            // A dropped handle stops the server too: the receiver then resolves with an error.
            let _ = stopped.await;
        }));
        Ok(SimHandle {
            base_url: shared.base_url.clone(),
            address,
            shared,
            stop: Some(stop),
            task: Some(task),
        })
    }
}

/// A running in-process simulator; dropping it stops the server.
pub struct SimHandle {
    /// `http://127.0.0.1:PORT`: Anthropic's base URL (clients add `/v1/...`).
    pub base_url: String,
    /// The bound address.
    pub address: SocketAddr,
    shared: SharedState,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<std::io::Result<()>>>,
}

impl std::fmt::Debug for SimHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimHandle")
            .field("base_url", &self.base_url)
            .finish_non_exhaustive()
    }
}

impl SimHandle {
    /// OpenAI's base URL: `base_url` + `/v1`.
    pub fn openai_base_url(&self) -> String {
        format!("{}/v1", self.base_url)
    }

    /// What the simulator has seen so far.
    pub fn counters(&self) -> Counters {
        self.shared.counters()
    }

    /// Stops the server and waits for it to finish.
    pub async fn shutdown(mut self) -> std::io::Result<()> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        match self.task.take() {
            Some(task) => task.await.unwrap_or_else(|error| Err(std::io::Error::other(error))),
            None => Ok(()),
        }
    }
}

impl Drop for SimHandle {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}
