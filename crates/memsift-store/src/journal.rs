//! The journal of post-processing changes and the transaction steps every stage write shares:
//! claiming an answer, counting a run's changes against its cap, copying the exact rows a change
//! is about to touch, writing the `operations` row, and putting those rows back on undo.
//!
//! Each step is a method on [`WriteTx`], so it runs inside the caller's transaction and commits or
//! rolls back with it.

use chrono::{DateTime, Utc};
use memsift_core::drops::DroppedItem;
use memsift_core::status::RequestStatus;
use memsift_core::{OperationId, RequestId, UserId};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::tx::{Arg, WriteTx, sql};
use crate::{Result, StoreError, corrupt};

/// A memory's columns a post-processing operation may change, as journaled.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, sqlx::FromRow)]
pub(crate) struct StageMemoryState {
    pub(crate) id: String,
    pub(crate) confidence: f64,
    pub(crate) expires_at: Option<DateTime<Utc>>,
    pub(crate) archived_at: Option<DateTime<Utc>>,
    pub(crate) archive_reason: Option<String>,
    pub(crate) superseded_by: Option<String>,
    pub(crate) updated_at: DateTime<Utc>,
    pub(crate) refined_at: Option<DateTime<Utc>>,
    pub(crate) refinement_rejections: i64,
}

pub(crate) const STATE_SELECT: &str =
    "SELECT id, confidence, expires_at, archived_at, archive_reason, superseded_by, updated_at,
            refined_at, refinement_rejections
     FROM memories WHERE id = $1";

/// One `memory_links` row.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, sqlx::FromRow)]
pub(crate) struct LinkRow {
    pub(crate) source_id: String,
    pub(crate) target_id: String,
    pub(crate) kind: String,
    #[sqlx(try_from = "f64")]
    pub(crate) confidence: OrderedF64,
    pub(crate) reasoning: String,
    pub(crate) origin_request_id: Option<String>,
    pub(crate) created_at: DateTime<Utc>,
}

/// A confidence that sorts (links are sorted and deduplicated in snapshots).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub(crate) struct OrderedF64(pub(crate) f64);

impl Eq for OrderedF64 {}

impl PartialOrd for OrderedF64 {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for OrderedF64 {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.total_cmp(&other.0)
    }
}

impl From<f64> for OrderedF64 {
    fn from(value: f64) -> Self {
        OrderedF64(value)
    }
}

/// One `memory_entities` row.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, sqlx::FromRow)]
pub(crate) struct JoinRow {
    pub(crate) memory_id: String,
    pub(crate) entity_id: String,
}

/// An entity's columns entity GC changes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, sqlx::FromRow)]
pub(crate) struct EntityState {
    pub(crate) id: String,
    pub(crate) link_count: i64,
    pub(crate) last_linked_at: Option<DateTime<Utc>>,
    pub(crate) archived_at: Option<DateTime<Utc>>,
}

/// The rows an operation is about to change, exactly; an undo writes them back.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct RowsBefore {
    pub(crate) memories: Vec<StageMemoryState>,
    /// Memories whose every link is in `links` (an undo writes back any of these that is gone).
    pub(crate) links_of: Vec<String>,
    pub(crate) links: Vec<LinkRow>,
    /// Memories and entities whose every join is in `joins`.
    pub(crate) joins_of_memories: Vec<String>,
    pub(crate) joins_of_entities: Vec<String>,
    pub(crate) joins: Vec<JoinRow>,
    pub(crate) entities: Vec<EntityState>,
}

/// What an operation added, which an undo removes.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct RowsAfter {
    pub(crate) created_memory_ids: Vec<String>,
    pub(crate) created_links: Vec<LinkRow>,
    /// Entity joins the operation added to rows that outlive it (a merge's joins on its target).
    #[serde(default)]
    pub(crate) created_joins: Vec<JoinRow>,
    /// Memories this operation took out of the active set or created (counted against the cap).
    pub(crate) n_changed: i64,
    /// For people reading the journal.
    pub(crate) detail: Value,
}

