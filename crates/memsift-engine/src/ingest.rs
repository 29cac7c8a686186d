//! Importing a conversation file: parsed whole by `memsift-import`, then stored in one
//! transaction, so a bad line stores nothing.

use anyhow::Context;
use memsift_import::{ImportFormat, read_file};
use memsift_store::IngestReport;

use crate::app::App;

/// Imports `file` in `format`; `progress(done, total)` is called as messages are stored.
pub async fn import_file(
    app: &App,
    file: &std::path::Path,
    format: ImportFormat,
    progress: &(dyn Fn(u64, u64) + Sync),
) -> anyhow::Result<IngestReport> {
    let messages = read_file(file, format, app.config.ingest.max_message_len())
        .map_err(|error| anyhow::anyhow!("import: {error}; nothing from this file was stored"))?;
    let total = messages.len() as u64;
    let report = app
        .store
        .messages()
        .ingest(&messages, app.config.idle_timeout(), app.clock.now(), &|n_done| {
            progress(n_done, total)
        })
        .await
        .with_context(|| format!("import: {}: nothing from this file was stored", file.display()))?;
    warn_of_changes(&report, &file.display().to_string());
    Ok(report)
}

/// Logs what an ingest stored other than as sent, or refused as a changed repeat (`origin` names
/// the file or the user); the report carries the same counts to the caller.
pub fn warn_of_changes(report: &IngestReport, origin: &str) {
    if report.n_times_clamped > 0 {
        tracing::warn!(
            origin,
            n = report.n_times_clamped,
            "Messages dated more than a day after they arrived were stored at their arrival time."
        );
    }
    if report.n_text_replaced > 0 {
        tracing::warn!(
            origin,
            n = report.n_text_replaced,
            "Messages held U+0000, which was stored as U+FFFD."
        );
    }
    if report.n_conflicting_repeats > 0 {
        tracing::warn!(
            origin,
            n = report.n_conflicting_repeats,
            ids = ?report.conflicting_repeat_ids,
            "Messages reused a stored id with another role or content and were not stored; the stored ones are kept."
        );
    }
}
