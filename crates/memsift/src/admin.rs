//! The admin pages: read-only HTML tables of batches, segments, requests, dead letters and cost
//! by user and stage, refreshing themselves, served under `/admin`.
//!
//! The tables are the same `render` grids the CLI prints, so the pages and `memsift batches`
//! never disagree about a column. Pages carry no script: a `<meta refresh>` reloads them.
//!
//! With a token, a browser signs in once: the sign-in form posts the token in its body and gets
//! an HMAC-signed session cookie back (`crate::session`), so the token never appears in a link,
//! the refresh, the history or a `Referer`. Scripts may send `Authorization: Bearer` instead.
//! Every answer carries `Cache-Control: no-store`, `Referrer-Policy: no-referrer`,
//! `X-Frame-Options: DENY` and a policy that allows the pages' one stylesheet and nothing else.

use std::sync::LazyLock;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::{MethodRouter, get, post};
use base64::Engine;
use sha2::{Digest, Sha256};

use crate::render::{self, escape_html};
use crate::session::{SessionKeys, cookie_value, end_cookie, start_cookie};
use crate::token::ApiToken;
use memsift_engine::app::App;

/// Seconds between automatic reloads.
const REFRESH_SECS: u32 = 10;
/// Rows per table: enough to see what is happening, bounded so a page stays fast.
const PAGE_ROWS: i64 = 200;
/// Where the sign-in form posts.
const SIGN_IN_PATH: &str = "/admin/login";
/// Where the sign-out button posts.
const SIGN_OUT_PATH: &str = "/admin/logout";

/// The pages' one stylesheet, inline; the security policy allows exactly this text by its hash.
const STYLE: &str = "body{font:14px system-ui,sans-serif;margin:1.5em}table{border-collapse:collapse}\
th,td{border:1px solid #ccc;padding:3px 8px;text-align:left;vertical-align:top}\
th{background:#f3f3f3}tbody tr:nth-child(even){background:#fafafa}nav form{display:inline}";

