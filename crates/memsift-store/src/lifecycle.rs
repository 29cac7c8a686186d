//! Lifecycle revisions of one memory (confirm, supersede, expire), each journaled in
//! `operations` with the state before and after, and `undo` of a journaled operation.
//!
//! Nothing is deleted by a revision: a superseded or expired memory is archived with the reason
//! and stays readable, so an undo can put back exactly the row that was there.

use chrono::{DateTime, Utc};
use memsift_core::text::{collapse_whitespace, dedupe_key};
use memsift_core::{MemoryId, OperationId};
use serde::{Deserialize, Serialize};
use sqlx::types::Json;

use crate::{Result, Store, StoreError, in_write_tx};

/// Longest text a superseding memory may have, as the processor allows for extracted ones.
const MAX_TEXT_CHARS: usize = 1000;

/// What to do to a memory.
#[derive(Clone, Debug, PartialEq)]
pub enum Revision {
    /// The user confirmed it: confidence becomes 1.
    Confirm,
    /// It is no longer right; `content` states what is, as a new memory that supersedes it.
    Supersede {
        /// The new memory's text.
        content: String,
    },
    /// It stopped being true now: it expires and is archived.
    Expire,
}

impl Revision {
    fn kind(&self) -> &'static str {
        match self {
            Revision::Confirm => "confirm",
            Revision::Supersede { .. } => "supersede",
            Revision::Expire => "expire",
        }
    }
}

/// The fields a revision changes, as journaled before and after.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, sqlx::FromRow)]
pub struct MemoryState {
    /// Confidence.
    pub confidence: f64,
    /// When it stops being true.
    pub expires_at: Option<DateTime<Utc>>,
    /// When it left the active set.
    pub archived_at: Option<DateTime<Utc>>,
    /// Why.
    pub archive_reason: Option<String>,
    /// The memory that replaced it.
    pub superseded_by: Option<String>,
    /// Last change (restored by an undo, so an undone row is the row that was).
    pub updated_at: DateTime<Utc>,
}

/// One journal entry's `before` or `after`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
struct Snapshot {
    memory_id: String,
    state: MemoryState,
    /// A memory the operation created (supersede), which an undo deletes.
    #[serde(default)]
    created_memory_id: Option<String>,
}

/// What a revision did.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Revised {
    /// The journal row; `memsift undo` takes it.
    pub operation_id: OperationId,
    /// The memory a supersede created.
    pub new_memory_id: Option<MemoryId>,
    /// The revised memory's state now.
    pub state: MemoryState,
}

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

/// Marks a journal row undone and bumps its user's memory version (cached vector indexes reload),
/// inside the caller's transaction.
macro_rules! mark_undone {
    ($tx:ident, $operation_id:expr, $now:expr) => {{
        sqlx::query("UPDATE operations SET undone_at = $2 WHERE id = $1")
            .bind($operation_id.to_string())
            .bind($now)
            .execute(&mut *$tx)
            .await?;
        sqlx::query(
            "UPDATE users SET memory_version = memory_version + 1
             WHERE id = (SELECT user_id FROM operations WHERE id = $1)",
        )
        .bind($operation_id.to_string())
        .execute(&mut *$tx)
        .await?;
    }};
}

const STATE_COLUMNS: &str = "confidence, expires_at, archived_at, archive_reason, superseded_by, updated_at";