/// The journal kinds whose `before`/`after` are [`RowsBefore`]/[`RowsAfter`]; `undo_operation`
/// restores each from its rows.
pub(crate) const ROW_JOURNAL_KINDS: &[&str] = &[
    "link",
    "consolidate",
    "refine",
    "refine_reject",
    "entity_merge",
    "entity_delete",
    "review",
    "review_narrow",
];

/// Which rows [`WriteTx::capture_rows`] copies.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Capture<'a> {
    /// Memories whose state is copied.
    pub(crate) memories: &'a [String],
    /// Memories every link of which is copied.
    pub(crate) links_of: &'a [String],
    /// Memories every entity join of which is copied.
    pub(crate) joins_of_memories: &'a [String],
    /// Entities whose row and every join are copied.
    pub(crate) joins_of_entities: &'a [String],
}

/// One journal row to write.
#[derive(Clone, Copy, Debug)]
pub(crate) struct JournalEntry<'a> {
    pub(crate) kind: &'a str,
    pub(crate) user_id: UserId,
    pub(crate) request_id: Option<RequestId>,
    pub(crate) reason: &'a str,
    pub(crate) now: DateTime<Utc>,
}

impl WriteTx {
    /// Marks an answered request `applied` (only if it is `succeeded`), recording `note` as its
    /// drop reason when nothing changed; returns whether this call claimed it.
    pub(crate) async fn claim_answer(
        &mut self,
        request_id: RequestId,
        n_items: usize,
        note: Option<&str>,
        now: DateTime<Utc>,
    ) -> Result<bool> {
        let drops: Vec<DroppedItem> = note.map(DroppedItem::unchanged).into_iter().collect();
        // The user's lock before the request's (see `users.rs`); an erased user's request is dead.
        let live = self
            .execute(sql!(
                "UPDATE users SET memory_version = memory_version
                 WHERE id = (SELECT user_id FROM llm_requests WHERE id = $1) AND external_id NOT LIKE $2",
                request_id,
                crate::users::erased_pattern()
            ))
            .await?;
        if live == 0 {
            return Ok(false);
        }
        let claimed = self
            .execute(sql!(
                "UPDATE llm_requests SET status = 'applied', applied_at = $2, n_items = $3, n_dropped = $4, drops = $5
                 WHERE id = $1 AND status = 'succeeded'",
                request_id,
                now,
                n_items,
                i64::from(note.is_some()),
                Arg::json(&drops)
            ))
            .await?;
        if claimed == 1 {
            self.count_drops(request_id, &drops).await?;
        }
        Ok(claimed == 1)
    }

    /// Counts a claimed answer's drops by reason in `request_drops`, which the metrics sum.
    pub(crate) async fn count_drops(&mut self, request_id: RequestId, drops: &[DroppedItem]) -> Result<()> {
        let mut by_reason = std::collections::BTreeMap::<&str, i64>::new();
        for drop in drops {
            *by_reason.entry(drop.reason.as_str()).or_default() += 1;
        }
        for (reason, n) in by_reason {
            self.execute(sql!(
                "INSERT INTO request_drops (request_id, reason, n) VALUES ($1, $2, $3)",
                request_id,
                reason,
                n
            ))
            .await?;
        }
        Ok(())
    }

    /// Why a claim failed: `Ok(None)` when an earlier apply already wrote the answer, else the
    /// error saying why there is nothing to apply.
    pub(crate) async fn unclaimed(&mut self, request_id: RequestId) -> Result<()> {
        let status: Option<String> = self
            .scalar_optional(sql!("SELECT status FROM llm_requests WHERE id = $1", request_id))
            .await?;
        match status.as_deref().map(RequestStatus::parse) {
            Some(Ok(RequestStatus::Applied)) => Ok(()),
            Some(Ok(other)) => Err(StoreError::NotFound(format!(
                "request {request_id} is `{other}`, not `succeeded`: there is no answer to apply"
            ))),
            Some(Err(error)) => Err(corrupt("llm_requests", error)),
            None => Err(StoreError::NotFound(format!("no request {request_id}"))),
        }
    }

