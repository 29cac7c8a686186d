//! Human tables and `--json` output for the admin listings.

use comfy_table::presets::UTF8_FULL_CONDENSED;
use comfy_table::{ContentArrangement, Table};
use memsift_store::{MemoryRow, RequestRow, SegmentRow};
use serde::Serialize;

/// Prints rows as pretty JSON (an array).
pub fn print_json<T: Serialize>(rows: &T) -> anyhow::Result<()> {
    println!("{}", serde_json::to_string_pretty(rows)?);
    Ok(())
}

/// A listing as a header and rows of cells, shown as a terminal table (`Display`) or as an HTML
/// table (the admin pages), so both show the same columns.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Grid {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Grid {
    /// An empty grid with these column names.
    pub fn new(header: &[&str]) -> Self {
        Self {
            header: header.iter().map(|cell| (*cell).to_owned()).collect(),
            rows: Vec::new(),
        }
    }

    /// Appends a row (as many cells as the header).
    pub fn add_row(&mut self, row: Vec<String>) {
        self.rows.push(row);
    }

    /// Rows shown.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// True when there is no row.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// An HTML `<table>`, every cell escaped.
    pub fn to_html(&self) -> String {
        let mut html = String::from("<table>\n<thead><tr>");
        for cell in &self.header {
            html.push_str(&format!("<th>{}</th>", escape_html(cell)));
        }
        html.push_str("</tr></thead>\n<tbody>\n");
        for row in &self.rows {
            html.push_str("<tr>");
            for cell in row {
                html.push_str(&format!("<td>{}</td>", escape_html(cell)));
            }
            html.push_str("</tr>\n");
        }
        html.push_str("</tbody>\n</table>");
        html
    }
}

impl std::fmt::Display for Grid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut table = Table::new();
        table
            .load_style(UTF8_FULL_CONDENSED)
            .set_content_arrangement(ContentArrangement::Dynamic)
            .set_header(&self.header);
        for row in &self.rows {
            table.add_row(row);
        }
        write!(f, "{table}")
    }
}

/// Escapes text for HTML element content and attribute values.
pub fn escape_html(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => escaped.push_str("&amp;"),
            '<' => escaped.push_str("&lt;"),
            '>' => escaped.push_str("&gt;"),
            '"' => escaped.push_str("&quot;"),
            '\'' => escaped.push_str("&#39;"),
            _ => escaped.push(c),
        }
    }
    escaped
}

fn table(header: &[&str]) -> Grid {
    Grid::new(header)
}

fn short(id: &str) -> &str {
    // The last 12 hex digits of a UUIDv7 are its random part; unique enough to read a table by.
    id.get(id.len().saturating_sub(12)..).unwrap_or(id)
}

/// The segments table.
pub fn segments_table(rows: &[SegmentRow]) -> Grid {
    let mut table = table(&[
        "segment",
        "user",
        "conversation",
        "name",
        "status",
        "msgs",
        "first message",
        "tries",
        "memories",
        "last error",
        "note",
    ]);
    for row in rows {
        table.add_row(vec![
            short(&row.id).to_owned(),
            row.user.clone(),
            row.conversation_key.clone(),
            row.name.clone().unwrap_or_default(),
            row.status.clone(),
            row.n_messages.to_string(),
            row.first_message_at.format("%Y-%m-%d %H:%M").to_string(),
            row.attempts.to_string(),
            row.n_memories.to_string(),
            row.last_error.clone().unwrap_or_default(),
            row.plan_note.clone().unwrap_or_default(),
        ]);
    }
    table
}

/// The memories table.
pub fn memories_table(rows: &[MemoryRow]) -> Grid {
    let mut table = table(&["memory", "text", "temporal", "sens.", "conf.", "evidence", "entities"]);
    for row in rows {
        table.add_row(vec![
            short(&row.id).to_owned(),
            row.text.clone(),
            row.temporal.clone(),
            if row.sensitive { "yes".to_owned() } else { String::new() },
            format!("{:.2}", row.confidence),
            row.evidence.join(","),
            row.entities.join(","),
        ]);
    }
    table
}

