//! The HTTP API over a real store: auth, ingest → extract → read, user scoping, search with
//! access counts, body limits, field-naming errors, metrics and the OpenAPI route list.

use std::future::Future;

use chrono::Duration;
use memsift::api::{ApiToken, route_list, serve};
use memsift::app::App;
use reqwest::StatusCode;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::oneshot;

use crate::helpers::{TestApp, t0};

const TOKEN: &str = "test-token-0123456789abcdefghijkl";

/// A client for one running server.
struct Api {
    base: String,
    http: reqwest::Client,
}

impl Api {
    async fn call(&self, method: &str, path: &str, body: Option<Value>) -> (StatusCode, Value) {
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

    async fn get(&self, path: &str) -> (StatusCode, Value) {
        self.call("GET", path, None).await
    }

    async fn post(&self, path: &str, body: Value) -> (StatusCode, Value) {
        self.call("POST", path, Some(body)).await
    }
}

/// Serves `app` on a free port for the duration of `body`. The server and its pipeline worker
/// run on this task (joined, not spawned), as `memsift serve` runs them.
async fn with_api<F, Fut>(app: &App, body: F)
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

fn message(conversation: &str, minute: i64, role: &str, content: &str, boundary: bool) -> Value {
    json!({
        "conversation": conversation,
        "role": role,
        "content": content,
        "timestamp": (t0() + chrono::Duration::minutes(minute)).to_rfc3339(),
        "boundary": boundary,
    })
}

fn ana_messages() -> Value {
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
async fn ingest_extract_list(api: &Api) {
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

#[tokio::test]
async fn every_route_but_health_and_metrics_needs_the_bearer_token() {
    let test = TestApp::sqlite().await;
    with_api(&test.app, |api| async move {
        for (method, path) in route_list() {
            let path = path
                .replace("{user}", "ana")
                .replace("{segment_id}", "0190c0de-0000-7000-8000-000000000000")
                .replace("{id}", "0190c0de-0000-7000-8000-000000000000");
            let anonymous = api
                .http
                .request(method.parse().unwrap(), format!("{}{path}", api.base))
                .send()
                .await
                .unwrap();
            if path == "/admin/login" || path == "/admin/logout" {
                // Signing in and out take no session by design; the admin tests cover both.
                continue;
            }
            let public = path == "/healthz" || path == "/metrics";
            if public {
                assert_eq!(anonymous.status(), StatusCode::OK, "{method} {path}");
                continue;
            }
            assert_eq!(anonymous.status(), StatusCode::UNAUTHORIZED, "{method} {path}");
            if path.starts_with("/admin") {
                // The HTML pages answer with the sign-in form, which posts the token in its body.
                let page = anonymous.text().await.unwrap();
                assert!(page.contains("action=\"/admin/login\""), "{page}");
            } else {
                let body: Value = anonymous.json().await.unwrap();
                assert!(body["error"].as_str().unwrap().contains("Bearer"), "{body}");
            }
            let wrong = api
                .http
                .request(method.parse().unwrap(), format!("{}{path}", api.base))
                .bearer_auth("test-token-0123456789abcdefghijkk")
                .send()
                .await
                .unwrap();
            assert_eq!(wrong.status(), StatusCode::UNAUTHORIZED, "{method} {path}");
        }
        // With the token, a protected route answers.
        assert_eq!(api.get("/v1/admin/segments").await.0, StatusCode::OK);
    })
    .await;
    test.finish().await;
}

#[tokio::test]
async fn api_answers_are_never_cached_framed_or_sniffed() {
    let test = TestApp::sqlite().await;
    with_api(&test.app, |api| async move {
        let answers = [
            api.http.get(format!("{}/healthz", api.base)).send().await.unwrap(),
            api.http
                .get(format!("{}/v1/admin/segments", api.base))
                .send()
                .await
                .unwrap(),
            api.http
                .get(format!("{}/v1/admin/segments", api.base))
                .bearer_auth(TOKEN)
                .send()
                .await
                .unwrap(),
            api.http
                .get(format!("{}/v1/nothing-here", api.base))
                .send()
                .await
                .unwrap(),
        ];
        for answer in answers {
            let headers = answer.headers();
            assert_eq!(headers["cache-control"], "no-store", "{headers:?}");
            assert_eq!(headers["x-frame-options"], "DENY", "{headers:?}");
            assert_eq!(headers["referrer-policy"], "no-referrer", "{headers:?}");
            assert_eq!(headers["x-content-type-options"], "nosniff", "{headers:?}");
            let policy = headers["content-security-policy"].to_str().unwrap();
            assert!(
                policy.contains("default-src 'none'") && policy.contains("frame-ancestors 'none'"),
                "{policy}"
            );
        }
    })
    .await;
    test.finish().await;
}

#[tokio::test]
async fn ingest_extract_and_list_memories_on_sqlite() {
    let test = TestApp::sqlite().await;
    with_api(&test.app, |api| async move { ingest_extract_list(&api).await }).await;
    test.finish().await;
}

#[tokio::test]
async fn ingest_extract_and_list_memories_on_postgres() {
    let test = TestApp::postgres().await;
    let store = test.app.store.clone();
    with_api(&test.app, |api| async move {
        ingest_extract_list(&api).await;
        // The access update, the scoped close and the metrics sums (BIGINT casts) on PostgreSQL.
        let (status, found) = api.get("/v1/users/ana/memories/search?q=dog%20named%20Rex&k=1").await;
        assert_eq!(status, StatusCode::OK, "{found}");
        let rex = found["results"][0]["id"].as_str().unwrap().to_owned();
        assert_eq!(store.memory_access(&rex).await.unwrap().unwrap().0, 2);
        let segment = store.list_segments(Some("ana"), None, None).await.unwrap()[0]
            .id
            .clone();
        let (status, _) = api
            .post(&format!("/v1/users/bo/segments/{segment}/close"), json!(null))
            .await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        let text = api
            .http
            .get(format!("{}/metrics", api.base))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        assert_eq!(sample(&text, "memsift_memories_active"), Some(2.0), "{text}");
        assert_eq!(
            sample(&text, "memsift_segments{status=\"extracted\"}"),
            Some(1.0),
            "{text}"
        );
        assert!(
            sample(&text, "memsift_tokens_total{kind=\"input\",purpose=\"extraction\"}").is_some(),
            "{text}"
        );
    })
    .await;
    test.finish().await;
}

#[tokio::test]
async fn another_users_ids_are_not_found_through_any_user_route() {
    let test = TestApp::sqlite().await;
    let store = test.app.store.clone();
    with_api(&test.app, |api| async move {
        ingest_extract_list(&api).await;
        // bo has an open segment of his own, so his routes are live, not merely unknown.
        let (status, _) = api
            .post(
                "/v1/users/bo/messages",
                json!([message("c9", 0, "user", "hello", false)]),
            )
            .await;
        assert_eq!(status, StatusCode::OK);
        let ana_segment = store.list_segments(Some("ana"), None, None).await.unwrap()[0]
            .id
            .clone();
        let bo_segment = store.list_segments(Some("bo"), None, None).await.unwrap()[0].id.clone();

        let (status, body) = api
            .post(&format!("/v1/users/bo/segments/{ana_segment}/close"), json!(null))
            .await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
        let (status, body) = api
            .post(&format!("/v1/users/ana/segments/{bo_segment}/close"), json!(null))
            .await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
        // bo's segment is still open: ana's request did not touch it.
        let bo_rows = store.list_segments(Some("bo"), None, None).await.unwrap();
        assert_eq!(bo_rows[0].status, "open");

        let (status, listed) = api.get("/v1/users/bo/memories").await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(listed["memories"], json!([]));
        let (status, found) = api.get("/v1/users/bo/memories/search?q=Lisbon%20dog%20Rex").await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(found["results"], json!([]));
        let (status, found) = api.get("/v1/users/nobody/memories/search?q=Lisbon").await;
        assert_eq!((status, found["results"].clone()), (StatusCode::OK, json!([])));

        // Closing bo's own segment works, and only through bo.
        let (status, closed) = api
            .post(&format!("/v1/users/bo/segments/{bo_segment}/close"), json!(null))
            .await;
        assert_eq!(status, StatusCode::OK, "{closed}");
        assert_eq!(
            (closed["status"].as_str(), closed["closed_now"].as_bool()),
            (Some("closed"), Some(true))
        );
        // Nobody read ana's memories through bo's routes.
        let ana = store.list_memories("ana", None).await.unwrap();
        for memory in ana {
            assert_eq!(
                store.memory_access(&memory.id).await.unwrap().unwrap().0,
                1,
                "{}",
                memory.text
            );
        }
    })
    .await;
    test.finish().await;
}

#[tokio::test]
async fn search_returns_the_matching_memory_first_and_counts_the_access() {
    let test = TestApp::sqlite().await;
    let store = test.app.store.clone();
    let now = t0();
    with_api(&test.app, |api| async move {
        ingest_extract_list(&api).await;
        let memories = store.list_memories("ana", None).await.unwrap();
        let rex = memories.iter().find(|m| m.text.contains("Rex")).unwrap().id.clone();
        let lisbon = memories.iter().find(|m| m.text.contains("Lisbon")).unwrap().id.clone();
        let before = store.memory_access(&rex).await.unwrap().unwrap().0;

        let (status, found) = api.get("/v1/users/ana/memories/search?q=dog%20named%20Rex&k=1").await;
        assert_eq!(status, StatusCode::OK, "{found}");
        let results = found["results"].as_array().unwrap();
        assert_eq!(results.len(), 1);
        assert_eq!(results[0]["id"], json!(rex));
        assert_eq!(results[0]["text"], json!("The user has a dog named Rex."));
        assert!(results[0]["score"].as_f64().unwrap() > 0.0);

        let (access_count, last_accessed_at) = store.memory_access(&rex).await.unwrap().unwrap();
        assert_eq!(access_count, before + 1);
        assert_eq!(last_accessed_at, Some(now));
        // k = 1 returned only Rex: Lisbon was not read by the search.
        assert_eq!(store.memory_access(&lisbon).await.unwrap().unwrap().0, before);

        let (status, error) = api.get("/v1/users/ana/memories/search?k=3").await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert!(error["error"].as_str().unwrap().contains("`q`"), "{error}");
        let (status, error) = api.get("/v1/users/ana/memories?limit=zero").await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert!(error["error"].as_str().unwrap().contains("limit"), "{error}");
    })
    .await;
    test.finish().await;
}

#[tokio::test]
async fn a_body_over_the_limit_is_refused_with_413() {
    let test = TestApp::sqlite().await;
    let mut app = test.app.clone();
    app.config.api.max_body_bytes = 2048;
    let store = app.store.clone();
    with_api(&app, |api| async move {
        let big = "x".repeat(4096);
        let (status, error) = api
            .post("/v1/users/ana/messages", json!([message("c1", 0, "user", &big, false)]))
            .await;
        assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{error}");
        assert!(error["error"].as_str().unwrap().contains("max_body_bytes"), "{error}");
        // Under the limit the same route works.
        let (status, _) = api
            .post(
                "/v1/users/ana/messages",
                json!([message("c1", 0, "user", "small", false)]),
            )
            .await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(store.count_rows("messages").await.unwrap(), 1);
    })
    .await;
    test.finish().await;
}

#[tokio::test]
async fn a_bad_message_is_refused_with_400_naming_the_field_and_nothing_is_stored() {
    let test = TestApp::sqlite().await;
    let store = test.app.store.clone();
    with_api(&test.app, |api| async move {
        let mut messages = ana_messages();
        messages[1]["timestamp"] = json!("yesterday");
        let (status, error) = api.post("/v1/users/ana/messages", messages).await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert_eq!(
            error["error"],
            json!(
                "message #2: field `timestamp`: `yesterday` is not a time; use RFC 3339 such as 2026-03-01T10:00:00Z"
            )
        );
        let mut messages = ana_messages();
        messages[0]["user"] = json!("bo");
        let (status, error) = api.post("/v1/users/ana/messages", messages).await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert!(
            error["error"].as_str().unwrap().starts_with("message #1: field `user`"),
            "{error}"
        );
        let (status, error) = api
            .post(
                "/v1/users/ana/messages",
                json!([{"conversation": "c1", "role": "user"}]),
            )
            .await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert!(
            error["error"].as_str().unwrap().contains("missing field `content`"),
            "{error}"
        );
        let (status, error) = api.post("/v1/users/ana/segments/not-an-id/close", json!(null)).await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert!(error["error"].as_str().unwrap().contains("`segment_id`"), "{error}");
        assert_eq!(store.count_rows("messages").await.unwrap(), 0);
    })
    .await;
    test.finish().await;
}

/// The value of one sample line `name{labels} value` (labels as Prometheus prints them).
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|line| line.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

#[tokio::test]
async fn metrics_serve_every_documented_name_with_store_values() {
    let test = TestApp::sqlite().await;
    with_api(&test.app, |api| async move {
        ingest_extract_list(&api).await;
        let response = api.http.get(format!("{}/metrics", api.base)).send().await.unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        assert!(
            response.headers()["content-type"]
                .to_str()
                .unwrap()
                .starts_with("text/plain")
        );
        let text = response.text().await.unwrap();
        let documented =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/metrics.md")).unwrap();
        for name in memsift::metrics::METRIC_NAMES {
            assert!(
                text.contains(&format!("# TYPE {name} ")),
                "{name} missing from /metrics:\n{text}"
            );
            assert!(
                documented.contains(&format!("`{name}`")),
                "{name} missing from docs/metrics.md"
            );
        }
        assert_eq!(
            sample(&text, "memsift_segments{status=\"extracted\"}"),
            Some(1.0),
            "{text}"
        );
        assert_eq!(sample(&text, "memsift_segments{status=\"dead\"}"), Some(0.0), "{text}");
        assert_eq!(sample(&text, "memsift_dead_letters"), Some(0.0));
        // Every drop reason is present (zero when unseen); no batch has ended on this lane.
        assert_eq!(
            sample(&text, "memsift_items_dropped_by_reason{reason=\"duplicate_by_vector\"}"),
            Some(0.0),
            "{text}"
        );
        assert_eq!(
            sample(&text, "memsift_batch_latency_seconds_count"),
            Some(0.0),
            "{text}"
        );
        assert_eq!(sample(&text, "memsift_memories_active"), Some(2.0));
        assert_eq!(
            sample(
                &text,
                "memsift_requests{lane=\"heuristic\",purpose=\"extraction\",status=\"applied\"}"
            ),
            Some(1.0),
            "{text}"
        );
        assert!(sample(&text, "memsift_items_dropped_total").is_some());
        // The heuristic lane spends nothing.
        assert_eq!(
            sample(&text, "memsift_cost_usd_total{purpose=\"extraction\"}"),
            Some(0.0),
            "{text}"
        );
        assert_eq!(sample(&text, "memsift_up"), Some(1.0));
    })
    .await;
    test.finish().await;
}

#[tokio::test]
async fn the_openapi_document_lists_exactly_the_served_routes() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/openapi.json");
    let document: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let mut documented: Vec<(String, String)> = document["paths"]
        .as_object()
        .unwrap()
        .iter()
        .flat_map(|(path, item)| {
            item.as_object()
                .unwrap()
                .keys()
                .map(|method| (method.to_uppercase(), path.clone()))
                .collect::<Vec<_>>()
        })
        .collect();
    documented.sort();
    let mut served = route_list();
    served.sort();
    assert_eq!(served, documented, "docs/openapi.json and api::routes() differ");

    // What the server sends at /openapi.json is the committed file.
    let test = TestApp::sqlite().await;
    with_api(&test.app, |api| async move {
        let (status, served_document) = api.get("/openapi.json").await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(served_document, document);
        let (status, error) = api.get("/v1/nothing-here").await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        assert!(error["error"].is_string());
    })
    .await;
    test.finish().await;
}

#[test]
fn serve_without_a_token_refuses_to_start_and_says_where_to_put_one() {
    let home = tempfile::tempdir().unwrap();
    let database = format!("sqlite://{}", home.path().join("m.db").display());
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_memsift"))
        .env_clear()
        .env("HOME", home.path())
        .args(["--database", &database, "serve", "--listen", "127.0.0.1:0"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(
        String::from_utf8(output.stderr).unwrap(),
        "error: no API token: set MEMSIFT_API_TOKEN or [api] token_file in the configuration\n"
    );
}

#[test]
fn serve_and_the_daemon_refuse_a_short_token_in_one_line() {
    let home = tempfile::tempdir().unwrap();
    let database = format!("sqlite://{}", home.path().join("m.db").display());
    for command in [&["serve", "--listen", "127.0.0.1:0"][..], &["daemon"][..]] {
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_memsift"))
            .env_clear()
            .env("HOME", home.path())
            .env("MEMSIFT_API_TOKEN", "hunter2-hunter2-hunter2")
            .env("MEMSIFT_MODEL_DIR", home.path().join("no-model"))
            .args(["--database", &database])
            .args(command)
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(1), "{command:?}");
        assert_eq!(
            String::from_utf8(output.stderr).unwrap(),
            "error: the API token from MEMSIFT_API_TOKEN is 23 characters; use at least 32 (e.g. `openssl rand -hex 32`)\n",
            "{command:?}"
        );
    }
}

#[tokio::test]
async fn erase_undo_and_retry_through_the_api_are_confirmed_scoped_and_reported() {
    let test = TestApp::sqlite().await;
    let (_, lisbon) = test
        .app
        .store
        .insert_test_memory("ana", "Ana lives in Lisbon.")
        .await
        .unwrap();
    test.app
        .store
        .insert_test_memory("bo", "Bo plays chess.")
        .await
        .unwrap();
    let revised = test
        .app
        .store
        .revise_memory(
            "ana",
            lisbon,
            &memsift_store::Revision::Expire,
            "she moved",
            test.app.clock.now(),
        )
        .await
        .unwrap();
    let dead = {
        test.import(
            "c.jsonl",
            &crate::helpers::line("ana", "c1", 0, "user", "I like tea.", true),
        )
        .await
        .unwrap();
        let segment = test
            .app
            .store
            .list_segments(Some("ana"), None, None)
            .await
            .unwrap()
            .remove(0);
        let claimed = test
            .app
            .store
            .claim_segment(segment.id.parse().unwrap(), "w", test.app.clock.now())
            .await
            .unwrap();
        test.app
            .store
            .fail_segment(claimed.id, "broken prompt", 0, Duration::zero(), test.app.clock.now())
            .await
            .unwrap();
        segment.id
    };
    let operation = revised.operation_id.to_string();
    with_api(&test.app, |api| async move {
        // Undo is scoped by user: bo cannot undo ana's operation.
        let (status, _) = api
            .post(&format!("/v1/users/bo/operations/{operation}/undo"), json!({}))
            .await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        let (status, undone) = api
            .post(&format!("/v1/users/ana/operations/{operation}/undo"), json!({}))
            .await;
        assert_eq!(status, StatusCode::OK, "{undone}");
        let (status, again) = api
            .post(&format!("/v1/users/ana/operations/{operation}/undo"), json!({}))
            .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{again}");
        assert!(again["error"].as_str().unwrap().contains("already undone"), "{again}");

        let (status, retried) = api.post(&format!("/v1/admin/segments/{dead}/retry"), json!({})).await;
        assert_eq!((status, retried["status"].as_str()), (StatusCode::OK, Some("closed")));
        let (status, _) = api.post(&format!("/v1/admin/segments/{dead}/retry"), json!({})).await;
        assert_eq!(
            status,
            StatusCode::NOT_FOUND,
            "only failed or dead segments are retried"
        );

        let (status, refused) = api.call("DELETE", "/v1/users/ana", None).await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert!(
            refused["error"].as_str().unwrap().contains("confirm=erase"),
            "{refused}"
        );
        let (status, receipt) = api.call("DELETE", "/v1/users/ana?confirm=erase", None).await;
        assert_eq!(status, StatusCode::OK, "{receipt}");
        assert_eq!(
            (receipt["n_memories"].as_i64(), receipt["n_segments"].as_i64()),
            (Some(1), Some(1))
        );
        let (_, memories) = api.get("/v1/users/ana/memories").await;
        assert_eq!(memories["memories"].as_array().map(Vec::len), Some(0), "{memories}");
        let (_, bo) = api.get("/v1/users/bo/memories").await;
        assert_eq!(bo["memories"].as_array().map(Vec::len), Some(1), "{bo}");
        let (status, _) = api.call("DELETE", "/v1/users/nobody?confirm=erase", None).await;
        assert_eq!(status, StatusCode::NOT_FOUND);
    })
    .await;
    test.finish().await;
}

#[tokio::test]
async fn an_admin_cancel_reaches_the_provider_and_the_canceled_requests_are_planned_again() {
    let test = TestApp::with_batch_sim(
        memsift_store::testing::TestDb::sqlite().await,
        memsift_sim::FaultConfig::default(),
    )
    .await;
    test.import(
        "c.jsonl",
        &crate::helpers::line("ana", "c1", 0, "user", "I live in Lisbon.", true),
    )
    .await
    .unwrap();
    // One step plans and submits; the simulator's clock has not moved, so the batch is running.
    memsift::pipeline::run_once(&test.app).await.unwrap();
    let batch = test
        .app
        .store
        .list_batches(Some("submitted"), None)
        .await
        .unwrap()
        .remove(0);
    let batch_id = batch.id.clone();
    with_api(&test.app, |api| async move {
        let (status, body) = api
            .post(&format!("/v1/admin/batches/{batch_id}/cancel"), json!({}))
            .await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let (status, _) = api
            .post(
                "/v1/admin/batches/0190c0de-0000-7000-8000-000000000000/cancel",
                json!({}),
            )
            .await;
        assert_eq!(status, StatusCode::NOT_FOUND);
    })
    .await;
    assert_eq!(
        test.sim().counters().per_endpoint.get("anthropic.batches.cancel"),
        Some(&1)
    );
    // The protocol takes it from here: the canceled request gets a new attempt and is applied.
    let report = memsift::pipeline::run_until_idle(&test.app).await.unwrap();
    assert_eq!(report.n_segments_extracted, 1, "{report:?}");
    let requests = test.app.store.list_requests(Some("ana"), None, None).await.unwrap();
    let statuses: Vec<&str> = requests.iter().map(|row| row.status.as_str()).collect();
    assert!(
        statuses.contains(&"canceled") && statuses.contains(&"applied"),
        "{statuses:?}"
    );
    // An ingested batch cannot be canceled; the error says why.
    let ended = test.app.store.batch(batch.id.parse().unwrap()).await.unwrap().unwrap();
    let error = test.app.coordinator.as_ref().unwrap().cancel(&ended).await.unwrap_err();
    assert!(error.contains("only a submitted batch"), "{error}");
    test.finish().await;
}

#[tokio::test]
async fn a_message_over_the_size_limit_is_refused_with_413_naming_it_and_nothing_is_stored() {
    let test = TestApp::sqlite().await;
    let store = test.app.store.clone();
    let limit = test.app.config.ingest.max_message_len();
    // Two-byte characters: exactly at the limit, and one byte over it.
    let at_limit = "é".repeat(limit / 2);
    let over_limit = format!("{at_limit}a");
    with_api(&test.app, |api| async move {
        let (status, error) = api
            .post(
                "/v1/users/ana/messages",
                json!([
                    message("c1", 0, "user", "I live in Lisbon.", false),
                    message("c1", 1, "user", &over_limit, false),
                ]),
            )
            .await;
        assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{error}");
        assert_eq!(
            error["error"],
            json!(format!(
                "message #2: field `content` is {} bytes, over the limit of {limit} bytes ([ingest] max_message_bytes); split the message",
                limit + 1
            ))
        );
        assert_eq!(store.count_rows("messages").await.unwrap(), 0);
        let (status, report) = api
            .post(
                "/v1/users/ana/messages",
                json!([message("c1", 0, "user", &at_limit, false)]),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "{report}");
        assert_eq!(store.count_rows("messages").await.unwrap(), 1);
    })
    .await;
    test.finish().await;
}

/// A one-word DNA sequence of `n_bytes`: one BPE piece, the input that made counting quadratic.
fn dna(n_bytes: usize) -> String {
    "GATTACA".chars().cycle().take(n_bytes).collect()
}

#[tokio::test]
async fn the_api_answers_while_a_one_megabyte_message_is_being_planned() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, Mutex};

    // Fail points are process-wide: the scenario lock keeps other fail point tests from clearing ours.
    let scenario = fail::FailScenario::setup();
    let test = TestApp::sqlite().await;
    // A worker id of its own, so the fail point below holds this app's planning only.
    let app = test.second_daemon("planning-worker");
    let (reached_tx, mut reached) = tokio::sync::mpsc::unbounded_channel::<()>();
    let (release, released) = std::sync::mpsc::channel::<()>();
    let released = Mutex::new(released);
    let held_while_the_api_answered = Arc::new(AtomicBool::new(false));
    let held = Arc::clone(&held_while_the_api_answered);
    fail::cfg_callback("pipeline::chunking::planning-worker", move || {
        let _ = reached_tx.send(());
        // Chunking holds here until the test has used the API. The bound only keeps a broken
        // build (chunking on the runtime's thread, where the test cannot run to release it) from
        // hanging: then the flag stays false and the test fails.
        let answered = released
            .lock()
            .unwrap()
            .recv_timeout(std::time::Duration::from_secs(30))
            .is_ok();
        held.store(answered, Ordering::SeqCst);
    })
    .unwrap();
    let limit = app.config.ingest.max_message_len();
    with_api(&app, |api| async move {
        let (status, report) = api
            .post(
                "/v1/users/ana/messages",
                json!([message("c1", 0, "user", &dna(limit), true)]),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "{report}");
        let extract = tokio::spawn(
            api.http
                .post(format!("{}/v1/users/ana/extract", api.base))
                .bearer_auth(TOKEN)
                .send(),
        );
        reached.recv().await.expect("planning reaches the chunking step");
        // Chunking the megabyte is in progress on its blocking thread: the API still answers.
        let (status, health) = api.get("/healthz").await;
        assert_eq!((status, health), (StatusCode::OK, json!({ "status": "ok" })));
        let (status, segments) = api.get("/v1/admin/segments?user=ana").await;
        assert_eq!(status, StatusCode::OK, "{segments}");
        assert_eq!(segments["segments"].as_array().map(Vec::len), Some(1), "{segments}");
        release.send(()).unwrap();
        let response = extract.await.unwrap().unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["report"]["n_segments_planned"], 1, "{body}");
        assert_eq!(body["report"]["n_segments_failed"], 0, "{body}");
    })
    .await;
    fail::remove("pipeline::chunking::planning-worker");
    scenario.teardown();
    assert!(
        held_while_the_api_answered.load(Ordering::SeqCst),
        "the API answered only after chunking gave the runtime back"
    );
    test.finish().await;
}

