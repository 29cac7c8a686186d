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
    if report.n_times_clamped > 0 {
        tracing::warn!(
            file = %file.display(),
            n = report.n_times_clamped,
            "Messages dated more than a day after they arrived were stored at their arrival time."
        );
    }
    Ok(report)
}
