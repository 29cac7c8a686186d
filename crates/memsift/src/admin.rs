//! The admin pages: read-only HTML tables of batches, segments, requests, dead letters and cost
//! by user and stage, refreshing themselves, served under `/admin`.
//!
//! The tables are the same `render` grids the CLI prints, so the pages and `memsift batches`
//! never disagree about a column. Pages carry no script: a `<meta refresh>` reloads them.

use axum::Router;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::{MethodRouter, get};
use serde::Deserialize;

use crate::api::ApiToken;
use crate::app::App;
use crate::render::{self, escape_html};

/// Seconds between automatic reloads.
const REFRESH_SECS: u32 = 10;
/// Rows per table: enough to see what is happening, bounded so a page stays fast.
const PAGE_ROWS: i64 = 200;

#[derive(Clone)]
struct AdminState {
    app: App,
    token: Option<ApiToken>,
}

/// The `?token=` a browser can carry (it cannot set an `Authorization` header on a link).
#[derive(Debug, Deserialize)]
struct TokenQuery {
    token: Option<String>,
}

/// The `/admin` pages over `app`. With a token, every page requires it as a bearer header or a
/// `token` query parameter (kept in the page's links and refresh); without one they are open,
/// for a listener bound to loopback.
pub fn router(app: App, token: Option<ApiToken>) -> Router {
    let state = AdminState { app, token };
    pages()
        .into_iter()
        .fold(Router::new(), |router, (path, page)| router.route(path, page))
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

/// The pages' paths.
pub fn page_paths() -> Vec<&'static str> {
    pages().into_iter().map(|(path, _)| path).collect()
}

/// Why a page could not be shown.
enum PageError {
    Unauthorized,
    Store(String),
}

impl IntoResponse for PageError {
    fn into_response(self) -> Response {
        match self {
            PageError::Unauthorized => (
                StatusCode::UNAUTHORIZED,
                Html("<p>401: add <code>?token=…</code> (the API token) to the address.</p>".to_owned()),
            )
                .into_response(),
            PageError::Store(detail) => (
                StatusCode::INTERNAL_SERVER_ERROR,
                Html(format!("<p>500: {}</p>", escape_html(&detail))),
            )
                .into_response(),
        }
    }
}

impl From<memsift_store::StoreError> for PageError {
    fn from(error: memsift_store::StoreError) -> Self {
        PageError::Store(error.to_string())
    }
}

/// Checks the token; returns the query suffix the page's links must carry.
fn authorize(state: &AdminState, headers: &HeaderMap, query: &TokenQuery) -> Result<String, PageError> {
    let Some(expected) = &state.token else {
        return Ok(String::new());
    };
    let bearer = headers
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("Bearer "));
    let offered = bearer.or(query.token.as_deref()).unwrap_or_default();
    if !expected.matches(offered) {
        return Err(PageError::Unauthorized);
    }
    Ok(query
        .token
        .as_ref()
        .map(|token| format!("?token={}", escape_html(token)))
        .unwrap_or_default())
}

fn page(title: &str, suffix: &str, body: &str) -> Html<String> {
    let nav = [
        ("batches", "/admin/batches"),
        ("segments", "/admin/segments"),
        ("requests", "/admin/requests"),
        ("dead letters", "/admin/dead"),
        ("cost", "/admin/costs"),
    ]
    .iter()
    .map(|(name, path)| format!("<a href=\"{path}{suffix}\">{name}</a>"))
    .collect::<Vec<_>>()
    .join(" · ");
    Html(format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta http-equiv=\"refresh\" content=\"{REFRESH_SECS}\">\
         <title>memsift · {title}</title>\
         <style>body{{font:14px system-ui,sans-serif;margin:1.5em}}table{{border-collapse:collapse}}\
         th,td{{border:1px solid #ccc;padding:3px 8px;text-align:left;vertical-align:top}}\
         th{{background:#f3f3f3}}tbody tr:nth-child(even){{background:#fafafa}}</style></head>\n\
         <body><nav>{nav}</nav>\n<h1>{title}</h1>\n{body}\n\
         <p><small>read-only; reloads every {REFRESH_SECS} s</small></p></body></html>\n",
        title = escape_html(title),
    ))
}

async fn index(
    State(state): State<AdminState>,
    headers: HeaderMap,
    Query(query): Query<TokenQuery>,
) -> Result<Html<String>, PageError> {
    let suffix = authorize(&state, &headers, &query)?;
    let counts = state.app.store.counts().await?;
    let body = format!(
        "<p>{} users, {} segments, {} messages, {} memories, {} requests.</p>",
        counts.users, counts.segments, counts.messages, counts.memories, counts.requests
    );
    Ok(page("memsift", &suffix, &body))
}

async fn batches(
    State(state): State<AdminState>,
    headers: HeaderMap,
    Query(query): Query<TokenQuery>,
) -> Result<Html<String>, PageError> {
    let suffix = authorize(&state, &headers, &query)?;
    let rows = state.app.store.list_batches(None, Some(PAGE_ROWS)).await?;
    let body = format!(
        "{}{}",
        unhealthy_lanes(&state).await?,
        render::batches_table(&rows).to_html()
    );
    Ok(page("batches", &suffix, &body))
}

async fn segments(
    State(state): State<AdminState>,
    headers: HeaderMap,
    Query(query): Query<TokenQuery>,
) -> Result<Html<String>, PageError> {
    let suffix = authorize(&state, &headers, &query)?;
    let rows = state.app.store.list_segments(None, None, Some(PAGE_ROWS)).await?;
    let body = format!(
        "{}{}",
        unhealthy_lanes(&state).await?,
        render::segments_table(&rows).to_html()
    );
    Ok(page("segments", &suffix, &body))
}

/// The provider lanes that are paused or unwell, why, and the likely fix; empty when all are well.
async fn unhealthy_lanes(state: &AdminState) -> Result<String, PageError> {
    let lines = crate::health::describe_unhealthy(&state.app.store.lane_health().await?);
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

async fn requests(
    State(state): State<AdminState>,
    headers: HeaderMap,
    Query(query): Query<TokenQuery>,
) -> Result<Html<String>, PageError> {
    let suffix = authorize(&state, &headers, &query)?;
    let rows = state.app.store.list_requests(None, None, Some(PAGE_ROWS)).await?;
    Ok(page("requests", &suffix, &render::requests_table(&rows).to_html()))
}

async fn dead_letters(
    State(state): State<AdminState>,
    headers: HeaderMap,
    Query(query): Query<TokenQuery>,
) -> Result<Html<String>, PageError> {
    let suffix = authorize(&state, &headers, &query)?;
    let segments = state
        .app
        .store
        .list_segments(None, Some("dead"), Some(PAGE_ROWS))
        .await?;
    let requests = state
        .app
        .store
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
    Ok(page("dead letters", &suffix, &body))
}

async fn costs(
    State(state): State<AdminState>,
    headers: HeaderMap,
    Query(query): Query<TokenQuery>,
) -> Result<Html<String>, PageError> {
    let suffix = authorize(&state, &headers, &query)?;
    let rows = state.app.store.cost_by_user_stage().await?;
    let total: f64 = rows.iter().map(|row| row.cost_usd).sum();
    let body = format!("<p>total ${total:.4}</p>\n{}", render::costs_table(&rows).to_html());
    Ok(page("cost by user and stage", &suffix, &body))
}
