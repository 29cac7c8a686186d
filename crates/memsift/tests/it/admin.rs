//! The admin pages against a running server, read by headless Chromium as an admin would: signed
//! in once through the form, with a session cookie, and no token in any address.

use std::path::{Path, PathBuf};
use std::process::Command;

use axum::response::Html;
use memsift_sim::FaultConfig;
use memsift_store::testing::TestDb;
use reqwest::StatusCode;
use reqwest::header::{HeaderMap, LOCATION, SET_COOKIE};

use crate::helpers::{TestApp, line};

const TOKEN: &str = "admin-test-token-0123456789abcdef";
/// Debian's Chromium: `MEMSIFT_CHROMIUM`, else `chromium` on PATH, installed with apt-get when
/// missing (as `.ci/run` does), so the test fails for a real reason, never skips.
fn chromium() -> PathBuf {
    if let Some(path) = std::env::var_os("MEMSIFT_CHROMIUM") {
        return PathBuf::from(path);
    }
    let installed = Path::new("/usr/bin/chromium");
    if !installed.exists() {
        let status = Command::new("apt-get")
            .args(["install", "-y", "-q", "chromium"])
            .env("DEBIAN_FRONTEND", "noninteractive")
            .status();
        assert!(
            matches!(status, Ok(status) if status.success()) && installed.exists(),
            "the admin test needs Debian's chromium: apt-get install chromium, or set MEMSIFT_CHROMIUM"
        );
    }
    installed.to_owned()
}