/// No script, no images, no frames, forms only to this server, and the stylesheet above.
static CONTENT_SECURITY_POLICY: LazyLock<HeaderValue> = LazyLock::new(|| {
    let style_hash = base64::engine::general_purpose::STANDARD.encode(Sha256::digest(STYLE.as_bytes()));
    HeaderValue::from_str(&format!(
        "default-src 'none'; style-src 'sha256-{style_hash}'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    ))
    .expect("a hash in base64 is a valid header value")
});

#[derive(Clone)]
struct AdminState {
    app: App,
    access: Option<Access>,
    throttle: crate::throttle::LoginThrottle,
}

/// What a request must show when a token is configured.
#[derive(Clone)]
struct Access {
    token: ApiToken,
    sessions: SessionKeys,
}

impl AdminState {
    /// A valid session cookie, or the token as a bearer header; anything without a token.
    fn admits(&self, headers: &HeaderMap) -> bool {
        let Some(access) = &self.access else {
            return true;
        };
        if let Some(cookie) = cookie_value(headers)
            && access.sessions.verify(cookie, self.app.clock.now())
        {
            return true;
        }
        headers
            .get(header::AUTHORIZATION)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.strip_prefix("Bearer "))
            .is_some_and(|offered| access.token.matches(offered.trim()))
    }
}

/// The `/admin` pages over `app`. With a token, every page needs a session (from the sign-in
/// form) or the token as a bearer header; without one they are open, for a listener bound to
/// loopback.
pub fn router(app: App, token: Option<ApiToken>) -> Router {
    router_with_throttle(app, token, crate::throttle::LoginThrottle::default())
}

/// [`router`] spending wrong sign-ins from `throttle`, which the API's bearer check shares: a
/// client guessing the token has one budget of tries, whichever door it knocks on.
pub fn router_with_throttle(app: App, token: Option<ApiToken>, throttle: crate::throttle::LoginThrottle) -> Router {
    let access = token.map(|token| Access {
        sessions: SessionKeys::new(&token),
        token,
    });
    let state = AdminState { app, access, throttle };
    let pages = pages()
        .into_iter()
        .fold(Router::new(), |router, (path, page)| router.route(path, page))
        .route_layer(axum::middleware::from_fn_with_state(state.clone(), require_session));
    sign_in_routes()
        .into_iter()
        .fold(pages, |router, (_, path, route)| router.route(path, route))
        .layer(axum::middleware::map_response(admin_headers))
        .with_state(state)
}

/// Every page (all `GET`), the one table the router and the OpenAPI check both read.
fn pages() -> Vec<(&'static str, MethodRouter<AdminState>)> {
    vec![
        ("/admin", get(index)),
        ("/admin/batches", get(batches)),
        ("/admin/segments", get(segments)),
        ("/admin/requests", get(requests)),
        ("/admin/dead", get(dead_letters)),
        ("/admin/costs", get(costs)),
    ]
}

/// Signing in and out, which need no session.
fn sign_in_routes() -> Vec<(&'static str, &'static str, MethodRouter<AdminState>)> {
    vec![
        ("POST", SIGN_IN_PATH, post(sign_in)),
        ("POST", SIGN_OUT_PATH, post(sign_out)),
    ]
}

/// Every admin route as (method, path): the pages, then signing in and out.
pub fn route_list() -> Vec<(&'static str, &'static str)> {
    pages()
        .into_iter()
        .map(|(path, _)| ("GET", path))
        .chain(sign_in_routes().into_iter().map(|(method, path, _)| (method, path)))
        .collect()
}

async fn admin_headers(mut response: Response) -> Response {
    crate::headers::set_security_headers(response.headers_mut(), CONTENT_SECURITY_POLICY.clone());
    response
}

async fn require_session(State(state): State<AdminState>, request: Request, next: Next) -> Response {
    // A bearer header is a guess at the token like the sign-in form's: the same throttle spends
    // it, so the pages are not a third door with no count (a page asked for without any
    // credential is no guess and is not counted).
    let client = request
        .extensions()
        .get::<axum::extract::ConnectInfo<std::net::SocketAddr>>()
        .map(|info| info.0.ip());
    let bearer = request.headers().contains_key(header::AUTHORIZATION);
    let now = state.app.clock.now();
    if bearer
        && state.access.is_some()
        && let Err(wait_secs) = state.throttle.check(client, now)
    {
        return too_many_tries(wait_secs);
    }
    if state.admits(request.headers()) {
        return next.run(request).await;
    }
    if bearer && state.access.is_some() {
        state.throttle.failed(client, now);
        tracing::warn!(client = ?client, "Admin page asked for with a wrong bearer token.");
    }
    sign_in_page(StatusCode::UNAUTHORIZED, request.uri().path(), None)
}

/// The sign-in form with 429 and `Retry-After`: this client sent too many wrong tokens.
fn too_many_tries(wait_secs: u64) -> Response {
    let mut response = sign_in_page(
        StatusCode::TOO_MANY_REQUESTS,
        "/admin",
        Some(&format!(
            "Too many wrong tokens from this address; try again in {wait_secs} s."
        )),
    );
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from(wait_secs));
    response
}

/// The sign-in form, answering a page asked for without a session (401) or a wrong token.
fn sign_in_page(status: StatusCode, next: &str, problem: Option<&str>) -> Response {
    let problem = problem
        .map(|problem| format!("<p><strong>{}</strong></p>\n", escape_html(problem)))
        .unwrap_or_default();
    let body = format!(
        "{problem}<form method=\"post\" action=\"{SIGN_IN_PATH}\">\
         <input type=\"hidden\" name=\"next\" value=\"{}\">\
         <label>API token <input type=\"password\" name=\"token\" autocomplete=\"current-password\" required autofocus></label> \
         <button type=\"submit\">Sign in</button></form>\n\
         <p><small>The token is sent once, in this form's body, and exchanged for a session cookie \
         that lasts {} hours.</small></p>",
        escape_html(next),
        crate::session::SESSION_HOURS
    );
    (status, document("sign in", false, &body)).into_response()
}

