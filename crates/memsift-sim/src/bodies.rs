//! Results bodies as a broken provider or a proxy in front of it sends them: a line without end,
//! an HTML page with status 200, a clean end halfway, a stream that stalls, a repeated line, and
//! lines naming requests that are not in the batch.

use std::time::Duration;

use axum::body::Body;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use futures_util::StreamExt;

use crate::config::{ResultsFault, ResultsFaultKind};
use crate::state::Shared;

/// A bounded piece of the endless line, sent again and again.
const ENDLESS_CHUNK: usize = 64 * 1024;

/// The page a proxy answers with in place of the provider.
const HTML_PAGE: &str = "<!DOCTYPE html>\n<html><head><title>502 Bad Gateway</title></head>\n<body><h1>Bad Gateway</h1><p>The upstream server sent an invalid response.</p></body></html>\n";

impl Shared {
    /// A results download's body: the lines with the foreign lines added, then the configured
    /// fault when this download (the `download`-th, counting from 1) is one it breaks.
    pub(crate) fn results_body(&self, mut lines: Vec<String>, download: u64) -> Response {
        let faults = &self.config.faults;
        if let Some(first) = lines.first().cloned() {
            for n in 0..faults.foreign_lines {
                lines.push(renamed(&first, &format!("foreign-{n}")));
                self.lock().count_fault("foreign_line");
            }
        }
        let fault = faults
            .results_fault
            .filter(|fault| fault.first == 0 || download <= u64::from(fault.first));
        let Some(ResultsFault { kind, .. }) = fault else {
            return self.content_body(self.jsonl_text(&lines));
        };
        self.lock().count_fault(match kind {
            ResultsFaultKind::EndlessLine => "results_endless_line",
            ResultsFaultKind::Html => "results_html",
            ResultsFaultKind::CutHalfway => "results_cut_halfway",
            ResultsFaultKind::Stall => "results_stall",
            ResultsFaultKind::DuplicateLine => "results_duplicate_line",
        });
        let text = self.jsonl_text(&lines);
        let half = Bytes::copy_from_slice(&text[..text.len() / 2]);
        match kind {
            ResultsFaultKind::EndlessLine => {
                let endless = futures_util::stream::repeat_with(|| Bytes::from(vec![b'x'; ENDLESS_CHUNK]));
                let body = futures_util::stream::once(async move { Bytes::from(text) })
                    .chain(endless)
                    .map(Ok::<Bytes, std::io::Error>);
                streamed(Body::from_stream(body))
            }
            ResultsFaultKind::Html => (
                StatusCode::OK,
                [("content-type", "text/html; charset=utf-8")],
                HTML_PAGE,
            )
                .into_response(),
            ResultsFaultKind::CutHalfway => self.content_body(half.to_vec()),
            ResultsFaultKind::Stall => {
                // Half the body, then an open connection that sends nothing: a heartbeat far
                // apart keeps a test's server from being idle-closed, never a byte of data.
                let stalled = futures_util::stream::once(async move { half }).chain(futures_util::stream::unfold(
                    (),
                    |()| async {
                        tokio::time::sleep(Duration::from_secs(3600)).await;
                        Some((Bytes::new(), ()))
                    },
                ));
                streamed(Body::from_stream(stalled.map(Ok::<Bytes, std::io::Error>)))
            }
            ResultsFaultKind::DuplicateLine => {
                if let Some(first) = lines.first().cloned() {
                    lines.push(first);
                }
                self.content_body(self.jsonl_text(&lines))
            }
        }
    }
}

fn streamed(body: Body) -> Response {
    ([("content-type", "application/binary")], body).into_response()
}

/// The same result line under another `custom_id` (both wire formats carry it at the top).
fn renamed(line: &str, custom_id: &str) -> String {
    match serde_json::from_str::<serde_json::Value>(line) {
        Ok(mut value) => {
            value["custom_id"] = serde_json::Value::String(custom_id.to_owned());
            value.to_string()
        }
        Err(_) => line.to_owned(),
    }
}