    /// Memories a run has changed so far (journal rows of requests of that run, not undone).
    pub(crate) async fn run_changes(&mut self, run: &str) -> Result<i64> {
        let used: Option<i64> = self
            .scalar_one(sql!(
                "SELECT CAST(SUM(o.n_changed) AS BIGINT) FROM operations o
                 JOIN llm_requests r ON r.id = o.request_id
                 WHERE r.run_id = $1 AND o.undone_at IS NULL",
                run
            ))
            .await?;
        Ok(used.unwrap_or(0))
    }

    /// Writes one journal row and bumps the user's memory version (cached vector indexes reload).
    pub(crate) async fn journal(
        &mut self,
        entry: JournalEntry<'_>,
        before: &impl Serialize,
        after: &RowsAfter,
    ) -> Result<OperationId> {
        let operation_id = OperationId::new_v7();
        self.execute(sql!(
            "INSERT INTO operations (id, kind, user_id, request_id, reason, before, after, applied_at, n_changed)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
            operation_id,
            entry.kind,
            entry.user_id,
            entry.request_id,
            entry.reason,
            Arg::json(before),
            Arg::json(after),
            entry.now,
            after.n_changed
        ))
        .await?;
        self.bump_memory_version(entry.user_id).await?;
        Ok(operation_id)
    }

    /// Moves a user's memory version on, so every cached vector index of theirs reloads.
    pub(crate) async fn bump_memory_version(&mut self, user_id: UserId) -> Result<()> {
        self.execute(sql!(
            "UPDATE users SET memory_version = memory_version + 1 WHERE id = $1",
            user_id
        ))
        .await?;
        Ok(())
    }

    /// Copies the rows an operation may change (memory states, and the complete links and joins
    /// of the memories and entities named).
    pub(crate) async fn capture_rows(&mut self, capture: Capture<'_>) -> Result<RowsBefore> {
        let mut rows = RowsBefore::default();
        for id in capture.memories {
            let state: Option<StageMemoryState> = self.fetch_optional(sql!(STATE_SELECT, id)).await?;
            rows.memories.extend(state);
        }
        for id in capture.links_of {
            let links: Vec<LinkRow> = self
                .fetch_all(sql!(
                    "SELECT source_id, target_id, kind, confidence, reasoning, origin_request_id, created_at
                     FROM memory_links WHERE source_id = $1 OR target_id = $1",
                    id
                ))
                .await?;
            rows.links.extend(links);
            rows.links_of.push(id.clone());
        }
        for id in capture.joins_of_memories {
            let joins: Vec<JoinRow> = self
                .fetch_all(sql!(
                    "SELECT memory_id, entity_id FROM memory_entities WHERE memory_id = $1",
                    id
                ))
                .await?;
            rows.joins.extend(joins);
            rows.joins_of_memories.push(id.clone());
        }
        for id in capture.joins_of_entities {
            let joins: Vec<JoinRow> = self
                .fetch_all(sql!(
                    "SELECT memory_id, entity_id FROM memory_entities WHERE entity_id = $1",
                    id
                ))
                .await?;
            rows.joins.extend(joins);
            let state: Option<EntityState> = self
                .fetch_optional(sql!(
                    "SELECT id, link_count, last_linked_at, archived_at FROM entities WHERE id = $1",
                    id
                ))
                .await?;
            rows.entities.extend(state);
            rows.joins_of_entities.push(id.clone());
        }
        rows.links.sort();
        rows.links.dedup();
        rows.joins.sort();
        rows.joins.dedup();
        Ok(rows)
    }