impl Store {
    /// Applies `revision` to `user_external_id`'s memory `memory_id` with the operator's `reason`,
    /// journaled in one transaction. Another user's memory is `NotFound` (invariant 9); an
    /// archived memory cannot be revised (undo its archiving first).
    pub async fn revise_memory(
        &self,
        user_external_id: &str,
        memory_id: MemoryId,
        revision: &Revision,
        reason: &str,
        now: DateTime<Utc>,
    ) -> Result<Revised> {
        let reason = reason.trim();
        if reason.is_empty() {
            return Err(StoreError::Invalid(
                "a revision needs a reason (--reason \"…\"); it is kept in the journal".to_owned(),
            ));
        }
        let content = match revision {
            Revision::Supersede { content } => {
                let content = collapse_whitespace(content.trim());
                if content.is_empty() || content.chars().count() > MAX_TEXT_CHARS {
                    return Err(StoreError::Invalid(format!(
                        "the superseding text must have 1 to {MAX_TEXT_CHARS} characters"
                    )));
                }
                Some(content)
            }
            _ => None,
        };
        let select = format!(
            "SELECT {STATE_COLUMNS} FROM memories
             WHERE id = $1 AND user_id = (SELECT id FROM users WHERE external_id = $2)"
        );
        in_write_tx!(self, |tx| {
            let before: Option<MemoryState> = sqlx::query_as(&select)
                .bind(memory_id.to_string())
                .bind(user_external_id)
                .fetch_optional(&mut *tx)
                .await?;
            match before {
                None => Err(StoreError::NotFound(format!(
                    "user `{user_external_id}` has no memory {memory_id}; `memsift memories --user {user_external_id}` lists them"
                ))),
                Some(before) if before.archived_at.is_some() => Err(StoreError::Invalid(format!(
                    "memory {memory_id} is archived ({}); undo that operation first",
                    before.archive_reason.clone().unwrap_or_default()
                ))),
                Some(before) => {
                    let mut new_memory_id = None;
                    match revision {
                        Revision::Confirm => {
                            sqlx::query("UPDATE memories SET confidence = 1.0, updated_at = $2 WHERE id = $1")
                                .bind(memory_id.to_string())
                                .bind(now)
                                .execute(&mut *tx)
                                .await?;
                        }
                        Revision::Expire => {
                            sqlx::query(
                                "UPDATE memories SET expires_at = $2, archived_at = $2, archive_reason = $3, updated_at = $2
                                 WHERE id = $1",
                            )
                            .bind(memory_id.to_string())
                            .bind(now)
                            .bind(format!("expired: {reason}"))
                            .execute(&mut *tx)
                            .await?;
                        }
                        Revision::Supersede { .. } => {
                            let text = content.clone().unwrap_or_default();
                            let new_id = MemoryId::new_v7();
                            // Archive first: the new text may normalise to the old one's key.
                            sqlx::query(
                                "UPDATE memories SET archived_at = $2, archive_reason = $3, updated_at = $2 WHERE id = $1",
                            )
                            .bind(memory_id.to_string())
                            .bind(now)
                            .bind(format!("superseded: {reason}"))
                            .execute(&mut *tx)
                            .await?;
                            let inserted = sqlx::query(
                                "INSERT INTO memories (id, user_id, text, dedupe_key, confidence, sensitive, temporal,
                                                       prompt_version, created_at, updated_at)
                                 SELECT $1, user_id, $2, $3, 1.0, sensitive, temporal, 'operator', $4, $4
                                 FROM memories WHERE id = $5
                                 ON CONFLICT (user_id, dedupe_key) WHERE archived_at IS NULL DO NOTHING",
                            )
                            .bind(new_id.to_string())
                            .bind(&text)
                            .bind(dedupe_key(&text))
                            .bind(now)
                            .bind(memory_id.to_string())
                            .execute(&mut *tx)
                            .await?
                            .rows_affected();
                            if inserted == 0 {
                                // `return` drops the transaction, rolling back the archiving above.
                                return Err(StoreError::Invalid(format!(
                                    "user `{user_external_id}` already has an active memory saying that; supersede with that one instead"
                                )));
                            }
                            // The pointer needs the new row to exist (a foreign key).
                            sqlx::query("UPDATE memories SET superseded_by = $2 WHERE id = $1")
                                .bind(memory_id.to_string())
                                .bind(new_id.to_string())
                                .execute(&mut *tx)
                                .await?;
                            new_memory_id = Some(new_id);
                        }
                    }
                    let after: MemoryState = sqlx::query_as(&select)
                        .bind(memory_id.to_string())
                        .bind(user_external_id)
                        .fetch_one(&mut *tx)
                        .await?;
                    let operation_id = OperationId::new_v7();
                    let before_snapshot = Snapshot {
                        memory_id: memory_id.to_string(),
                        state: before,
                        created_memory_id: None,
                    };
                    let after_snapshot = Snapshot {
                        memory_id: memory_id.to_string(),
                        state: after.clone(),
                        created_memory_id: new_memory_id.map(|id| id.to_string()),
                    };
                    sqlx::query(
                        "INSERT INTO operations (id, kind, user_id, reason, before, after, applied_at)
                         SELECT $1, $2, user_id, $3, $4, $5, $6 FROM memories WHERE id = $7",
                    )
                    .bind(operation_id.to_string())
                    .bind(revision.kind())
                    .bind(reason)
                    .bind(Json(&before_snapshot))
                    .bind(Json(&after_snapshot))
                    .bind(now)
                    .bind(memory_id.to_string())
                    .execute(&mut *tx)
                    .await?;
                    sqlx::query(
                        "UPDATE users SET memory_version = memory_version + 1
                         WHERE id = (SELECT user_id FROM memories WHERE id = $1)",
                    )
                    .bind(memory_id.to_string())
                    .execute(&mut *tx)
                    .await?;
                    Ok(Revised {
                        operation_id,
                        new_memory_id,
                        state: after,
                    })
                }
            }
        })
    }

    /// A user's journal entries of one kind, oldest first (for audits, and undoing a run).
    pub async fn operation_ids(&self, user_external_id: &str, kind: &str) -> Result<Vec<OperationId>> {
        let ids: Vec<String> = crate::on_pool!(self, |pool| {
            sqlx::query_scalar(
                "SELECT o.id FROM operations o JOIN users u ON u.id = o.user_id
                 WHERE u.external_id = $1 AND o.kind = $2 ORDER BY o.applied_at, o.id",
            )
            .bind(user_external_id)
            .bind(kind)
            .fetch_all(pool)
            .await?
        });
        ids.iter()
            .map(|id| OperationId::parse(id).map_err(|error| crate::corrupt("operations", error)))
            .collect()
    }

    /// Every memory of a user, archived ones included, with the fields revisions change:
    /// (id, text, state), for audits and exact before/after comparisons.
    pub async fn user_memory_states(
        &self,
        user_id: memsift_core::UserId,
    ) -> Result<Vec<(String, String, MemoryState)>> {
        #[derive(sqlx::FromRow)]
        struct Row {
            id: String,
            text: String,
            #[sqlx(flatten)]
            state: MemoryState,
        }
        let sql = format!("SELECT id, text, {STATE_COLUMNS} FROM memories WHERE user_id = $1 ORDER BY id");
        let rows: Vec<Row> = crate::on_pool!(self, |pool| {
            sqlx::query_as(&sql).bind(user_id.to_string()).fetch_all(pool).await?
        });
        Ok(rows.into_iter().map(|row| (row.id, row.text, row.state)).collect())
    }

    /// Reverses a journaled revision of `user_external_id`'s: the memory gets back exactly the
    /// state recorded before, a memory the operation created is deleted, and the journal row is
    /// marked undone (kept, for the history). An operation is undone at most once.
    pub async fn undo_operation(
        &self,
        user_external_id: &str,
        operation_id: OperationId,
        now: DateTime<Utc>,
    ) -> Result<Undone> {
        in_write_tx!(self, |tx| {
            type OperationRow = (
                String,
                Json<serde_json::Value>,
                Json<serde_json::Value>,
                Option<DateTime<Utc>>,
            );
            let row: Option<OperationRow> = sqlx::query_as(
                "SELECT o.kind, o.before, o.after, o.undone_at FROM operations o JOIN users u ON u.id = o.user_id
                 WHERE o.id = $1 AND u.external_id = $2",
            )
            .bind(operation_id.to_string())
            .bind(user_external_id)
            .fetch_optional(&mut *tx)
            .await?;
            match row {
                None => Err(StoreError::NotFound(format!(
                    "user `{user_external_id}` has no operation {operation_id}"
                ))),
                Some((_, _, _, Some(undone_at))) => Err(StoreError::Invalid(format!(
                    "operation {operation_id} was already undone at {undone_at}"
                ))),
                Some((kind, Json(before), Json(after), None))
                    if crate::postprocess::ROW_JOURNAL_KINDS.contains(&kind.as_str()) =>
                {
                    let (before, after) = crate::postprocess::journaled_rows(before, after)?;
                    crate::postprocess::restore_rows!(tx, &before, &after);
                    mark_undone!(tx, operation_id, now);
                    let restored: Vec<String> = before.memories.iter().map(|state| state.id.clone()).collect();
                    Ok(Undone {
                        operation_id,
                        kind,
                        memory_id: restored.first().cloned().unwrap_or_default(),
                        deleted_memory_id: after.created_memory_ids.first().cloned(),
                        n_links_restored: before.links.len() as u64,
                        n_joins_restored: before.joins.len() as u64,
                        restored_memory_ids: restored,
                        deleted_memory_ids: after.created_memory_ids,
                    })
                }
                Some((kind, _, _, None))
                    if !matches!(kind.as_str(), "confirm" | "supersede" | "expire" | "score_archive") =>
                {
                    Err(StoreError::Invalid(format!(
                        "operation {operation_id} is a `{kind}`, which undo cannot reverse yet"
                    )))
                }
                Some((kind, Json(before), Json(after), None)) => {
                    let before: Snapshot =
                        serde_json::from_value(before).map_err(|error| crate::corrupt("operations", error))?;
                    let after: Snapshot =
                        serde_json::from_value(after).map_err(|error| crate::corrupt("operations", error))?;
                    if let Some(created) = &after.created_memory_id {
                        sqlx::query("DELETE FROM memories WHERE id = $1")
                            .bind(created)
                            .execute(&mut *tx)
                            .await?;
                    }
                    let state = &before.state;
                    let restored = sqlx::query(
                        "UPDATE memories SET confidence = $2, expires_at = $3, archived_at = $4, archive_reason = $5,
                                             superseded_by = $6, updated_at = $7
                         WHERE id = $1",
                    )
                    .bind(&before.memory_id)
                    .bind(state.confidence)
                    .bind(state.expires_at)
                    .bind(state.archived_at)
                    .bind(&state.archive_reason)
                    .bind(&state.superseded_by)
                    .bind(state.updated_at)
                    .execute(&mut *tx)
                    .await;
                    match restored {
                        // `return` drops the transaction, rolling back the delete above too.
                        Err(sqlx::Error::Database(error)) if error.is_unique_violation() => {
                            return Err(StoreError::Invalid(format!(
                                "cannot undo {operation_id}: memory {} would be active beside another active memory with the same text; archive that one first",
                                before.memory_id
                            )));
                        }
                        Err(error) => return Err(error.into()),
                        Ok(_) => {
                            mark_undone!(tx, operation_id, now);
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
                }
            }
        })
    }
}
