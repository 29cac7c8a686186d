//! Lifecycle revisions of one memory by an operator (confirm, supersede, expire), each journaled
//! in `operations` with the state before and after.
//!
//! Nothing is deleted by a revision: a superseded or expired memory is archived with the reason
//! and stays readable, so an undo can put back exactly the row that was there.

use chrono::{DateTime, Utc};
use memsift_core::text::{collapse_whitespace, dedupe_key};
use memsift_core::{MemoryId, OperationId, UserId};
use serde::{Deserialize, Serialize};

use crate::memory_insert::{DEFAULT_IMPORTANCE, Inserted, MemoryInsert};
use crate::tx::{Arg, sql};
use crate::{Result, Store, StoreError, corrupt};

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
pub(crate) struct Snapshot {
    pub(crate) memory_id: String,
    pub(crate) state: MemoryState,
    /// A memory the operation created (supersede), which an undo deletes.
    #[serde(default)]
    pub(crate) created_memory_id: Option<String>,
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

const STATE_COLUMNS: &str = "confidence, expires_at, archived_at, archive_reason, superseded_by, updated_at";

impl Revision {
    fn kind(&self) -> &'static str {
        match self {
            Revision::Confirm => "confirm",
            Revision::Supersede { .. } => "supersede",
            Revision::Expire => "expire",
        }
    }
}

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
        self.write(async |tx| {
            let before: Option<MemoryState> = tx.fetch_optional(sql!(&select, memory_id, user_external_id)).await?;
            let Some(before) = before else {
                return Err(StoreError::NotFound(format!(
                    "user `{user_external_id}` has no memory {memory_id}; `memsift memories --user {user_external_id}` lists them"
                )));
            };
            if before.archived_at.is_some() {
                return Err(StoreError::Invalid(format!(
                    "memory {memory_id} is archived ({}); undo that operation first",
                    before.archive_reason.clone().unwrap_or_default()
                )));
            }
            let (user_id, sensitive, temporal): (String, bool, String) = tx
                .fetch_one(sql!("SELECT user_id, sensitive, temporal FROM memories WHERE id = $1", memory_id))
                .await?;
            let user_id = UserId::parse(&user_id).map_err(|error| corrupt("memories", error))?;
            let mut new_memory_id = None;
            match revision {
                Revision::Confirm => {
                    tx.execute(sql!(
                        "UPDATE memories SET confidence = 1.0, updated_at = $2 WHERE id = $1",
                        memory_id,
                        now
                    ))
                    .await?;
                }
                Revision::Expire => {
                    tx.execute(sql!(
                        "UPDATE memories SET expires_at = $2, archived_at = $2, archive_reason = $3, updated_at = $2
                         WHERE id = $1",
                        memory_id,
                        now,
                        format!("expired: {reason}")
                    ))
                    .await?;
                }
                Revision::Supersede { .. } => {
                    let text = content.clone().unwrap_or_default();
                    let key = dedupe_key(&text);
                    // Archive first: the new text may normalise to the old one's key.
                    tx.execute(sql!(
                        "UPDATE memories SET archived_at = $2, archive_reason = $3, updated_at = $2 WHERE id = $1",
                        memory_id,
                        now,
                        format!("superseded: {reason}")
                    ))
                    .await?;
                    let memory = MemoryInsert {
                        user_id,
                        text: &text,
                        dedupe_key: &key,
                        importance: DEFAULT_IMPORTANCE,
                        confidence: 1.0,
                        happens_at: None,
                        expires_at: None,
                        sensitive,
                        temporal: &temporal,
                        source_segment_id: None,
                        source_request_id: None,
                        prompt_version: "operator",
                        model: None,
                        refined_at: None,
                        embedding: None,
                        now,
                    };
                    // Each refusal returns an error, which rolls the archiving above back too.
                    let new_id = match tx.insert_memory(&memory).await? {
                        Inserted::Written(id) => id,
                        Inserted::Duplicate => {
                            return Err(StoreError::Invalid(format!(
                                "user `{user_external_id}` already has an active memory saying that; supersede with that one instead"
                            )));
                        }
                        Inserted::Erased => {
                            return Err(StoreError::Invalid(format!(
                                "user `{user_external_id}` had that fact erased; it cannot be stored again"
                            )));
                        }
                    };
                    // The pointer needs the new row to exist (a foreign key).
                    tx.execute(sql!(
                        "UPDATE memories SET superseded_by = $2 WHERE id = $1",
                        memory_id,
                        new_id
                    ))
                    .await?;
                    new_memory_id = Some(new_id);
                }
            }
            let after: MemoryState = tx.fetch_one(sql!(&select, memory_id, user_external_id)).await?;
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
            tx.execute(sql!(
                "INSERT INTO operations (id, kind, user_id, reason, before, after, applied_at)
                 VALUES ($1, $2, $3, $4, $5, $6, $7)",
                operation_id,
                revision.kind(),
                user_id,
                reason,
                Arg::json(&before_snapshot),
                Arg::json(&after_snapshot),
                now
            ))
            .await?;
            tx.bump_memory_version(user_id).await?;
            Ok(Revised {
                operation_id,
                new_memory_id,
                state: after,
            })
        })
        .await
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
}
