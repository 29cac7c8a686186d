//! Lifecycle revisions of one memory by an operator (confirm, supersede, expire), each journaled
//! in `operations` with the state before and after.
//!
//! Nothing is deleted by a revision: a superseded or expired memory is archived with the reason
//! and stays readable, so an undo can put back exactly the row that was there.

use chrono::{DateTime, Utc};
use memsift_core::text::{collapse_whitespace, dedupe_key};
use memsift_core::{MemoryId, OperationId, UserId};
use serde::{Deserialize, Serialize};

use crate::handles::Memories;
use crate::memory_insert::{DEFAULT_IMPORTANCE, Inserted, MemoryInsert, OPERATOR_MODEL};
use crate::tx::{Arg, WriteTx, sql};
use crate::{Result, StoreError, corrupt};

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

pub(crate) const STATE_COLUMNS: &str = "confidence, expires_at, archived_at, archive_reason, superseded_by, updated_at";

impl Revision {
    fn kind(&self) -> &'static str {
        match self {
            Revision::Confirm => "confirm",
            Revision::Supersede { .. } => "supersede",
            Revision::Expire => "expire",
        }
    }
}

/// The memory a revision acts on, as its transaction found it.
struct Target<'a> {
    memory_id: MemoryId,
    user_id: UserId,
    user_external_id: &'a str,
    /// Carried over to a superseding memory.
    sensitive: bool,
    /// Carried over to a superseding memory.
    temporal: String,
}

/// Refuses a revision without a reason, and returns a supersede's new text with its whitespace
/// collapsed, refused when it is empty or too long; checked before any transaction begins.
fn checked_input(revision: &Revision, reason: &str) -> Result<Option<String>> {
    if reason.is_empty() {
        return Err(StoreError::Invalid(
            "a revision needs a reason (--reason \"…\"); it is kept in the journal".to_owned(),
        ));
    }
    Ok(match revision {
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
    })
}

impl Memories<'_> {
    /// Applies `revision` to `user_external_id`'s memory `memory_id` with the operator's `reason`,
    /// journaled in one transaction. Another user's memory is `NotFound` (invariant 9); an
    /// archived memory cannot be revised (undo its archiving first).
    pub async fn revise_memory(
        self,
        user_external_id: &str,
        memory_id: MemoryId,
        revision: &Revision,
        reason: &str,
        now: DateTime<Utc>,
    ) -> Result<Revised> {
        let reason = reason.trim();
        let content = checked_input(revision, reason)?;
        let select = format!(
            "SELECT {STATE_COLUMNS} FROM memories
             WHERE id = $1 AND user_id = (SELECT id FROM users WHERE external_id = $2)"
        );
        self.write(async |tx| {
            tx.lock_user(user_external_id, true).await?;
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
            let target = Target {
                memory_id,
                user_id: UserId::parse(&user_id).map_err(|error| corrupt("memories", error))?,
                user_external_id,
                sensitive,
                temporal,
            };
            let mut new_memory_id = None;
            match revision {
                Revision::Confirm => tx.confirm(memory_id, now).await?,
                Revision::Expire => tx.expire(memory_id, reason, now).await?,
                Revision::Supersede { .. } => {
                    let text = content.clone().unwrap_or_default();
                    new_memory_id = Some(tx.supersede(&target, &text, reason, now).await?);
                }
            }
            let after: MemoryState = tx.fetch_one(sql!(&select, memory_id, user_external_id)).await?;
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
            let operation_id = tx
                .journal_revision(&target, revision, reason, (&before_snapshot, &after_snapshot), now)
                .await?;
            Ok(Revised {
                operation_id,
                new_memory_id,
                state: after,
            })
        })
        .await
    }
}

impl WriteTx {
    /// The user confirmed the memory: confidence becomes 1.
    async fn confirm(&mut self, memory_id: MemoryId, now: DateTime<Utc>) -> Result<()> {
        self.execute(sql!(
            "UPDATE memories SET confidence = 1.0, updated_at = $2 WHERE id = $1",
            memory_id,
            now
        ))
        .await?;
        Ok(())
    }

    /// The memory stopped being true now: it expires and is archived with the reason.
    async fn expire(&mut self, memory_id: MemoryId, reason: &str, now: DateTime<Utc>) -> Result<()> {
        self.execute(sql!(
            "UPDATE memories SET expires_at = $2, archived_at = $2, archive_reason = $3, updated_at = $2
             WHERE id = $1",
            memory_id,
            now,
            format!("expired: {reason}")
        ))
        .await?;
        Ok(())
    }

    /// Archives the memory and writes `text` as the operator's memory that supersedes it; returns
    /// the new memory's id.
    async fn supersede(
        &mut self,
        target: &Target<'_>,
        text: &str,
        reason: &str,
        now: DateTime<Utc>,
    ) -> Result<MemoryId> {
        let user_external_id = target.user_external_id;
        let key = dedupe_key(text);
        // Archive first: the new text may normalise to the old one's key.
        self.execute(sql!(
            "UPDATE memories SET archived_at = $2, archive_reason = $3, updated_at = $2 WHERE id = $1",
            target.memory_id,
            now,
            format!("superseded: {reason}")
        ))
        .await?;
        let memory = MemoryInsert {
            id: MemoryId::new_v7(),
            user_id: target.user_id,
            text,
            dedupe_key: &key,
            importance: DEFAULT_IMPORTANCE,
            confidence: 1.0,
            happens_at: None,
            expires_at: None,
            sensitive: target.sensitive,
            temporal: &target.temporal,
            source_segment_id: None,
            source_request_id: None,
            prompt_version: "operator",
            model: Some(OPERATOR_MODEL),
            refined_at: None,
            embedding: None,
            now,
        };
        // Each refusal returns an error, which rolls the archiving above back too.
        let new_id = match self.insert_memory(&memory).await? {
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
        self.execute(sql!(
            "UPDATE memories SET superseded_by = $2 WHERE id = $1",
            target.memory_id,
            new_id
        ))
        .await?;
        Ok(new_id)
    }

    /// Journals the revision with the memory's state before and after, and bumps the user's
    /// memory version (cached vector indexes reload).
    async fn journal_revision(
        &mut self,
        target: &Target<'_>,
        revision: &Revision,
        reason: &str,
        (before, after): (&Snapshot, &Snapshot),
        now: DateTime<Utc>,
    ) -> Result<OperationId> {
        let operation_id = OperationId::new_v7();
        self.execute(sql!(
            "INSERT INTO operations (id, kind, user_id, reason, before, after, applied_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7)",
            operation_id,
            revision.kind(),
            target.user_id,
            reason,
            Arg::json(before),
            Arg::json(after),
            now
        ))
        .await?;
        self.bump_memory_version(target.user_id).await?;
        Ok(operation_id)
    }
}
