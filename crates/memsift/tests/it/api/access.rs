//! Who may call what: every route but the health check (and metrics, when the operator makes them
//! public) needs the bearer token, every
//! answer carries the security headers, a user's routes never reach another user's ids, and the
//! server will not start on a missing or short token.

use memsift::api::route_list;
use reqwest::StatusCode;
use serde_json::{Value, json};

use super::client::{TOKEN, ingest_extract_list, message, with_api};
use crate::helpers::TestApp;

#[tokio::test]
async fn every_route_but_health_needs_the_bearer_token() {
    let test = TestApp::sqlite().await;
    let clock = test.clock.clone();
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
            // `/metrics` too: it was public and its totals say what each stage costs and drops.
            let public = path == "/healthz";
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
            // A try comes back every 12 s: one wrong token per route stays within the budget.
            clock.advance(chrono::Duration::seconds(12));
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

/// 300 wrong bearer tokens from one client: the first 5 are answered 401, every later request
/// 429 with `Retry-After` (the right token too), the admin sign-in shares the budget, a request
/// without the header spends nothing, and 12 s of the application's clock let one try back.
#[tokio::test]
async fn wrong_bearer_tokens_from_one_client_are_throttled_like_the_sign_in() {
    let test = TestApp::sqlite().await;
    let clock = test.clock.clone();
    with_api(&test.app, |api| async move {
        let send = |token: Option<&'static str>| {
            let request = api.http.get(format!("{}/v1/admin/segments", api.base));
            let request = match token {
                Some(token) => request.bearer_auth(token),
                None => request,
            };
            async move { request.send().await.unwrap() }
        };
        let wrong = "test-token-0123456789abcdefghijkk";
        let burst = memsift::throttle::BURST as usize;
        let mut statuses = std::collections::BTreeMap::<u16, usize>::new();
        for _ in 0..300 {
            *statuses.entry(send(Some(wrong)).await.status().as_u16()).or_default() += 1;
        }
        assert_eq!(statuses, [(401, burst), (429, 300 - burst)].into_iter().collect());
        let throttled = send(Some(TOKEN)).await;
        assert_eq!(throttled.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(throttled.headers()["retry-after"], "12");
        let body: Value = throttled.json().await.unwrap();
        assert_eq!(
            body["error"],
            "too many wrong tokens from this address; try again in 12 s"
        );
        let sign_in = api
            .http
            .post(format!("{}/admin/login", api.base))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(format!("token={TOKEN}"))
            .send()
            .await
            .unwrap();
        assert_eq!(
            sign_in.status(),
            StatusCode::TOO_MANY_REQUESTS,
            "one budget for every door"
        );
        let page = api
            .http
            .get(format!("{}/admin/segments", api.base))
            .bearer_auth(TOKEN)
            .send()
            .await
            .unwrap();
        assert_eq!(
            page.status(),
            StatusCode::TOO_MANY_REQUESTS,
            "the pages' bearer header too"
        );
        assert_eq!(page.headers()["retry-after"], "12");

        clock.advance(chrono::Duration::seconds(12));
        assert_eq!(send(None).await.status(), StatusCode::UNAUTHORIZED);
        assert_eq!(
            send(Some(TOKEN)).await.status(),
            StatusCode::OK,
            "no header spent nothing"
        );
        assert_eq!(
            send(Some(wrong)).await.status(),
            StatusCode::UNAUTHORIZED,
            "the try that came back"
        );
        assert_eq!(send(Some(wrong)).await.status(), StatusCode::TOO_MANY_REQUESTS);
    })
    .await;
    test.finish().await;
}

#[tokio::test]
async fn wrong_bearer_tokens_on_the_admin_pages_spend_the_same_budget() {
    // A wrong bearer header on an admin page was answered 401 without a count: a third door
    // where the token could be guessed at full speed.
    let test = TestApp::sqlite().await;
    with_api(&test.app, |api| async move {
        let page = |token: &'static str| {
            let request = api.http.get(format!("{}/admin/segments", api.base)).bearer_auth(token);
            async move { request.send().await.unwrap().status() }
        };
        let wrong = "test-token-0123456789abcdefghijkk";
        let burst = memsift::throttle::BURST as usize;
        let mut statuses = std::collections::BTreeMap::<u16, usize>::new();
        for _ in 0..burst + 20 {
            *statuses.entry(page(wrong).await.as_u16()).or_default() += 1;
        }
        assert_eq!(statuses, [(401, burst), (429, 20)].into_iter().collect());
        // Spent on the pages, the budget is spent for the API as well.
        let api_call = api
            .http
            .get(format!("{}/v1/admin/segments", api.base))
            .bearer_auth(TOKEN)
            .send()
            .await
            .unwrap();
        assert_eq!(api_call.status(), StatusCode::TOO_MANY_REQUESTS);
    })
    .await;
    test.finish().await;
}

#[tokio::test]
async fn metrics_need_the_token_unless_metrics_public_is_set() {
    let test = TestApp::sqlite().await;
    let mut open = test.second_daemon("scraped");
    open.config.api.metrics_public = true;
    with_api(&open, |api| async move {
        let anonymous = api.http.get(format!("{}/metrics", api.base)).send().await.unwrap();
        assert_eq!(anonymous.status(), StatusCode::OK);
        assert!(anonymous.text().await.unwrap().contains("memsift_up 1"));
    })
    .await;
    with_api(&test.app, |api| async move {
        let anonymous = api.http.get(format!("{}/metrics", api.base)).send().await.unwrap();
        assert_eq!(anonymous.status(), StatusCode::UNAUTHORIZED);
        let scraped = api
            .http
            .get(format!("{}/metrics", api.base))
            .bearer_auth(TOKEN)
            .send()
            .await
            .unwrap();
        assert_eq!(scraped.status(), StatusCode::OK);
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
        let ana_segment = store.listing().list_segments(Some("ana"), None, None).await.unwrap()[0]
            .id
            .clone();
        let bo_segment = store.listing().list_segments(Some("bo"), None, None).await.unwrap()[0]
            .id
            .clone();

        let (status, body) = api
            .post(&format!("/v1/users/bo/segments/{ana_segment}/close"), json!(null))
            .await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
        let (status, body) = api
            .post(&format!("/v1/users/ana/segments/{bo_segment}/close"), json!(null))
            .await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
        // bo's segment is still open: ana's request did not touch it.
        let bo_rows = store.listing().list_segments(Some("bo"), None, None).await.unwrap();
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
        let ana = store.listing().list_memories("ana", None).await.unwrap();
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
