//! What every API test shares: a server for one app on a free port, a client holding the token,
//! and ana's conversation with the two memories the heuristic lane extracts from it.

use std::future::Future;

use memsift::api::{ApiToken, serve};
use memsift_engine::app::App;
use reqwest::StatusCode;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::oneshot;

use crate::helpers::t0;

pub(super) const TOKEN: &str = "test-token-0123456789abcdefghijkl";

/// A client for one running server.
pub(super) struct Api {
    pub(super) base: String,
    pub(super) http: reqwest::Client,
}

impl Api {
    pub(super) async fn call(&self, method: &str, path: &str, body: Option<Value>) -> (StatusCode, Value) {
        let request = self
            .http
            .request(method.parse().unwrap(), format!("{}{path}", self.base))
            .bearer_auth(TOKEN);
        let request = match body {
            Some(body) => request.json(&body),
            None => request,
        };
        let response = request.send().await.unwrap();
        let status = response.status();
        let text = response.text().await.unwrap();
        (status, serde_json::from_str(&text).unwrap_or(Value::String(text)))
    }

    pub(super) async fn get(&self, path: &str) -> (StatusCode, Value) {
        self.call("GET", path, None).await
    }

    pub(super) async fn post(&self, path: &str, body: Value) -> (StatusCode, Value) {
        self.call("POST", path, Some(body)).await
    }
}

/// Serves `app` on a free port for the duration of `body`. The server and its pipeline worker
/// run on this task (joined, not spawned), as `memsift serve` runs them.
pub(super) async fn with_api<F, Fut>(app: &App, body: F)
where
    F: FnOnce(Api) -> Fut,
    Fut: Future<Output = ()>,
{
    let _ = rustls::crypto::ring::default_provider().install_default();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let api = Api {
        base: format!("http://{}", listener.local_addr().unwrap()),
        http: reqwest::Client::new(),
    };
    let (stop, stopped) = oneshot::channel::<()>();
    let server = serve(app.clone(), ApiToken::new(TOKEN).unwrap(), listener, async {
        let _ = stopped.await;
    });
    let client = async move {
        body(api).await;
        let _ = stop.send(());
    };
    let (served, ()) = tokio::join!(server, client);
    served.unwrap();
}

pub(super) fn message(conversation: &str, minute: i64, role: &str, content: &str, boundary: bool) -> Value {
    json!({
        "conversation": conversation,
        "role": role,
        "content": content,
        "timestamp": (t0() + chrono::Duration::minutes(minute)).to_rfc3339(),
        "boundary": boundary,
    })
}

pub(super) fn ana_messages() -> Value {
    json!([
        message("c1", 0, "user", "I live in Lisbon and I have a dog named Rex.", false),
        message("c1", 1, "assistant", "Nice! Rex is a good name.", false),
        message("c1", 2, "user", "Thanks!", false),
    ])
}

fn texts(memories: &Value) -> Vec<String> {
    memories
        .as_array()
        .unwrap()
        .iter()
        .map(|memory| memory["text"].as_str().unwrap().to_owned())
        .collect()
}

/// Ingests ana's conversation (left open), extracts through the API and lists her memories.
pub(super) async fn ingest_extract_list(api: &Api) {
    let (status, report) = api.post("/v1/users/ana/messages", ana_messages()).await;
    assert_eq!(status, StatusCode::OK, "{report}");
    assert_eq!(report["n_added"], 3);
    let (status, extracted) = api.post("/v1/users/ana/extract", json!(null)).await;
    assert_eq!(status, StatusCode::OK, "{extracted}");
    // The open segment was closed by the request, not by a boundary or the idle timeout.
    assert_eq!(extracted["n_segments_closed_by_request"], 1);
    assert_eq!(extracted["report"]["n_memories"], 2);
    let (status, listed) = api.get("/v1/users/ana/memories").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        texts(&listed["memories"]),
        vec!["The user lives in Lisbon.", "The user has a dog named Rex."]
    );
    // Lists are JSON arrays, as docs/openapi.json says, not comma-joined strings.
    for memory in listed["memories"].as_array().unwrap() {
        assert!(
            memory["evidence"].as_array().is_some_and(|labels| !labels.is_empty()),
            "{memory}"
        );
        assert!(memory["entities"].is_array(), "{memory}");
    }
}

/// The value of one sample line `name{labels} value` (labels as Prometheus prints them).
pub(super) fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|line| line.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}