/// Where to go after signing in: a page of ours, never an address a form could smuggle in.
fn page_after_sign_in(requested: Option<&str>) -> &'static str {
    pages()
        .into_iter()
        .map(|(path, _)| path)
        .find(|path| Some(*path) == requested)
        .unwrap_or("/admin")
}

/// `POST /admin/login` with `token=…&next=…` (form-encoded): a session cookie and a redirect to
/// the page, or the form again with one line saying the token was wrong. A client (by address,
/// as the listener saw it) that sent too many wrong tokens gets 429 with `Retry-After` instead,
/// whatever it sends, until its bucket refills (`crate::throttle`).
async fn sign_in(
    State(state): State<AdminState>,
    extensions: axum::http::Extensions,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let client = extensions
        .get::<axum::extract::ConnectInfo<std::net::SocketAddr>>()
        .map(|info| info.0.ip());
    let now = state.app.clock.now();
    if state.access.is_some()
        && let Err(wait_secs) = state.throttle.check(client, now)
    {
        return too_many_tries(wait_secs);
    }
    let mut offered = None;
    let mut requested = None;
    for (name, value) in url::form_urlencoded::parse(&body) {
        match &*name {
            "token" => offered = Some(value.into_owned()),
            "next" => requested = Some(value.into_owned()),
            _ => {}
        }
    }
    let next = page_after_sign_in(requested.as_deref());
    let Some(access) = &state.access else {
        return Redirect::to(next).into_response();
    };
    if !offered.is_some_and(|offered| access.token.matches(offered.trim())) {
        state.throttle.failed(client, now);
        tracing::warn!(client = ?client, "Admin sign-in with a wrong token.");
        return sign_in_page(
            StatusCode::UNAUTHORIZED,
            next,
            Some("That is not the API token; use the one in MEMSIFT_API_TOKEN or [api] token_file."),
        );
    }
    let over_https = headers
        .get("x-forwarded-proto")
        .is_some_and(|proto| proto.as_bytes().eq_ignore_ascii_case(b"https"));
    let cookie = start_cookie(&access.sessions.issue(now), over_https);
    let mut response = Redirect::to(next).into_response();
    response.headers_mut().insert(
        header::SET_COOKIE,
        HeaderValue::from_str(&cookie).expect("the cookie is base64, digits and dots"),
    );
    response
}

/// `POST /admin/logout`: the browser forgets its session.
async fn sign_out() -> Response {
    let mut response = Redirect::to("/admin").into_response();
    response.headers_mut().insert(
        header::SET_COOKIE,
        HeaderValue::from_str(&end_cookie()).expect("the cookie is a constant"),
    );
    response
}

/// Why a page could not be shown.
struct PageError(String);

impl IntoResponse for PageError {
    fn into_response(self) -> Response {
        (
            StatusCode::INTERNAL_SERVER_ERROR,
            Html(format!("<p>500: {}</p>", escape_html(&self.0))),
        )
            .into_response()
    }
}

impl From<memsift_store::StoreError> for PageError {
    fn from(error: memsift_store::StoreError) -> Self {
        PageError(error.to_string())
    }
}

/// A page of the admin site. Signed in: the links, the sign-out button and the reload; the
/// sign-in form has none of them (a reload would clear the token being typed).
fn document(title: &str, signed_in: bool, body: &str) -> Html<String> {
    if !signed_in {
        return Html(format!(
            "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
             <title>memsift · {title}</title><style>{STYLE}</style></head>\n\
             <body><h1>{title}</h1>\n{body}\n</body></html>\n",
            title = escape_html(title),
        ));
    }
    let nav = [
        ("batches", "/admin/batches"),
        ("segments", "/admin/segments"),
        ("requests", "/admin/requests"),
        ("dead letters", "/admin/dead"),
        ("cost", "/admin/costs"),
    ]
    .iter()
    .map(|(name, path)| format!("<a href=\"{path}\">{name}</a>"))
    .collect::<Vec<_>>()
    .join(" · ");
    Html(format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta http-equiv=\"refresh\" content=\"{REFRESH_SECS}\">\
         <title>memsift · {title}</title><style>{STYLE}</style></head>\n\
         <body><nav>{nav} · <form method=\"post\" action=\"{SIGN_OUT_PATH}\"><button type=\"submit\">sign out</button></form></nav>\n\
         <h1>{title}</h1>\n{body}\n\
         <p><small>read-only; reloads every {REFRESH_SECS} s</small></p></body></html>\n",
        title = escape_html(title),
    ))
}