/// The requests table.
pub fn requests_table(rows: &[RequestRow]) -> Grid {
    let mut table = table(&[
        "request",
        "purpose",
        "user",
        "lane",
        "status",
        "try",
        "prompt",
        "items",
        "dropped",
        "tokens in/out",
        "cost $",
    ]);
    for row in rows {
        table.add_row(vec![
            short(&row.id).to_owned(),
            row.purpose.clone(),
            row.user.clone(),
            row.lane.clone(),
            row.status.clone(),
            row.attempt.to_string(),
            row.prompt_version.clone(),
            row.n_items.to_string(),
            row.n_dropped.to_string(),
            format!("{}/{}", row.input_tokens, row.output_tokens),
            format!("{:.4}", row.cost_usd),
        ]);
    }
    table
}

/// The batches table.
pub fn batches_table(rows: &[memsift_store::BatchRow]) -> Grid {
    let mut table = table(&[
        "batch",
        "provider",
        "provider id",
        "status",
        "reqs",
        "ok/err/exp/cxl",
        "polls",
        "next poll",
        "ingested",
        "created",
        "last error",
    ]);
    for row in rows {
        table.add_row(vec![
            short(&row.id).to_owned(),
            row.provider.clone(),
            row.provider_batch_id.clone().unwrap_or_default(),
            row.status.clone(),
            row.n_requests.to_string(),
            format!(
                "{}/{}/{}/{}",
                row.n_succeeded, row.n_errored, row.n_expired, row.n_canceled
            ),
            row.n_polls.to_string(),
            row.next_poll_at
                .map(|at| at.format("%H:%M:%S").to_string())
                .unwrap_or_default(),
            format!("{}/{}", row.ingest_cursor, row.n_requests),
            row.created_at.format("%Y-%m-%d %H:%M:%S").to_string(),
            row.last_error.clone().unwrap_or_default(),
        ]);
    }
    table
}

/// The receipt of an erasure: what was removed, one row per kind.
pub fn erasure_receipt(receipt: &memsift_store::ErasureReceipt) -> String {
    let mut table = table(&["removed", "count"]);
    for (what, count) in [
        ("memories", receipt.n_memories),
        ("vectors", receipt.n_vectors),
        ("links", receipt.n_links),
        ("entities", receipt.n_entities),
        ("segments", receipt.n_segments),
        ("messages", receipt.n_messages),
        ("raw outputs", receipt.n_raw_outputs),
        ("request bodies", receipt.n_request_bodies),
        ("in-flight requests ended", receipt.n_requests_ended),
        ("journal rows", receipt.n_operations),
        ("provider batches deleted", receipt.n_provider_batches_deleted as i64),
        ("provider batches left", receipt.n_provider_batches_left as i64),
        (
            "provider batches deleted once ingested",
            receipt.n_provider_batches_pending as i64,
        ),
    ] {
        table.add_row(vec![what.to_owned(), count.to_string()]);
    }
    format!(
        "erasure receipt: user `{}` at {}\n{table}\ntombstones kept: {} (the same facts will not be stored again)",
        receipt.user,
        receipt.erased_at.format("%Y-%m-%d %H:%M:%S UTC"),
        receipt.n_tombstones
    )
}

/// Tokens and cost by user, stage and lane.
pub fn costs_table(rows: &[memsift_store::CostRow]) -> Grid {
    let mut table = table(&[
        "user",
        "stage",
        "lane",
        "requests",
        "input",
        "output",
        "cache write",
        "cache read",
        "cost USD",
    ]);
    for row in rows {
        table.add_row(vec![
            row.user_external_id.clone(),
            row.purpose.clone(),
            row.lane.clone(),
            row.n_requests.to_string(),
            row.input_tokens.to_string(),
            row.output_tokens.to_string(),
            row.cache_creation_tokens.to_string(),
            row.cache_read_tokens.to_string(),
            format!("{:.4}", row.cost_usd),
        ]);
    }
    table
}