/// Log lines written while the guard lives, on this thread (where a `#[tokio::test]` runs every task).
struct CapturedLogs {
    lines: std::sync::Arc<std::sync::Mutex<Vec<u8>>>,
    _guard: tracing::subscriber::DefaultGuard,
}

impl CapturedLogs {
    fn start() -> CapturedLogs {
        let lines = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let sink = std::sync::Arc::clone(&lines);
        let subscriber = tracing_subscriber::fmt()
            .with_ansi(false)
            .with_writer(move || LogSink(std::sync::Arc::clone(&sink)))
            .finish();
        CapturedLogs {
            lines,
            _guard: tracing::subscriber::set_default(subscriber),
        }
    }

    fn count(&self, needle: &str) -> usize {
        String::from_utf8_lossy(&self.lines.lock().unwrap())
            .lines()
            .filter(|line| line.contains(needle))
            .count()
    }
}

struct LogSink(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for LogSink {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test]
async fn a_panicking_worker_job_is_answered_500_logged_once_and_the_server_goes_on() {
    let scenario = fail::FailScenario::setup();
    let test = TestApp::sqlite().await;
    let app = test.second_daemon("panicking-worker");
    let logs = CapturedLogs::start();
    fail::cfg("api::worker_job::panicking-worker", "panic(injected by the test)").unwrap();
    with_api(&app, |api| async move {
        let jobs = [
            ("extract", "POST", "/v1/users/ana/extract".to_owned()),
            ("erase", "DELETE", "/v1/users/ana?confirm=erase".to_owned()),
            (
                "cancel",
                "POST",
                "/v1/admin/batches/0190c0de-0000-7000-8000-000000000000/cancel".to_owned(),
            ),
        ];
        for (job, method, path) in &jobs {
            let (status, error) = api.call(method, path, Some(json!({}))).await;
            assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR, "{job}: {error}");
            assert!(
                error["error"]
                    .as_str()
                    .unwrap()
                    .starts_with(&format!("internal error: the {job} job panicked and was stopped;")),
                "{job}: {error}"
            );
            let (status, _) = api.get("/healthz").await;
            assert_eq!(status, StatusCode::OK, "after the {job} job panicked");
        }
        fail::remove("api::worker_job::panicking-worker");
        // The same worker takes the next jobs as if nothing had happened.
        ingest_extract_list(&api).await;
    })
    .await;
    scenario.teardown();
    assert_eq!(logs.count("An API job panicked"), 3, "one line per panic");
    assert_eq!(logs.count("API request failed"), 0, "the handler does not log it again");
    test.finish().await;
}