fn page(title: &str, body: &str) -> Html<String> {
    document(title, true, body)
}

async fn index(State(state): State<AdminState>) -> Result<Html<String>, PageError> {
    let counts = state.app.store.listing().counts().await?;
    let body = format!(
        "<p>{} users, {} segments, {} messages, {} memories, {} requests.</p>",
        counts.users, counts.segments, counts.messages, counts.memories, counts.requests
    );
    Ok(page("memsift", &body))
}

async fn batches(State(state): State<AdminState>) -> Result<Html<String>, PageError> {
    let rows = state.app.store.batches().list_batches(None, Some(PAGE_ROWS)).await?;
    let body = format!(
        "{}{}",
        unhealthy_lanes(&state).await?,
        render::batches_table(&rows).to_html()
    );
    Ok(page("batches", &body))
}

async fn segments(State(state): State<AdminState>) -> Result<Html<String>, PageError> {
    let rows = state
        .app
        .store
        .listing()
        .list_segments(None, None, Some(PAGE_ROWS))
        .await?;
    let body = format!(
        "{}{}",
        unhealthy_lanes(&state).await?,
        render::segments_table(&rows).to_html()
    );
    Ok(page("segments", &body))
}

/// The provider lanes that are paused or unwell, why, and the likely fix; empty when all are well.
async fn unhealthy_lanes(state: &AdminState) -> Result<String, PageError> {
    let lines = memsift_engine::health::describe_unhealthy(&state.app.store.lanes().lane_health().await?);
    if lines.is_empty() {
        return Ok(String::new());
    }
    let items: String = lines
        .iter()
        .map(|line| format!("<li>{}</li>", escape_html(line)))
        .collect();
    Ok(format!(
        "<h2>provider lanes not healthy</h2>\n<ul class=\"lanes\">{items}</ul>\n"
    ))
}

async fn requests(State(state): State<AdminState>) -> Result<Html<String>, PageError> {
    let rows = state
        .app
        .store
        .listing()
        .list_requests(None, None, Some(PAGE_ROWS))
        .await?;
    Ok(page("requests", &render::requests_table(&rows).to_html()))
}

async fn dead_letters(State(state): State<AdminState>) -> Result<Html<String>, PageError> {
    let segments = state
        .app
        .store
        .listing()
        .list_segments(None, Some("dead"), Some(PAGE_ROWS))
        .await?;
    let requests = state
        .app
        .store
        .listing()
        .list_requests(None, Some("dead"), Some(PAGE_ROWS))
        .await?;
    let body = format!(
        "<h2>dead segments ({})</h2>\n{}\n<p>Retry one with <code>memsift extract --segment ID</code>.</p>\n\
         <h2>dead requests ({})</h2>\n{}",
        segments.len(),
        render::segments_table(&segments).to_html(),
        requests.len(),
        render::requests_table(&requests).to_html()
    );
    Ok(page("dead letters", &body))
}

async fn costs(State(state): State<AdminState>) -> Result<Html<String>, PageError> {
    let rows = state.app.store.listing().cost_by_user_stage().await?;
    let total: f64 = rows.iter().map(|row| row.cost_usd).sum();
    let body = format!("<p>total ${total:.4}</p>\n{}", render::costs_table(&rows).to_html());
    Ok(page("cost by user and stage", &body))
}