    /// Puts back the rows a post-processing operation journaled: what it created removed
    /// (memories, with their links, joins and evidence by cascade; links and joins it added
    /// elsewhere, exactly), then the memory states, links, joins and entity rows it changed as they
    /// were. Rows other operations added since are left alone.
    pub(crate) async fn restore_rows(&mut self, before: &RowsBefore, after: &RowsAfter) -> Result<()> {
        for link in &after.created_links {
            self.execute(sql!(
                "DELETE FROM memory_links WHERE source_id = $1 AND target_id = $2 AND kind = $3",
                &link.source_id,
                &link.target_id,
                &link.kind
            ))
            .await?;
        }
        for id in &after.created_memory_ids {
            // Cascades remove its links, joins and evidence.
            self.execute(sql!("DELETE FROM memories WHERE id = $1", id)).await?;
        }
        for state in &before.memories {
            self.execute(sql!(
                "UPDATE memories SET confidence = $2, expires_at = $3, archived_at = $4, archive_reason = $5,
                                     superseded_by = $6, updated_at = $7, refined_at = $8, refinement_rejections = $9
                 WHERE id = $1",
                &state.id,
                state.confidence,
                state.expires_at,
                state.archived_at,
                &state.archive_reason,
                &state.superseded_by,
                state.updated_at,
                state.refined_at,
                state.refinement_rejections
            ))
            .await?;
        }
        for link in &before.links {
            self.insert_link(link, true).await?;
        }
        for join in &after.created_joins {
            self.execute(sql!(
                "DELETE FROM memory_entities WHERE memory_id = $1 AND entity_id = $2",
                &join.memory_id,
                &join.entity_id
            ))
            .await?;
        }
        for join in &before.joins {
            self.execute(sql!(
                "INSERT INTO memory_entities (memory_id, entity_id)
                 SELECT $1, $2 WHERE EXISTS (SELECT 1 FROM memories WHERE id = $1) ON CONFLICT DO NOTHING",
                &join.memory_id,
                &join.entity_id
            ))
            .await?;
        }
        for entity in &before.entities {
            self.execute(sql!(
                "UPDATE entities SET link_count = $2, last_linked_at = $3, archived_at = $4 WHERE id = $1",
                &entity.id,
                entity.link_count,
                entity.last_linked_at,
                entity.archived_at
            ))
            .await?;
        }
        Ok(())
    }

    /// Writes a link unless it exists; with `only_if_both_exist`, also unless one end is gone (an
    /// undo must not resurrect a link to a deleted memory). Returns whether it was written.
    pub(crate) async fn insert_link(&mut self, link: &LinkRow, only_if_both_exist: bool) -> Result<bool> {
        let statement = if only_if_both_exist {
            "INSERT INTO memory_links (source_id, target_id, kind, confidence, reasoning, origin_request_id, created_at)
             SELECT $1, $2, $3, $4, $5, $6, $7
             WHERE EXISTS (SELECT 1 FROM memories WHERE id = $1) AND EXISTS (SELECT 1 FROM memories WHERE id = $2)
             ON CONFLICT DO NOTHING"
        } else {
            "INSERT INTO memory_links (source_id, target_id, kind, confidence, reasoning, origin_request_id, created_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT DO NOTHING"
        };
        let inserted = self
            .execute(sql!(
                statement,
                &link.source_id,
                &link.target_id,
                &link.kind,
                link.confidence.0,
                &link.reasoning,
                &link.origin_request_id,
                link.created_at
            ))
            .await?;
        Ok(inserted == 1)
    }

    /// Marks a journal row undone and bumps its user's memory version.
    pub(crate) async fn mark_undone(&mut self, operation_id: OperationId, now: DateTime<Utc>) -> Result<()> {
        self.execute(sql!(
            "UPDATE operations SET undone_at = $2 WHERE id = $1",
            operation_id,
            now
        ))
        .await?;
        self.execute(sql!(
            "UPDATE users SET memory_version = memory_version + 1
             WHERE id = (SELECT user_id FROM operations WHERE id = $1)",
            operation_id
        ))
        .await?;
        Ok(())
    }
}

/// Reads a journaled `before`/`after` pair of one of the [`ROW_JOURNAL_KINDS`].
pub(crate) fn journaled_rows(before: Value, after: Value) -> Result<(RowsBefore, RowsAfter)> {
    let before = serde_json::from_value(before).map_err(|error| corrupt("operations", error))?;
    let after = serde_json::from_value(after).map_err(|error| corrupt("operations", error))?;
    Ok((before, after))
}
