//! Undo of a journaled operation: the exact prior rows put back, what the operation created
//! removed, and the journal row kept and marked undone.

use chrono::{DateTime, Utc};
use memsift_core::OperationId;
use serde::Serialize;
use serde_json::Value;
use sqlx::types::Json;

use crate::handles::Memories;
use crate::journal::{ROW_JOURNAL_KINDS, journaled_rows};
use crate::revisions::Snapshot;
use crate::tx::sql;
use crate::{Result, StoreError, corrupt};

/// What an undo did.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Undone {
    /// The operation undone.
    pub operation_id: OperationId,
    /// Its kind.
    pub kind: String,
    /// The memory restored.
    pub memory_id: String,
    /// A memory the operation had created and the undo deleted.
    pub deleted_memory_id: Option<String>,
    /// Every memory whose prior state was put back (post-processing operations touch several).
    pub restored_memory_ids: Vec<String>,
    /// Every memory the operation had created and the undo deleted.
    pub deleted_memory_ids: Vec<String>,
    /// Links and entity joins written back as they were.
    pub n_links_restored: u64,
    /// Entity joins written back as they were.
    pub n_joins_restored: u64,
}

impl Memories<'_> {
    /// Reverses a journaled revision of `user_external_id`'s: the memory gets back exactly the
    /// state recorded before, a memory the operation created is deleted, and the journal row is
    /// marked undone (kept, for the history). An operation is undone at most once.
    pub async fn undo_operation(
        self,
        user_external_id: &str,
        operation_id: OperationId,
        now: DateTime<Utc>,
    ) -> Result<Undone> {
        self.write(async |tx| {
            tx.lock_user(user_external_id, true).await?;
            type OperationRow = (String, Json<Value>, Json<Value>, Option<DateTime<Utc>>);
            let row: Option<OperationRow> = tx
                .fetch_optional(sql!(
                    "SELECT o.kind, o.before, o.after, o.undone_at FROM operations o JOIN users u ON u.id = o.user_id
                     WHERE o.id = $1 AND u.external_id = $2",
                    operation_id,
                    user_external_id
                ))
                .await?;
            let Some((kind, Json(before), Json(after), undone_at)) = row else {
                return Err(StoreError::NotFound(format!(
                    "user `{user_external_id}` has no operation {operation_id}"
                )));
            };
            if let Some(undone_at) = undone_at {
                return Err(StoreError::Invalid(format!(
                    "operation {operation_id} was already undone at {undone_at}"
                )));
            }
            if ROW_JOURNAL_KINDS.contains(&kind.as_str()) {
                let (before, after) = journaled_rows(before, after)?;
                tx.restore_rows(&before, &after).await?;
                tx.mark_undone(operation_id, now).await?;
                let restored: Vec<String> = before.memories.iter().map(|state| state.id.clone()).collect();
                return Ok(Undone {
                    operation_id,
                    kind,
                    memory_id: restored.first().cloned().unwrap_or_default(),
                    deleted_memory_id: after.created_memory_ids.first().cloned(),
                    n_links_restored: before.links.len() as u64,
                    n_joins_restored: before.joins.len() as u64,
                    restored_memory_ids: restored,
                    deleted_memory_ids: after.created_memory_ids,
                });
            }
            if !matches!(kind.as_str(), "confirm" | "supersede" | "expire" | "score_archive") {
                return Err(StoreError::Invalid(format!(
                    "operation {operation_id} is a `{kind}`, which undo cannot reverse yet"
                )));
            }
            let before: Snapshot = serde_json::from_value(before).map_err(|error| corrupt("operations", error))?;
            let after: Snapshot = serde_json::from_value(after).map_err(|error| corrupt("operations", error))?;
            if let Some(created) = &after.created_memory_id {
                tx.execute(sql!("DELETE FROM memories WHERE id = $1", created)).await?;
            }
            let state = &before.state;
            let restored = tx
                .execute(sql!(
                    "UPDATE memories SET confidence = $2, expires_at = $3, archived_at = $4, archive_reason = $5,
                                         superseded_by = $6, updated_at = $7
                     WHERE id = $1",
                    &before.memory_id,
                    state.confidence,
                    state.expires_at,
                    state.archived_at,
                    &state.archive_reason,
                    &state.superseded_by,
                    state.updated_at
                ))
                .await;
            match restored {
                // The error rolls back the delete above too.
                Err(StoreError::Sql(sqlx::Error::Database(error))) if error.is_unique_violation() => {
                    Err(StoreError::Invalid(format!(
                        "cannot undo {operation_id}: memory {} would be active beside another active memory with the same text; archive that one first",
                        before.memory_id
                    )))
                }
                Err(error) => Err(error),
                Ok(_) => {
                    tx.mark_undone(operation_id, now).await?;
                    Ok(Undone {
                        operation_id,
                        kind,
                        restored_memory_ids: vec![before.memory_id.clone()],
                        deleted_memory_ids: after.created_memory_id.iter().cloned().collect(),
                        memory_id: before.memory_id,
                        deleted_memory_id: after.created_memory_id,
                        n_links_restored: 0,
                        n_joins_restored: 0,
                    })
                }
            }
        })
        .await
    }
}