fn headless(url: &str, extra: &[&str]) -> std::process::Output {
    let profile = tempfile::tempdir().unwrap();
    Command::new(chromium())
        .args(["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .args(extra)
        .arg(url)
        .output()
        .expect("chromium runs")
}

/// A same-origin page that posts the sign-in form at once, as a person would by typing the
/// token: Chromium has no flag for a cookie or a header, and the admin pages themselves run no
/// script. Served by the test beside the admin router, so the form post is same-site.
const SIGN_IN_PATH: &str = "/test-only/sign-in";

fn sign_in_page(next: &'static str) -> axum::Router {
    axum::Router::new().route(
        SIGN_IN_PATH,
        axum::routing::get(move || async move {
            Html(format!(
                "<form method=\"post\" action=\"/admin/login\"><input name=\"token\" value=\"{TOKEN}\">\
                 <input name=\"next\" value=\"{next}\"></form><script>document.forms[0].submit()</script>"
            ))
        }),
    )
}

/// A form body, as a browser encodes it.
fn form(fields: &[(&str, &str)]) -> String {
    url::form_urlencoded::Serializer::new(String::new())
        .extend_pairs(fields)
        .finish()
}

/// The session cookie (`name=value`) a sign-in answer sets, after checking its attributes.
fn session_cookie(headers: &HeaderMap) -> String {
    let set_cookie = headers.get(SET_COOKIE).expect("a session cookie").to_str().unwrap();
    for attribute in ["HttpOnly", "SameSite=Strict", "Path=/admin", "Max-Age=28800"] {
        assert!(set_cookie.contains(attribute), "{set_cookie}");
    }
    assert!(!set_cookie.contains(TOKEN), "{set_cookie}");
    set_cookie.split(';').next().unwrap().to_owned()
}

fn assert_security_headers(headers: &HeaderMap) {
    let header = |name: &str| headers.get(name).map(|value| value.to_str().unwrap().to_owned());
    assert_eq!(header("cache-control").as_deref(), Some("no-store"));
    assert_eq!(header("referrer-policy").as_deref(), Some("no-referrer"));
    assert_eq!(header("x-frame-options").as_deref(), Some("DENY"));
    assert_eq!(header("x-content-type-options").as_deref(), Some("nosniff"));
    let policy = header("content-security-policy").unwrap();
    for directive in [
        "default-src 'none'",
        "frame-ancestors 'none'",
        "form-action 'self'",
        "style-src 'sha256-",
    ] {
        assert!(policy.contains(directive), "{policy}");
    }
    assert!(!policy.contains("unsafe"), "{policy}");
}

#[tokio::test]
async fn chromium_signs_in_once_and_reads_the_batch_with_no_token_in_any_address() {
    let test = TestApp::with_batch_sim(TestDb::sqlite().await, FaultConfig::default()).await;
    let provider_batch_id = extract_ana_and_bo_through_the_batch_lane(&test).await;
    let (base, server) = serve_admin_with_the_sign_in_page(&test).await;
    // The app's provider client installed the TLS crypto provider reqwest needs even for http.
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();

    a_request_without_a_session_gets_only_the_form(&http, &base).await;
    let cookie = sign_in_through_the_form(&http, &base).await;
    pages_read_with_the_cookie_escape_conversation_text(&http, &base, &cookie).await;
    chromium_reads_the_batch_page_signed_in(&base, &provider_batch_id).await;
    chromium_screenshots_the_batch_page(&base).await;
    sign_out_clears_the_cookie(&http, &base, &cookie).await;
    server.abort();
    test.finish().await;
}

/// Ana's and bo's conversations extracted through the simulated batch lane; the ended batch's
/// provider id, which the batch page must show.
async fn extract_ana_and_bo_through_the_batch_lane(test: &TestApp) -> String {
    test.import(
        "chat.jsonl",
        &[
            line("ana", "c1", 0, "user", "I live in Lisbon.", true),
            line("bo", "c2", 0, "user", "I <b>love</b> chess.", true),
        ]
        .concat(),
    )
    .await
    .unwrap();
    memsift_engine::pipeline::run_until_idle(&test.app).await.unwrap();
    let batch = test
        .app
        .store
        .batches()
        .list_batches(None, None)
        .await
        .unwrap()
        .remove(0);
    // The ended batch is measured for /metrics (the simulator ended it within the test's clock).
    let snapshot = test.app.store.listing().metrics_snapshot().await.unwrap();
    assert_eq!(snapshot.batch_latencies_secs.len(), 1, "{snapshot:?}");
    assert!(snapshot.batch_latencies_secs[0] >= 0.0);
    batch.provider_batch_id.clone().unwrap()
}

/// The admin router on a free port, with the test's sign-in page beside it; its base address and
/// the server task.
async fn serve_admin_with_the_sign_in_page(test: &TestApp) -> (String, tokio::task::JoinHandle<std::io::Result<()>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let token = memsift::api::ApiToken::new(TOKEN).unwrap();
    let router = memsift::admin::router(test.app.clone(), Some(token)).merge(sign_in_page("/admin/batches"));
    let server = tokio::spawn(async move { axum::serve(listener, router).await });
    (base, server)
}

/// Without a session: the sign-in form, with the security headers; a token in the address
/// is not accepted (it would sit in history, logs and Referer headers), and a wrong token in the
/// form sets no cookie.
async fn a_request_without_a_session_gets_only_the_form(http: &reqwest::Client, base: &str) {
    for path in ["/admin/batches", &format!("/admin/batches?token={TOKEN}")] {
        let refused = http.get(format!("{base}{path}")).send().await.unwrap();
        assert_eq!(refused.status(), StatusCode::UNAUTHORIZED, "{path}");
        assert_security_headers(refused.headers());
        let form = refused.text().await.unwrap();
        assert!(
            form.contains("action=\"/admin/login\"") && form.contains("type=\"password\""),
            "{form}"
        );
        assert!(
            !form.contains("refresh"),
            "the form does not reload while the token is typed: {form}"
        );
    }
    let wrong = http
        .post(format!("{base}/admin/login"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(form(&[("token", "not-the-token"), ("next", "/admin/batches")]))
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status(), StatusCode::UNAUTHORIZED);
    assert!(wrong.headers().get(SET_COOKIE).is_none());
}

/// The token, once, in a form body: a cookie and a redirect to the page asked for; an address
/// of another site is never a redirect target. Returns the session cookie.
async fn sign_in_through_the_form(http: &reqwest::Client, base: &str) -> String {
    let signed_in = http
        .post(format!("{base}/admin/login"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(form(&[("token", TOKEN), ("next", "/admin/costs")]))
        .send()
        .await
        .unwrap();
    assert_eq!(signed_in.status(), StatusCode::SEE_OTHER);
    assert_eq!(signed_in.headers()[LOCATION], "/admin/costs");
    assert_security_headers(signed_in.headers());
    let cookie = session_cookie(signed_in.headers());
    let elsewhere = http
        .post(format!("{base}/admin/login"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(form(&[("token", TOKEN), ("next", "https://example.com/admin")]))
        .send()
        .await
        .unwrap();
    assert_eq!(elsewhere.headers()[LOCATION], "/admin");
    cookie
}

/// With the cookie the pages answer, and text from conversations is escaped, never markup.
async fn pages_read_with_the_cookie_escape_conversation_text(http: &reqwest::Client, base: &str, cookie: &str) {
    let costs = http
        .get(format!("{base}/admin/costs"))
        .header("cookie", cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(costs.status(), StatusCode::OK);
    assert_security_headers(costs.headers());
    let costs = costs.text().await.unwrap();
    assert!(
        costs.contains("<td>ana</td>") && costs.contains("<td>bo</td>"),
        "{costs}"
    );
    // Text from conversations is escaped, never markup.
    let requests = http
        .get(format!("{base}/admin/requests"))
        .header("cookie", cookie)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(!requests.contains("<b>love</b>"), "{requests}");
}

/// Chromium signs in through the form and reads the batch page, which reloads itself and links
/// on, with no token in any address.
async fn chromium_reads_the_batch_page_signed_in(base: &str, provider_batch_id: &str) {
    // Chromium runs as a separate process; the server keeps answering on this runtime meanwhile.
    let url = format!("{base}{SIGN_IN_PATH}");
    let dom = tokio::task::spawn_blocking(move || headless(&url, &["--virtual-time-budget=5000", "--dump-dom"]))
        .await
        .unwrap();
    let dom = String::from_utf8_lossy(&dom.stdout).into_owned();
    assert!(dom.contains(provider_batch_id), "{dom}");
    assert!(dom.contains("<td>ingested</td>"), "{dom}");
    assert!(dom.contains("http-equiv=\"refresh\""), "the page reloads itself: {dom}");
    assert!(dom.contains("href=\"/admin/segments\""), "{dom}");
    assert!(!dom.contains("token="), "no link or refresh carries the token: {dom}");
}

/// Chromium renders the signed-in batch page to a PNG (kept at `MEMSIFT_SCREENSHOT_TO` when set).
async fn chromium_screenshots_the_batch_page(base: &str) {
    let shot_dir = tempfile::tempdir().unwrap();
    let shot = shot_dir.path().join("batches.png");
    let url = format!("{base}{SIGN_IN_PATH}");
    let shot_arg = format!("--screenshot={}", shot.display());
    tokio::task::spawn_blocking(move || {
        headless(
            &url,
            &["--virtual-time-budget=5000", &shot_arg, "--window-size=1400,420"],
        )
    })
    .await
    .unwrap();
    let png = std::fs::read(&shot).expect("chromium wrote the screenshot");
    assert!(png.starts_with(b"\x89PNG") && png.len() > 5_000, "{} bytes", png.len());
    if let Some(keep) = std::env::var_os("MEMSIFT_SCREENSHOT_TO") {
        std::fs::write(keep, &png).unwrap();
    }
}

/// Signing out makes the browser forget the cookie.
async fn sign_out_clears_the_cookie(http: &reqwest::Client, base: &str, cookie: &str) {
    let signed_out = http
        .post(format!("{base}/admin/logout"))
        .header("cookie", cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(signed_out.status(), StatusCode::SEE_OTHER);
    let cleared = signed_out.headers()[SET_COOKIE].to_str().unwrap();
    assert!(
        cleared.starts_with("memsift_admin=;") && cleared.contains("Max-Age=0"),
        "{cleared}"
    );
}

#[tokio::test]
async fn a_session_holds_on_every_daemon_with_the_token_until_it_expires_and_not_a_second_longer() {
    let test = TestApp::sqlite().await;
    // reqwest is built without a bundled crypto provider, even for plain http.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let serve = |app: memsift_engine::app::App, token: &str| {
        let router = memsift::admin::router(app, Some(memsift::api::ApiToken::new(token).unwrap()));
        async move {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let base = format!("http://{}", listener.local_addr().unwrap());
            let server = tokio::spawn(async move { axum::serve(listener, router).await });
            (base, server)
        }
    };
    let (daemon_a, server_a) = serve(test.app.clone(), TOKEN).await;
    let (daemon_b, server_b) = serve(test.second_daemon("daemon-b"), TOKEN).await;
    let (rotated, server_c) = serve(test.second_daemon("daemon-c"), "another-token-0123456789abcdefghij").await;
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let signed_in = http
        .post(format!("{daemon_a}/admin/login"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(form(&[("token", TOKEN)]))
        .send()
        .await
        .unwrap();
    let cookie = session_cookie(signed_in.headers());
    let status = |base: String, cookie: String| {
        let http = http.clone();
        async move {
            http.get(format!("{base}/admin/segments"))
                .header("cookie", cookie)
                .send()
                .await
                .unwrap()
                .status()
        }
    };
    // Sessions live in the cookie, not in one daemon: the other daemon on the same database
    // (and token) accepts it; a daemon whose token was rotated does not.
    assert_eq!(status(daemon_a.clone(), cookie.clone()).await, StatusCode::OK);
    assert_eq!(status(daemon_b.clone(), cookie.clone()).await, StatusCode::OK);
    assert_eq!(status(rotated, cookie.clone()).await, StatusCode::UNAUTHORIZED);
    // An altered cookie is refused.
    let mut altered = cookie.clone().into_bytes();
    let last = altered.len() - 1;
    altered[last] = if altered[last] == b'A' { b'B' } else { b'A' };
    let altered = String::from_utf8(altered).unwrap();
    assert_eq!(status(daemon_a.clone(), altered).await, StatusCode::UNAUTHORIZED);

    test.advance(chrono::Duration::hours(memsift::session::SESSION_HOURS) - chrono::Duration::seconds(1));
    assert_eq!(status(daemon_b.clone(), cookie.clone()).await, StatusCode::OK);
    test.advance(chrono::Duration::seconds(1));
    assert_eq!(status(daemon_a, cookie.clone()).await, StatusCode::UNAUTHORIZED);
    assert_eq!(status(daemon_b, cookie).await, StatusCode::UNAUTHORIZED);
    for server in [server_a, server_b, server_c] {
        server.abort();
    }
    test.finish().await;
}

#[tokio::test]
async fn wrong_tokens_from_one_client_are_throttled_with_retry_after_and_the_clock_lets_it_back() {
    let test = TestApp::sqlite().await;
    let _ = rustls::crypto::ring::default_provider().install_default();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let router = memsift::admin::router(test.app.clone(), Some(memsift::api::ApiToken::new(TOKEN).unwrap()));
    // As `memsift serve` and the daemon serve it: with the peer's address.
    let server = tokio::spawn(async move {
        axum::serve(
            listener,
            router.into_make_service_with_connect_info::<std::net::SocketAddr>(),
        )
        .await
    });
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let sign_in = |token: &'static str| {
        let http = http.clone();
        let base = base.clone();
        async move {
            http.post(format!("{base}/admin/login"))
                .header("content-type", "application/x-www-form-urlencoded")
                .body(form(&[("token", token)]))
                .send()
                .await
                .unwrap()
        }
    };
    let burst = memsift::throttle::BURST as usize;
    for _ in 0..burst {
        assert_eq!(sign_in("wrong").await.status(), StatusCode::UNAUTHORIZED);
    }
    // Out of tries: 429 with the wait, for a wrong token and for the right one alike.
    for token in ["wrong", TOKEN] {
        let throttled = sign_in(token).await;
        assert_eq!(throttled.status(), StatusCode::TOO_MANY_REQUESTS, "{token}");
        assert_eq!(throttled.headers()["retry-after"], "12");
        assert!(throttled.headers().get(SET_COOKIE).is_none());
    }
    // One try comes back every 12 s of the application's clock; no sleep.
    test.clock.advance(chrono::Duration::seconds(12));
    let signed_in = sign_in(TOKEN).await;
    assert_eq!(signed_in.status(), StatusCode::SEE_OTHER);
    assert!(session_cookie(signed_in.headers()).starts_with("memsift_admin="));
    server.abort();
    test.finish().await;
}
