//! Erasing a user end to end: the store's one-transaction erasure, then the provider-side copies
//! of ingested batches that held the user's text.

use memsift_core::status::Purpose;
use memsift_store::ErasureReceipt;

use crate::app::App;

/// Erases `user` (external id) and, when configured, deletes provider-side batch data that held
/// their text. The store part commits first: a provider failure leaves it erased and is reported
/// in the receipt's counts and the log, never undone.
pub async fn erase_user(app: &App, user: &str) -> anyhow::Result<ErasureReceipt> {
    let batches = app.store.batches().batches_of_user(user).await?;
    let user_id = app.store.listing().user_id(user).await?;
    let mut receipt = app
        .store
        .erasure()
        .erase_user(user, app.clock.now(), &fact_keys)
        .await?;
    if let Some(user_id) = user_id {
        // No word of an erased memory stays in this process's search indexes either, nor a
        // vector of their texts.
        app.vectors.forget_user(user_id);
        // Nor in a SQLite connection's page cache of the pages as they were.
        app.store.close_idle_connections().await;
    }
    match (&app.coordinator, app.config.erasure.delete_provider_batches) {
        (Some(coordinator), true) => {
            let (deleted, skipped, failures) = coordinator.delete_provider_data(&batches).await;
            for failure in &failures {
                tracing::warn!(user, %failure, "Could not delete a provider-side batch; delete it by hand.");
            }
            receipt.n_provider_batches_deleted = deleted;
            // Batches still in flight are deleted by the coordinator once ingested.
            receipt.n_provider_batches_left =
                skipped.saturating_sub(receipt.n_provider_batches_pending) + failures.len() as u64;
        }
        _ => {
            receipt.n_provider_batches_left = batches.len() as u64;
            receipt.n_provider_batches_pending = 0;
        }
    }
    Ok(receipt)
}

/// The facts an erasure fingerprints from one stored raw output: every item of an extraction
/// answer, kept or dropped (`memsift_processor::item_fact_keys`). Stage answers only rework
/// memories the user already had, which are fingerprinted from the memories themselves.
pub fn fact_keys(purpose: &str, raw_output: &str) -> Vec<String> {
    if purpose == Purpose::Extraction.as_str() {
        memsift_processor::item_fact_keys(raw_output)
    } else {
        Vec::new()
    }
}
