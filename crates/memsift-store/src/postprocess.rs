//! Post-processing writes: stage requests, links, replacements (consolidation and refinement),
//! entity GC verdicts and segment summaries.
//!
//! Every change to memories, links or entity joins is one transaction that also writes the exact
//! rows it is about to change into `operations`, so `undo_operation` puts those rows back. One run
//! of a stage changes at most `cap` of a user's memories: the run id and its cap travel in each
//! request's `subject`, and an apply that would pass the cap writes nothing but a note.

use std::collections::HashSet;

use chrono::{DateTime, Utc};
use memsift_core::status::Purpose;
use memsift_core::text::{collapse_whitespace, dedupe_key};
use memsift_core::{MemoryId, OperationId, RequestId, SegmentId, UserId};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sqlx::types::Json;

use crate::extraction::NewRequest;
use crate::vectors::vector_to_le_bytes;
use crate::{Result, Store, StoreError, corrupt, in_write_tx, on_pool};

/// A memory as a stage plans with it.
#[derive(Clone, Debug, PartialEq)]
pub struct StageMemory {
    /// Its id.
    pub id: MemoryId,
    /// Its text.
    pub text: String,
    /// Memories the extractor said it relates to.
    pub link_hints: Vec<MemoryId>,
}

/// An entity as entity GC sees it.
#[derive(Clone, Debug, PartialEq, sqlx::FromRow)]
pub struct EntityRow {
    /// Its id.
    pub id: String,
    /// The name as first written.
    pub name: String,
    /// Its kind.
    pub kind: String,
    /// Memories joined to it.
    pub link_count: i64,
}

/// A link a relationship answer asks for: `source <kind> target`.
#[derive(Clone, Debug, PartialEq)]
pub struct NewLink {
    /// The classified memory.
    pub source: MemoryId,
    /// The candidate it was compared with.
    pub target: MemoryId,
    /// `conflicts`, `supersedes`, `causes`, `instance_of`, `invalidated_by` or `motivated_by`.
    pub kind: String,
    /// The classifier's confidence (callers keep only ≥ 0.7).
    pub confidence: f64,
    /// Why.
    pub reasoning: String,
    /// Whether the older of the two memories becomes superseded by the newer.
    pub supersedes_older: bool,
}

/// Where one run of a stage stands against its cap.
#[derive(Clone, Debug, PartialEq)]
pub struct RunCap {
    /// The run's id (in every request's `subject.run`).
    pub run: String,
    /// Memories the run may change at most.
    pub cap: i64,
}

/// Memories replaced by new ones: a consolidation (several into one) or a refinement (one into
/// one or more).
#[derive(Clone, Debug)]
pub struct Replacement {
    /// The answered request.
    pub request_id: RequestId,
    /// Whose memories.
    pub user_id: UserId,
    /// The memories replaced; each must still be active.
    pub originals: Vec<MemoryId>,
    /// The texts that replace them.
    pub new_texts: Vec<String>,
    /// One vector per new text, and the model that made them.
    pub embeddings: Option<(String, Vec<Vec<f32>>)>,
    /// `consolidate` or `refine` (the journal's kind).
    pub kind: &'static str,
    /// Why (the model's reasoning), kept in the journal and the archive reason.
    pub reason: String,
    /// The run and its cap.
    pub cap: RunCap,
    /// The clock reading.
    pub now: DateTime<Utc>,
}

/// Memories a batch of planned stage requests covers.
#[derive(Clone, Copy, Debug, Default)]
pub struct Covered<'a> {
    /// Classified by relationship classification (whether or not a request was needed).
    pub related: &'a [MemoryId],
    /// Reviewed by the extraction reviewer.
    pub reviewed: &'a [MemoryId],
}

/// A memory as the extraction reviewer sees it.
#[derive(Clone, Debug, PartialEq, sqlx::FromRow)]
pub struct ReviewMemory {
    /// Its id.
    pub id: String,
    /// Its user.
    pub user_id: String,
    /// Its text.
    pub text: String,
    /// Confidence.
    pub confidence: f64,
    /// When the event happens.
    pub happens_at: Option<DateTime<Utc>>,
    /// When it stops being true.
    pub expires_at: Option<DateTime<Utc>>,
    /// How long it holds.
    pub temporal: String,
}

/// What entity GC decided for one entity.
#[derive(Clone, Debug, PartialEq)]
pub enum EntityDecision {
    /// Move its joins to `target` (validated: same user and kind, active, one of `candidates`).
    Merge {
        /// The entity that stays.
        target: String,
        /// The ids the request offered.
        candidates: Vec<String>,
    },
    /// Remove its joins and archive it.
    Delete,
    /// Nothing.
    Keep,
}

/// What applying one stage answer did.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct StageApplied {
    /// Links written.
    pub n_links: u64,
    /// Memories written.
    pub n_memories_created: u64,
    /// Memories archived (superseded, consolidated, refined).
    pub n_memories_archived: u64,
    /// Entities merged or deleted.
    pub n_entities_changed: u64,
    /// The journal row, when something changed.
    pub operation_id: Option<OperationId>,
    /// Why nothing changed, when nothing did (`keep`, cap reached, a member archived since, …).
    pub note: Option<String>,
}

/// The outcome of a stage apply.
#[derive(Clone, Debug, PartialEq)]
pub enum StageOutcome {
    /// Written now.
    Applied(StageApplied),
    /// An earlier apply wrote it; nothing was written.
    AlreadyApplied,
}

/// A consolidation proposal waiting for its independent review.
#[derive(Clone, Debug)]
pub struct ProposalToReview {
    /// The proposal request.
    pub request_id: RequestId,
    /// Whose memories.
    pub user_id: UserId,
    /// Its subject (members, run, cap).
    pub subject: Value,
    /// The proposal answer.
    pub raw_output: String,
}

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

const STATE_SELECT: &str = "SELECT id, confidence, expires_at, archived_at, archive_reason, superseded_by, updated_at,
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

/// The journal kinds this module writes; `undo_operation` restores each from its rows.
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

/// Reads the rows an operation may change (memory states, and the complete links and joins of
/// the memories and entities named) inside the caller's transaction.
macro_rules! capture_rows {
    ($tx:ident, $memories:expr, $links_of:expr, $joins_of_memories:expr, $joins_of_entities:expr) => {{
        let mut rows = RowsBefore::default();
        for id in $memories {
            let state: Option<StageMemoryState> = sqlx::query_as(STATE_SELECT)
                .bind(id.to_string())
                .fetch_optional(&mut *$tx)
                .await?;
            rows.memories.extend(state);
        }
        for id in $links_of {
            let links: Vec<LinkRow> = sqlx::query_as(
                "SELECT source_id, target_id, kind, confidence, reasoning, origin_request_id, created_at
                 FROM memory_links WHERE source_id = $1 OR target_id = $1",
            )
            .bind(id.to_string())
            .fetch_all(&mut *$tx)
            .await?;
            rows.links.extend(links);
            rows.links_of.push(id.to_string());
        }
        for id in $joins_of_memories {
            let joins: Vec<JoinRow> =
                sqlx::query_as("SELECT memory_id, entity_id FROM memory_entities WHERE memory_id = $1")
                    .bind(id.to_string())
                    .fetch_all(&mut *$tx)
                    .await?;
            rows.joins.extend(joins);
            rows.joins_of_memories.push(id.to_string());
        }
        for id in $joins_of_entities {
            let joins: Vec<JoinRow> =
                sqlx::query_as("SELECT memory_id, entity_id FROM memory_entities WHERE entity_id = $1")
                    .bind(id.to_string())
                    .fetch_all(&mut *$tx)
                    .await?;
            rows.joins.extend(joins);
            let state: Option<EntityState> =
                sqlx::query_as("SELECT id, link_count, last_linked_at, archived_at FROM entities WHERE id = $1")
                    .bind(id.to_string())
                    .fetch_optional(&mut *$tx)
                    .await?;
            rows.entities.extend(state);
            rows.joins_of_entities.push(id.to_string());
        }
        rows.links.sort();
        rows.links.dedup();
        rows.joins.sort();
        rows.joins.dedup();
        rows
    }};
}

/// Marks an answered request `applied` (only if it is `succeeded`), recording `note` as its drop
/// reason when nothing changed; evaluates to whether this call claimed it.
macro_rules! claim_answer {
    ($tx:ident, $request_id:expr, $n_items:expr, $note:expr, $now:expr) => {{
        let note: Option<&str> = $note;
        let drops = match note {
            Some(note) => json!([{ "reason": note }]),
            None => json!([]),
        };
        sqlx::query(
            "UPDATE llm_requests SET status = 'applied', applied_at = $2, n_items = $3, n_dropped = $4, drops = $5
             WHERE id = $1 AND status = 'succeeded'",
        )
        .bind($request_id.to_string())
        .bind($now)
        .bind($n_items as i64)
        .bind(i64::from(note.is_some()))
        .bind(Json(drops))
        .execute(&mut *$tx)
        .await?
        .rows_affected()
            == 1
    }};
}

/// Memories a run has changed so far (journal rows of requests of that run, not undone).
macro_rules! run_changes {
    ($tx:ident, $run:expr) => {{
        let used: Option<i64> = sqlx::query_scalar(
            "SELECT CAST(SUM(CAST(o.after ->> 'n_changed' AS INTEGER)) AS BIGINT) FROM operations o
             JOIN llm_requests r ON r.id = o.request_id
             WHERE r.subject ->> 'run' = $1 AND o.undone_at IS NULL",
        )
        .bind($run)
        .fetch_one(&mut *$tx)
        .await?;
        used.unwrap_or(0)
    }};
}

/// Writes one journal row.
macro_rules! journal {
    ($tx:ident, $kind:expr, $user_id:expr, $request_id:expr, $reason:expr, $before:expr, $after:expr, $now:expr) => {{
        let operation_id = OperationId::new_v7();
        sqlx::query(
            "INSERT INTO operations (id, kind, user_id, request_id, reason, before, after, applied_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
        )
        .bind(operation_id.to_string())
        .bind($kind)
        .bind($user_id.to_string())
        .bind($request_id)
        .bind($reason)
        .bind(Json($before))
        .bind(Json($after))
        .bind($now)
        .execute(&mut *$tx)
        .await?;
        sqlx::query("UPDATE users SET memory_version = memory_version + 1 WHERE id = $1")
            .bind($user_id.to_string())
            .execute(&mut *$tx)
            .await?;
        operation_id
    }};
}

/// The status check after a failed claim: `AlreadyApplied`, or an error saying why not.
macro_rules! unclaimed {
    ($tx:ident, $request_id:expr) => {{
        let status: Option<String> = sqlx::query_scalar("SELECT status FROM llm_requests WHERE id = $1")
            .bind($request_id.to_string())
            .fetch_optional(&mut *$tx)
            .await?;
        match status.as_deref() {
            Some("applied") => Ok(StageOutcome::AlreadyApplied),
            Some(other) => Err(StoreError::NotFound(format!(
                "request {} is `{other}`, not `succeeded`: there is no answer to apply",
                $request_id
            ))),
            None => Err(StoreError::NotFound(format!("no request {}", $request_id))),
        }
    }};
}

fn parse_memory_ids(value: &Value) -> Vec<MemoryId> {
    value
        .as_array()
        .map(|ids| {
            ids.iter()
                .filter_map(Value::as_str)
                .filter_map(|id| MemoryId::parse(id).ok())
                .collect()
        })
        .unwrap_or_default()
}

/// The memory ids a stage request's subject names (`memory_id`, `members`, `candidates`).
fn subject_memory_ids(subject: &Value) -> Vec<MemoryId> {
    let mut ids: Vec<MemoryId> = subject
        .get("memory_id")
        .and_then(Value::as_str)
        .and_then(|id| MemoryId::parse(id).ok())
        .into_iter()
        .collect();
    for key in ["members", "candidates"] {
        if let Some(list) = subject.get(key) {
            ids.extend(parse_memory_ids(list));
        }
    }
    ids
}

impl Store {
    /// Records post-processing requests and marks the memories they cover (`related_at` for
    /// relationship classification, `reviewed_at` for the extraction reviewer) in one transaction,
    /// so a crash plans all of them or none and nothing is planned twice.
    pub async fn plan_stage_requests(
        &self,
        requests: &[NewRequest],
        covered: &Covered<'_>,
        now: DateTime<Utc>,
    ) -> Result<()> {
        in_write_tx!(self, |tx| {
            for request in requests {
                crate::extraction::insert_planned_request!(tx, request, now);
            }
            for (ids, sql) in [
                (covered.related, "UPDATE memories SET related_at = $2 WHERE id = $1"),
                (covered.reviewed, "UPDATE memories SET reviewed_at = $2 WHERE id = $1"),
            ] {
                for id in ids {
                    sqlx::query(sql)
                        .bind(id.to_string())
                        .bind(now)
                        .execute(&mut *tx)
                        .await?;
                }
            }
        });
        Ok(())
    }

    /// Active memories written by extraction that the reviewer has not looked at, oldest first.
    pub async fn memories_to_review(&self, limit: i64) -> Result<Vec<ReviewMemory>> {
        Ok(on_pool!(self, |pool| {
            sqlx::query_as(
                "SELECT m.id, m.user_id, m.text, m.confidence, m.happens_at, m.expires_at, m.temporal FROM memories m
                 JOIN llm_requests r ON r.id = m.source_request_id
                 WHERE m.archived_at IS NULL AND m.reviewed_at IS NULL AND r.purpose = 'extraction'
                 ORDER BY m.created_at, m.id LIMIT $1",
            )
            .bind(limit)
            .fetch_all(pool)
            .await?
        }))
    }

    /// One active memory as the reviewer sees it.
    pub async fn review_memory(&self, user_id: UserId, memory_id: MemoryId) -> Result<Option<ReviewMemory>> {
        Ok(on_pool!(self, |pool| {
            sqlx::query_as(
                "SELECT id, user_id, text, confidence, happens_at, expires_at, temporal FROM memories
                 WHERE id = $1 AND user_id = $2 AND archived_at IS NULL",
            )
            .bind(memory_id.to_string())
            .bind(user_id.to_string())
            .fetch_optional(pool)
            .await?
        }))
    }

    /// Applies a reviewer's narrowing that keeps the text: a lower confidence and/or an earlier
    /// expiry (the caller has checked it narrows); journaled as `review_narrow`.
    pub async fn apply_narrowing(
        &self,
        request_id: RequestId,
        user_id: UserId,
        memory_id: MemoryId,
        confidence: f64,
        expires_at: Option<DateTime<Utc>>,
        now: DateTime<Utc>,
    ) -> Result<StageOutcome> {
        in_write_tx!(self, |tx| {
            if !claim_answer!(tx, request_id, 1, None, now) {
                return unclaimed!(tx, request_id);
            }
            let ids = [memory_id.to_string()];
            let before = capture_rows!(
                tx,
                &ids,
                Vec::<String>::new(),
                Vec::<String>::new(),
                Vec::<String>::new()
            );
            let updated = sqlx::query(
                "UPDATE memories SET confidence = $3, expires_at = $4, updated_at = $5
                 WHERE id = $1 AND user_id = $2 AND archived_at IS NULL",
            )
            .bind(memory_id.to_string())
            .bind(user_id.to_string())
            .bind(confidence)
            .bind(expires_at)
            .bind(now)
            .execute(&mut *tx)
            .await?
            .rows_affected();
            let operation_id = if updated == 1 {
                let after = RowsAfter {
                    detail: json!({ "memory_id": memory_id.to_string(), "confidence": confidence, "expires_at": expires_at }),
                    ..RowsAfter::default()
                };
                Some(journal!(
                    tx,
                    "review_narrow",
                    user_id,
                    Some(request_id.to_string()),
                    "extraction reviewer",
                    &before,
                    &after,
                    now
                ))
            } else {
                None
            };
            Ok(StageOutcome::Applied(StageApplied {
                operation_id,
                note: (updated == 0).then(|| "the memory is no longer active".to_owned()),
                ..StageApplied::default()
            }))
        })
    }

    /// Users with at least one active memory: (id, external id), in id order.
    pub async fn users_with_memories(&self) -> Result<Vec<(UserId, String)>> {
        let rows: Vec<(String, String)> = on_pool!(self, |pool| {
            sqlx::query_as(
                "SELECT u.id, u.external_id FROM users u
                 WHERE EXISTS (SELECT 1 FROM memories m WHERE m.user_id = u.id AND m.archived_at IS NULL)
                 ORDER BY u.id",
            )
            .fetch_all(pool)
            .await?
        });
        rows.into_iter()
            .map(|(id, external)| Ok((UserId::parse(&id).map_err(|error| corrupt("users", error))?, external)))
            .collect()
    }

    /// How many active memories a user has (the base of every stage's cap).
    pub async fn active_memory_count(&self, user_id: UserId) -> Result<i64> {
        Ok(on_pool!(self, |pool| {
            sqlx::query_scalar::<_, i64>("SELECT COUNT(*) FROM memories WHERE user_id = $1 AND archived_at IS NULL")
                .bind(user_id.to_string())
                .fetch_one(pool)
                .await?
        }))
    }

    /// Active memories relationship classification has not covered yet, oldest first.
    pub async fn memories_to_relate(&self, user_id: UserId, limit: i64) -> Result<Vec<StageMemory>> {
        let rows: Vec<(String, String, Json<Value>)> = on_pool!(self, |pool| {
            sqlx::query_as(
                "SELECT id, text, link_hints FROM memories
                 WHERE user_id = $1 AND archived_at IS NULL AND related_at IS NULL
                 ORDER BY created_at, id LIMIT $2",
            )
            .bind(user_id.to_string())
            .bind(limit)
            .fetch_all(pool)
            .await?
        });
        rows.into_iter()
            .map(|(id, text, Json(hints))| {
                Ok(StageMemory {
                    id: MemoryId::parse(&id).map_err(|error| corrupt("memories", error))?,
                    text,
                    link_hints: parse_memory_ids(&hints),
                })
            })
            .collect()
    }

    /// A user's active memories in hub order: most important, then most linked, then oldest.
    pub async fn memory_hubs(&self, user_id: UserId) -> Result<Vec<MemoryId>> {
        let ids: Vec<String> = on_pool!(self, |pool| {
            sqlx::query_scalar(
                "SELECT m.id FROM memories m
                 WHERE m.user_id = $1 AND m.archived_at IS NULL
                 ORDER BY m.importance DESC,
                          (SELECT COUNT(*) FROM memory_links l WHERE l.source_id = m.id OR l.target_id = m.id) DESC,
                          m.created_at, m.id",
            )
            .bind(user_id.to_string())
            .fetch_all(pool)
            .await?
        });
        ids.iter()
            .map(|id| MemoryId::parse(id).map_err(|error| corrupt("memories", error)))
            .collect()
    }

    /// Pairs of a user's memories linked with one of `kinds` (either direction).
    pub async fn linked_pairs(&self, user_id: UserId, kinds: &[&str]) -> Result<Vec<(MemoryId, MemoryId)>> {
        let mut pairs = Vec::new();
        for kind in kinds {
            let rows: Vec<(String, String)> = on_pool!(self, |pool| {
                sqlx::query_as(
                    "SELECT l.source_id, l.target_id FROM memory_links l JOIN memories m ON m.id = l.source_id
                     WHERE m.user_id = $1 AND l.kind = $2",
                )
                .bind(user_id.to_string())
                .bind(*kind)
                .fetch_all(pool)
                .await?
            });
            for (source, target) in rows {
                let parse = |id: &str| MemoryId::parse(id).map_err(|error| corrupt("memory_links", error));
                pairs.push((parse(&source)?, parse(&target)?));
            }
        }
        Ok(pairs)
    }

    /// Memories named by a user's requests of `purposes` that are still in flight (planned,
    /// submitted, answered but unapplied, or failed and waiting for a retry): a stage never plans
    /// a memory twice at once.
    pub async fn memories_in_flight(&self, user_id: UserId, purposes: &[Purpose]) -> Result<HashSet<MemoryId>> {
        let mut ids = HashSet::new();
        for purpose in purposes {
            let subjects: Vec<Json<Value>> = on_pool!(self, |pool| {
                sqlx::query_scalar(
                    "SELECT subject FROM llm_requests
                     WHERE user_id = $1 AND purpose = $2 AND status IN ('planned', 'submitted', 'succeeded', 'errored', 'expired', 'canceled')",
                )
                .bind(user_id.to_string())
                .bind(purpose.as_str())
                .fetch_all(pool)
                .await?
            });
            for Json(subject) in subjects {
                ids.extend(subject_memory_ids(&subject));
            }
        }
        Ok(ids)
    }

    /// Memories refinement may look at: active, longer than `min_chars`, written at least
    /// `min_age_days` ago, read at least `min_reads` times, not refined within `cooldown_days`,
    /// and rejected fewer than `max_rejections` times; oldest first.
    pub async fn refinement_candidates(
        &self,
        user_id: UserId,
        now: DateTime<Utc>,
        rules: &RefinementRules,
    ) -> Result<Vec<StageMemory>> {
        let rows: Vec<(String, String)> = on_pool!(self, |pool| {
            sqlx::query_as(
                "SELECT id, text FROM memories
                 WHERE user_id = $1 AND archived_at IS NULL AND LENGTH(text) > $2 AND created_at <= $3
                   AND access_count >= $4 AND (refined_at IS NULL OR refined_at <= $5) AND refinement_rejections < $6
                 ORDER BY created_at, id",
            )
            .bind(user_id.to_string())
            .bind(rules.min_chars)
            .bind(now - chrono::Duration::days(rules.min_age_days))
            .bind(rules.min_reads)
            .bind(now - chrono::Duration::days(rules.cooldown_days))
            .bind(rules.max_rejections)
            .fetch_all(pool)
            .await?
        });
        rows.into_iter()
            .map(|(id, text)| {
                Ok(StageMemory {
                    id: MemoryId::parse(&id).map_err(|error| corrupt("memories", error))?,
                    text,
                    link_hints: Vec::new(),
                })
            })
            .collect()
    }

    /// A user's active entities.
    pub async fn user_entities(&self, user_id: UserId) -> Result<Vec<EntityRow>> {
        Ok(on_pool!(self, |pool| {
            sqlx::query_as(
                "SELECT id, name, kind, link_count FROM entities WHERE user_id = $1 AND archived_at IS NULL
                 ORDER BY normalized_name, id",
            )
            .bind(user_id.to_string())
            .fetch_all(pool)
            .await?
        }))
    }

    /// Entities entity GC reviews: active, linked from `min_links..=max_links` memories, and not
    /// linked for `dormant_days`; none with a review in flight.
    pub async fn dormant_entities(
        &self,
        user_id: UserId,
        now: DateTime<Utc>,
        dormant_days: i64,
        min_links: i64,
        max_links: i64,
    ) -> Result<Vec<EntityRow>> {
        Ok(on_pool!(self, |pool| {
            sqlx::query_as(
                "SELECT e.id, e.name, e.kind, e.link_count FROM entities e
                 WHERE e.user_id = $1 AND e.archived_at IS NULL AND e.link_count BETWEEN $2 AND $3
                   AND COALESCE(e.last_linked_at, e.created_at) <= $4
                   AND NOT EXISTS (SELECT 1 FROM llm_requests r
                                   WHERE r.user_id = e.user_id AND r.purpose = 'entity_gc'
                                     AND r.status IN ('planned', 'submitted', 'succeeded', 'errored', 'expired', 'canceled')
                                     AND r.subject ->> 'entity_id' = e.id)
                 ORDER BY e.normalized_name, e.id",
            )
            .bind(user_id.to_string())
            .bind(min_links)
            .bind(max_links)
            .bind(now - chrono::Duration::days(dormant_days))
            .fetch_all(pool)
            .await?
        }))
    }

    /// Texts of up to `limit` active memories joined to an entity.
    pub async fn entity_memory_texts(&self, entity_id: &str, limit: i64) -> Result<Vec<String>> {
        Ok(on_pool!(self, |pool| {
            sqlx::query_scalar(
                "SELECT m.text FROM memories m JOIN memory_entities j ON j.memory_id = m.id
                 WHERE j.entity_id = $1 AND m.archived_at IS NULL ORDER BY m.created_at, m.id LIMIT $2",
            )
            .bind(entity_id)
            .bind(limit)
            .fetch_all(pool)
            .await?
        }))
    }

    /// Extracted segments with no live summary and no summary request in flight: (segment, user).
    pub async fn segments_to_summarize(&self, limit: i64) -> Result<Vec<(SegmentId, UserId)>> {
        let rows: Vec<(String, String)> = on_pool!(self, |pool| {
            sqlx::query_as(
                "SELECT s.id, s.user_id FROM segments s
                 WHERE s.status = 'extracted'
                   AND NOT EXISTS (SELECT 1 FROM segment_summaries x WHERE x.segment_id = s.id AND x.superseded_at IS NULL)
                   AND NOT EXISTS (SELECT 1 FROM llm_requests r WHERE r.segment_id = s.id AND r.purpose = 'summary'
                                     AND r.status IN ('planned', 'submitted', 'succeeded', 'errored', 'expired', 'canceled', 'applied'))
                 ORDER BY s.id LIMIT $1",
            )
            .bind(limit)
            .fetch_all(pool)
            .await?
        });
        rows.into_iter()
            .map(|(segment, user)| {
                Ok((
                    SegmentId::parse(&segment).map_err(|error| corrupt("segments", error))?,
                    UserId::parse(&user).map_err(|error| corrupt("segments", error))?,
                ))
            })
            .collect()
    }

    /// A segment's live summary.
    pub async fn live_summary(&self, segment_id: SegmentId) -> Result<Option<String>> {
        Ok(on_pool!(self, |pool| {
            sqlx::query_scalar("SELECT text FROM segment_summaries WHERE segment_id = $1 AND superseded_at IS NULL")
                .bind(segment_id.to_string())
                .fetch_optional(pool)
                .await?
        }))
    }

    /// What post-processing shapes, store-wide: (active memories, archived memories, links by
    /// kind, active entities, live segment summaries).
    pub async fn postprocess_shape(&self) -> Result<(i64, i64, std::collections::BTreeMap<String, i64>, i64, i64)> {
        Ok(on_pool!(self, |pool| {
            let (active, archived): (i64, i64) = sqlx::query_as(
                "SELECT CAST(COALESCE(SUM(CASE WHEN archived_at IS NULL THEN 1 ELSE 0 END), 0) AS BIGINT),
                        CAST(COALESCE(SUM(CASE WHEN archived_at IS NULL THEN 0 ELSE 1 END), 0) AS BIGINT)
                 FROM memories",
            )
            .fetch_one(pool)
            .await?;
            let links: Vec<(String, i64)> =
                sqlx::query_as("SELECT kind, COUNT(*) FROM memory_links GROUP BY kind ORDER BY kind")
                    .fetch_all(pool)
                    .await?;
            let entities: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM entities WHERE archived_at IS NULL")
                .fetch_one(pool)
                .await?;
            let summaries: i64 =
                sqlx::query_scalar("SELECT COUNT(*) FROM segment_summaries WHERE superseded_at IS NULL")
                    .fetch_one(pool)
                    .await?;
            (active, archived, links.into_iter().collect(), entities, summaries)
        }))
    }

    /// Applied consolidation proposals whose review is not planned yet.
    pub async fn proposals_to_review(&self, limit: i64) -> Result<Vec<ProposalToReview>> {
        let rows: Vec<(String, String, Json<Value>, Option<String>)> = on_pool!(self, |pool| {
            sqlx::query_as(
                "SELECT r.id, r.user_id, r.subject, r.raw_output FROM llm_requests r
                 WHERE r.purpose = 'consolidation' AND r.status = 'applied' AND r.n_items = 1
                   AND NOT EXISTS (SELECT 1 FROM llm_requests v WHERE v.parent_request_id = r.id)
                 ORDER BY r.applied_at, r.id LIMIT $1",
            )
            .bind(limit)
            .fetch_all(pool)
            .await?
        });
        rows.into_iter()
            .filter_map(|(id, user, Json(subject), raw)| raw.map(|raw| (id, user, subject, raw)))
            .map(|(id, user, subject, raw_output)| {
                Ok(ProposalToReview {
                    request_id: RequestId::parse(&id).map_err(|error| corrupt("llm_requests", error))?,
                    user_id: UserId::parse(&user).map_err(|error| corrupt("llm_requests", error))?,
                    subject,
                    raw_output,
                })
            })
            .collect()
    }

    /// Marks an answer applied that changes nothing (`keep`, `none`, a rejected review, an
    /// invalid answer, a proposal waiting for review), with `note` saying why; `n_items` is 1 for
    /// a proposal that goes on to review, else 0.
    pub async fn apply_without_change(
        &self,
        request_id: RequestId,
        n_items: i64,
        note: Option<&str>,
        now: DateTime<Utc>,
    ) -> Result<StageOutcome> {
        in_write_tx!(self, |tx| {
            if claim_answer!(tx, request_id, n_items, note, now) {
                Ok(StageOutcome::Applied(StageApplied {
                    note: note.map(str::to_owned),
                    ..StageApplied::default()
                }))
            } else {
                unclaimed!(tx, request_id)
            }
        })
    }

    /// Writes the links of one relationship answer, and supersedes the older memory of each
    /// confident `supersedes` / `invalidated_by` pair within the run's cap; journaled as `link`.
    pub async fn apply_links(
        &self,
        request_id: RequestId,
        user_id: UserId,
        links: &[NewLink],
        cap: &RunCap,
        now: DateTime<Utc>,
    ) -> Result<StageOutcome> {
        in_write_tx!(self, |tx| {
            if !claim_answer!(tx, request_id, links.len(), None, now) {
                return unclaimed!(tx, request_id);
            }
            let mut used = run_changes!(tx, &cap.run);
            let mut applied = StageApplied::default();
            let mut before = RowsBefore::default();
            let mut after = RowsAfter::default();
            let mut notes = Vec::new();
            for link in links {
                // Both ends must be this user's and still active (an answer can arrive late).
                type Row = (String, DateTime<Utc>, Option<DateTime<Utc>>);
                let mut ends = Vec::with_capacity(2);
                for id in [link.source, link.target] {
                    let row: Option<Row> = sqlx::query_as(
                        "SELECT id, created_at, archived_at FROM memories WHERE id = $1 AND user_id = $2",
                    )
                    .bind(id.to_string())
                    .bind(user_id.to_string())
                    .fetch_optional(&mut *tx)
                    .await?;
                    ends.extend(row.filter(|(_, _, archived)| archived.is_none()));
                }
                if ends.len() != 2 || link.source == link.target {
                    notes.push(format!(
                        "{} → {}: a memory is gone or archived",
                        link.source, link.target
                    ));
                    continue;
                }
                let row = LinkRow {
                    source_id: link.source.to_string(),
                    target_id: link.target.to_string(),
                    kind: link.kind.clone(),
                    confidence: OrderedF64(link.confidence),
                    reasoning: link.reasoning.clone(),
                    origin_request_id: Some(request_id.to_string()),
                    created_at: now,
                };
                let inserted = sqlx::query(
                    "INSERT INTO memory_links (source_id, target_id, kind, confidence, reasoning, origin_request_id, created_at)
                     VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT DO NOTHING",
                )
                .bind(&row.source_id)
                .bind(&row.target_id)
                .bind(&row.kind)
                .bind(link.confidence)
                .bind(&row.reasoning)
                .bind(&row.origin_request_id)
                .bind(now)
                .execute(&mut *tx)
                .await?
                .rows_affected();
                if inserted == 1 {
                    applied.n_links += 1;
                    after.created_links.push(row);
                }
                if !link.supersedes_older {
                    continue;
                }
                // The older memory is superseded by the newer, whichever side of the link it is.
                let (older, newer) = if (ends[0].1, &ends[0].0) <= (ends[1].1, &ends[1].0) {
                    (&ends[0].0, &ends[1].0)
                } else {
                    (&ends[1].0, &ends[0].0)
                };
                if used + 1 > cap.cap {
                    notes.push(format!(
                        "{older} not superseded: the run's cap of {} is reached",
                        cap.cap
                    ));
                    continue;
                }
                let state: Option<StageMemoryState> = sqlx::query_as(STATE_SELECT)
                    .bind(older)
                    .fetch_optional(&mut *tx)
                    .await?;
                let Some(state) = state.filter(|state| state.archived_at.is_none()) else {
                    continue;
                };
                before.memories.push(state);
                sqlx::query(
                    "UPDATE memories SET archived_at = $2, archive_reason = $3, superseded_by = $4, updated_at = $2
                     WHERE id = $1",
                )
                .bind(older)
                .bind(now)
                .bind(format!("superseded ({}): {}", link.kind, link.reasoning))
                .bind(newer)
                .execute(&mut *tx)
                .await?;
                used += 1;
                after.n_changed += 1;
                applied.n_memories_archived += 1;
            }
            if !notes.is_empty() {
                applied.note = Some(notes.join("; "));
            }
            if applied.n_links > 0 || applied.n_memories_archived > 0 {
                after.detail = json!({ "notes": notes });
                applied.operation_id = Some(journal!(
                    tx,
                    "link",
                    user_id,
                    Some(request_id.to_string()),
                    "relationship classification",
                    &before,
                    &after,
                    now
                ));
            }
            Ok(StageOutcome::Applied(applied))
        })
    }

    /// Replaces memories with new ones (consolidation: several into one; refinement: one into one
    /// or more) in one transaction: the new memories with the originals' evidence and entities,
    /// every link of an original moved to the first new memory in both directions, and the
    /// originals archived with `superseded_by` and the reason. Journaled with the exact prior rows.
    ///
    /// Nothing changes (the answer is applied with a note) when an original is no longer active,
    /// a new text would duplicate another active memory, or the run's cap would be passed.
    pub async fn apply_replacement(&self, input: &Replacement) -> Result<StageOutcome> {
        let mut new_texts: Vec<(String, String)> = Vec::new();
        for text in &input.new_texts {
            let text = collapse_whitespace(text.trim());
            let key = dedupe_key(&text);
            if !text.is_empty() && !new_texts.iter().any(|(_, seen)| *seen == key) {
                new_texts.push((text, key));
            }
        }
        let original_ids: Vec<String> = input.originals.iter().map(ToString::to_string).collect();
        in_write_tx!(self, |tx| {
            let mut problem = None;
            if new_texts.is_empty() || original_ids.is_empty() {
                problem = Some("nothing to write".to_owned());
            }
            for id in &original_ids {
                let active: Option<String> = sqlx::query_scalar(
                    "SELECT id FROM memories WHERE id = $1 AND user_id = $2 AND archived_at IS NULL",
                )
                .bind(id)
                .bind(input.user_id.to_string())
                .fetch_optional(&mut *tx)
                .await?;
                if active.is_none() {
                    problem.get_or_insert_with(|| format!("memory {id} is no longer active"));
                }
            }
            for (text, key) in &new_texts {
                let taken: Option<String> = sqlx::query_scalar(
                    "SELECT id FROM memories WHERE user_id = $1 AND dedupe_key = $2 AND archived_at IS NULL",
                )
                .bind(input.user_id.to_string())
                .bind(key)
                .fetch_optional(&mut *tx)
                .await?;
                if let Some(taken) = taken.filter(|id| !original_ids.contains(id)) {
                    problem.get_or_insert_with(|| format!("memory {taken} already says `{text}`"));
                }
            }
            let used = run_changes!(tx, &input.cap.run);
            if used + original_ids.len() as i64 > input.cap.cap {
                problem.get_or_insert_with(|| {
                    format!(
                        "the run's cap is reached ({used} of {} memories changed)",
                        input.cap.cap
                    )
                });
            }
            if let Some(problem) = problem {
                return if claim_answer!(tx, input.request_id, 0, Some(problem.as_str()), input.now) {
                    Ok(StageOutcome::Applied(StageApplied {
                        note: Some(problem),
                        ..StageApplied::default()
                    }))
                } else {
                    unclaimed!(tx, input.request_id)
                };
            }
            if !claim_answer!(tx, input.request_id, new_texts.len(), None, input.now) {
                return unclaimed!(tx, input.request_id);
            }
            let before = capture_rows!(tx, &original_ids, &original_ids, &original_ids, Vec::<String>::new());
            let reason = format!("{}: {}", input.kind, input.reason);
            // Archive first: a new text may normalise to an original's key.
            for id in &original_ids {
                sqlx::query("UPDATE memories SET archived_at = $2, archive_reason = $3, updated_at = $2 WHERE id = $1")
                    .bind(id)
                    .bind(input.now)
                    .bind(&reason)
                    .execute(&mut *tx)
                    .await?;
            }
            let mut created = Vec::with_capacity(new_texts.len());
            for (position, (text, key)) in new_texts.iter().enumerate() {
                let id = MemoryId::new_v7().to_string();
                let vector = input
                    .embeddings
                    .as_ref()
                    .and_then(|(model, vectors)| Some((model.as_str(), vectors.get(position)?)));
                sqlx::query(
                    "INSERT INTO memories (id, user_id, text, dedupe_key, importance, confidence, happens_at, expires_at,
                                           sensitive, temporal, source_segment_id, source_request_id, prompt_version,
                                           refined_at, related_at, created_at, updated_at, embedding, embedding_model,
                                           embedding_dim)
                     SELECT $1, user_id, $2, $3, importance, confidence, happens_at, expires_at, sensitive, temporal,
                            source_segment_id, $4, (SELECT prompt_version FROM llm_requests WHERE id = $4), $5, NULL, $6, $6,
                            $7, $8, $9
                     FROM memories WHERE id = $10",
                )
                .bind(&id)
                .bind(text)
                .bind(key)
                .bind(input.request_id.to_string())
                .bind((input.kind == "refine").then_some(input.now))
                .bind(input.now)
                .bind(vector.map(|(_, vector)| vector_to_le_bytes(vector)))
                .bind(vector.map(|(model, _)| model))
                .bind(vector.map(|(_, vector)| vector.len() as i64))
                .bind(&original_ids[0])
                .execute(&mut *tx)
                .await?;
                // The strongest original's confidence and importance, and any sensitivity.
                for original in &original_ids {
                    for column in ["confidence", "importance"] {
                        let sql = format!(
                            "UPDATE memories SET {column} = (SELECT o.{column} FROM memories o WHERE o.id = $2)
                             WHERE id = $1 AND {column} < (SELECT o.{column} FROM memories o WHERE o.id = $2)"
                        );
                        sqlx::query(&sql).bind(&id).bind(original).execute(&mut *tx).await?;
                    }
                    sqlx::query(
                        "UPDATE memories SET sensitive = TRUE
                         WHERE id = $1 AND EXISTS (SELECT 1 FROM memories o WHERE o.id = $2 AND o.sensitive = TRUE)",
                    )
                    .bind(&id)
                    .bind(original)
                    .execute(&mut *tx)
                    .await?;
                    sqlx::query(
                        "INSERT INTO memory_evidence (memory_id, message_id)
                         SELECT $1, message_id FROM memory_evidence WHERE memory_id = $2 ON CONFLICT DO NOTHING",
                    )
                    .bind(&id)
                    .bind(original)
                    .execute(&mut *tx)
                    .await?;
                    sqlx::query(
                        "INSERT INTO memory_entities (memory_id, entity_id)
                         SELECT $1, entity_id FROM memory_entities WHERE memory_id = $2 ON CONFLICT DO NOTHING",
                    )
                    .bind(&id)
                    .bind(original)
                    .execute(&mut *tx)
                    .await?;
                }
                created.push(id);
            }
            for id in &original_ids {
                sqlx::query("UPDATE memories SET superseded_by = $2 WHERE id = $1")
                    .bind(id)
                    .bind(&created[0])
                    .execute(&mut *tx)
                    .await?;
            }
            // Links move to the first new memory in both directions; a link between two
            // originals would become a self-link and is dropped.
            let moved = |id: &String| {
                if original_ids.contains(id) {
                    created[0].clone()
                } else {
                    id.clone()
                }
            };
            let mut n_links = 0;
            for link in &before.links {
                let (source, target) = (moved(&link.source_id), moved(&link.target_id));
                if source == target {
                    continue;
                }
                n_links += sqlx::query(
                    "INSERT INTO memory_links (source_id, target_id, kind, confidence, reasoning, origin_request_id, created_at)
                     VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT DO NOTHING",
                )
                .bind(&source)
                .bind(&target)
                .bind(&link.kind)
                .bind(link.confidence.0)
                .bind(&link.reasoning)
                .bind(&link.origin_request_id)
                .bind(link.created_at)
                .execute(&mut *tx)
                .await?
                .rows_affected();
            }
            for id in &original_ids {
                sqlx::query("DELETE FROM memory_links WHERE source_id = $1 OR target_id = $1")
                    .bind(id)
                    .execute(&mut *tx)
                    .await?;
            }
            let after = RowsAfter {
                created_memory_ids: created.clone(),
                created_links: Vec::new(),
                created_joins: Vec::new(),
                n_changed: original_ids.len() as i64,
                detail: json!({ "originals": original_ids, "new_texts": new_texts.iter().map(|(text, _)| text).collect::<Vec<_>>() }),
            };
            let operation_id = journal!(
                tx,
                input.kind,
                input.user_id,
                Some(input.request_id.to_string()),
                &input.reason,
                &before,
                &after,
                input.now
            );
            Ok(StageOutcome::Applied(StageApplied {
                n_links,
                n_memories_created: created.len() as u64,
                n_memories_archived: original_ids.len() as u64,
                n_entities_changed: 0,
                operation_id: Some(operation_id),
                note: None,
            }))
        })
    }

    /// Counts a refinement the model (or validation) turned down: one more rejection, and the
    /// cooldown restarts; journaled as `refine_reject`.
    pub async fn apply_refinement_rejection(
        &self,
        request_id: RequestId,
        user_id: UserId,
        memory_id: MemoryId,
        reason: &str,
        now: DateTime<Utc>,
    ) -> Result<StageOutcome> {
        in_write_tx!(self, |tx| {
            if !claim_answer!(tx, request_id, 0, Some(reason), now) {
                return unclaimed!(tx, request_id);
            }
            let ids = [memory_id.to_string()];
            let before = capture_rows!(
                tx,
                &ids,
                Vec::<String>::new(),
                Vec::<String>::new(),
                Vec::<String>::new()
            );
            let updated = sqlx::query(
                "UPDATE memories SET refinement_rejections = refinement_rejections + 1, refined_at = $3
                 WHERE id = $1 AND user_id = $2",
            )
            .bind(memory_id.to_string())
            .bind(user_id.to_string())
            .bind(now)
            .execute(&mut *tx)
            .await?
            .rows_affected();
            let operation_id = if updated == 1 {
                let after = RowsAfter {
                    detail: json!({ "memory_id": memory_id.to_string() }),
                    ..RowsAfter::default()
                };
                Some(journal!(
                    tx,
                    "refine_reject",
                    user_id,
                    Some(request_id.to_string()),
                    reason,
                    &before,
                    &after,
                    now
                ))
            } else {
                None
            };
            Ok(StageOutcome::Applied(StageApplied {
                operation_id,
                note: Some(reason.to_owned()),
                ..StageApplied::default()
            }))
        })
    }

    /// Applies entity GC's decision for `entity_id`: a merge moves every join to the target
    /// (validated: the user's, same kind, active, one of the candidates offered) and archives the
    /// entity; a delete removes its joins and archives it; keep changes nothing. Journaled with
    /// the exact prior joins and entity rows.
    pub async fn apply_entity_decision(
        &self,
        request_id: RequestId,
        user_id: UserId,
        entity_id: &str,
        decision: &EntityDecision,
        now: DateTime<Utc>,
    ) -> Result<StageOutcome> {
        in_write_tx!(self, |tx| {
            type Entity = (String, String, Option<DateTime<Utc>>);
            let source: Option<Entity> =
                sqlx::query_as("SELECT id, kind, archived_at FROM entities WHERE id = $1 AND user_id = $2")
                    .bind(entity_id)
                    .bind(user_id.to_string())
                    .fetch_optional(&mut *tx)
                    .await?;
            let mut problem = match (&source, decision) {
                (_, EntityDecision::Keep) => Some("keep".to_owned()),
                (None, _) => Some(format!("entity {entity_id} is gone")),
                (Some((_, _, Some(_))), _) => Some(format!("entity {entity_id} is archived")),
                _ => None,
            };
            if let (None, Some((_, kind, _)), EntityDecision::Merge { target, candidates }) =
                (&problem, &source, decision)
            {
                let target_row: Option<Entity> =
                    sqlx::query_as("SELECT id, kind, archived_at FROM entities WHERE id = $1 AND user_id = $2")
                        .bind(target)
                        .bind(user_id.to_string())
                        .fetch_optional(&mut *tx)
                        .await?;
                problem = match target_row {
                    _ if !candidates.contains(target) => Some(format!("merge target {target} was not a candidate")),
                    _ if target == entity_id => Some("merge target is the entity itself".to_owned()),
                    None => Some(format!("merge target {target} is not this user's entity")),
                    Some((_, _, Some(_))) => Some(format!("merge target {target} is archived")),
                    Some((_, target_kind, None)) if target_kind != *kind => {
                        Some(format!("merge target {target} is a `{target_kind}`, not a `{kind}`"))
                    }
                    Some(_) => None,
                };
            }
            if let Some(problem) = problem {
                return if claim_answer!(tx, request_id, 0, Some(problem.as_str()), now) {
                    Ok(StageOutcome::Applied(StageApplied {
                        note: Some(problem),
                        ..StageApplied::default()
                    }))
                } else {
                    unclaimed!(tx, request_id)
                };
            }
            if !claim_answer!(tx, request_id, 1, None, now) {
                return unclaimed!(tx, request_id);
            }
            let mut entities = vec![entity_id.to_owned()];
            if let EntityDecision::Merge { target, .. } = decision {
                entities.push(target.clone());
            }
            let before = capture_rows!(
                tx,
                Vec::<String>::new(),
                Vec::<String>::new(),
                Vec::<String>::new(),
                &entities
            );
            let mut created_joins: Vec<JoinRow> = Vec::new();
            let kind = match decision {
                EntityDecision::Merge { target, .. } => {
                    // The joins the target gains, so an undo removes exactly these and leaves any
                    // join a later extraction gave the target.
                    created_joins = sqlx::query_as(
                        "SELECT memory_id, $2 AS entity_id FROM memory_entities
                         WHERE entity_id = $1
                           AND memory_id NOT IN (SELECT memory_id FROM memory_entities WHERE entity_id = $2)",
                    )
                    .bind(entity_id)
                    .bind(target)
                    .fetch_all(&mut *tx)
                    .await?;
                    sqlx::query(
                        "INSERT INTO memory_entities (memory_id, entity_id)
                         SELECT memory_id, $2 FROM memory_entities WHERE entity_id = $1 ON CONFLICT DO NOTHING",
                    )
                    .bind(entity_id)
                    .bind(target)
                    .execute(&mut *tx)
                    .await?;
                    sqlx::query(
                        "UPDATE entities SET link_count = (SELECT COUNT(*) FROM memory_entities WHERE entity_id = $1),
                                last_linked_at = $2
                         WHERE id = $1",
                    )
                    .bind(target)
                    .bind(now)
                    .execute(&mut *tx)
                    .await?;
                    "entity_merge"
                }
                _ => "entity_delete",
            };
            sqlx::query("DELETE FROM memory_entities WHERE entity_id = $1")
                .bind(entity_id)
                .execute(&mut *tx)
                .await?;
            sqlx::query("UPDATE entities SET archived_at = $2, link_count = 0 WHERE id = $1")
                .bind(entity_id)
                .bind(now)
                .execute(&mut *tx)
                .await?;
            let after = RowsAfter {
                detail: json!({ "entity_id": entity_id, "decision": kind, "target": match decision {
                    EntityDecision::Merge { target, .. } => Some(target.clone()),
                    _ => None,
                } }),
                created_joins,
                ..RowsAfter::default()
            };
            let operation_id = journal!(
                tx,
                kind,
                user_id,
                Some(request_id.to_string()),
                "entity GC",
                &before,
                &after,
                now
            );
            Ok(StageOutcome::Applied(StageApplied {
                n_entities_changed: 1,
                operation_id: Some(operation_id),
                ..StageApplied::default()
            }))
        })
    }

    /// Applies a segment summary: the same text as the live one changes nothing; a changed text
    /// supersedes the live one (kept, with `superseded_at`).
    pub async fn apply_summary(
        &self,
        request_id: RequestId,
        user_id: UserId,
        segment_id: SegmentId,
        text: &str,
        now: DateTime<Utc>,
    ) -> Result<StageOutcome> {
        in_write_tx!(self, |tx| {
            let live: Option<(String, String)> = sqlx::query_as(
                "SELECT id, text FROM segment_summaries WHERE segment_id = $1 AND superseded_at IS NULL",
            )
            .bind(segment_id.to_string())
            .fetch_optional(&mut *tx)
            .await?;
            let unchanged = live.as_ref().is_some_and(|(_, live)| live == text);
            let note = unchanged.then_some("the live summary already says this");
            if !claim_answer!(tx, request_id, i64::from(!unchanged), note, now) {
                return unclaimed!(tx, request_id);
            }
            if !unchanged {
                if let Some((live_id, _)) = &live {
                    sqlx::query("UPDATE segment_summaries SET superseded_at = $2 WHERE id = $1")
                        .bind(live_id)
                        .bind(now)
                        .execute(&mut *tx)
                        .await?;
                }
                sqlx::query(
                    "INSERT INTO segment_summaries (id, segment_id, user_id, text, request_id, created_at)
                     VALUES ($1, $2, $3, $4, $5, $6)",
                )
                .bind(OperationId::new_v7().to_string())
                .bind(segment_id.to_string())
                .bind(user_id.to_string())
                .bind(text)
                .bind(request_id.to_string())
                .bind(now)
                .execute(&mut *tx)
                .await?;
            }
            Ok(StageOutcome::Applied(StageApplied {
                note: note.map(str::to_owned),
                ..StageApplied::default()
            }))
        })
    }
}

/// Refinement eligibility (DESIGN §8 defaults: 70 characters, 7 days, 3 reads, 30-day cooldown,
/// 3 rejections).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RefinementRules {
    /// Longer than this many characters.
    pub min_chars: i64,
    /// At least this old.
    pub min_age_days: i64,
    /// Read at least this many times.
    pub min_reads: i64,
    /// Not refined (or rejected) within this many days.
    pub cooldown_days: i64,
    /// Fewer rejections than this.
    pub max_rejections: i64,
}

/// Puts back the rows a post-processing operation journaled, inside the caller's transaction:
/// what it created removed (memories, with their links, joins and evidence by cascade; links and
/// joins it added elsewhere, exactly), then the memory states, links, joins and entity rows it
/// changed as they were. Rows other operations added since are left alone.
macro_rules! restore_rows {
    ($tx:ident, $before:expr, $after:expr) => {{
        let before: &$crate::postprocess::RowsBefore = $before;
        let after: &$crate::postprocess::RowsAfter = $after;
        for link in &after.created_links {
            sqlx::query("DELETE FROM memory_links WHERE source_id = $1 AND target_id = $2 AND kind = $3")
                .bind(&link.source_id)
                .bind(&link.target_id)
                .bind(&link.kind)
                .execute(&mut *$tx)
                .await?;
        }
        for id in &after.created_memory_ids {
            // Cascades remove its links, joins and evidence.
            sqlx::query("DELETE FROM memories WHERE id = $1")
                .bind(id)
                .execute(&mut *$tx)
                .await?;
        }
        for state in &before.memories {
            sqlx::query(
                "UPDATE memories SET confidence = $2, expires_at = $3, archived_at = $4, archive_reason = $5,
                                     superseded_by = $6, updated_at = $7, refined_at = $8, refinement_rejections = $9
                 WHERE id = $1",
            )
            .bind(&state.id)
            .bind(state.confidence)
            .bind(state.expires_at)
            .bind(state.archived_at)
            .bind(&state.archive_reason)
            .bind(&state.superseded_by)
            .bind(state.updated_at)
            .bind(state.refined_at)
            .bind(state.refinement_rejections)
            .execute(&mut *$tx)
            .await?;
        }
        for link in &before.links {
            sqlx::query(
                "INSERT INTO memory_links (source_id, target_id, kind, confidence, reasoning, origin_request_id, created_at)
                 SELECT $1, $2, $3, $4, $5, $6, $7
                 WHERE EXISTS (SELECT 1 FROM memories WHERE id = $1) AND EXISTS (SELECT 1 FROM memories WHERE id = $2)
                 ON CONFLICT DO NOTHING",
            )
            .bind(&link.source_id)
            .bind(&link.target_id)
            .bind(&link.kind)
            .bind(link.confidence.0)
            .bind(&link.reasoning)
            .bind(&link.origin_request_id)
            .bind(link.created_at)
            .execute(&mut *$tx)
            .await?;
        }
        for join in &after.created_joins {
            sqlx::query("DELETE FROM memory_entities WHERE memory_id = $1 AND entity_id = $2")
                .bind(&join.memory_id)
                .bind(&join.entity_id)
                .execute(&mut *$tx)
                .await?;
        }
        for join in &before.joins {
            sqlx::query(
                "INSERT INTO memory_entities (memory_id, entity_id)
                 SELECT $1, $2 WHERE EXISTS (SELECT 1 FROM memories WHERE id = $1) ON CONFLICT DO NOTHING",
            )
            .bind(&join.memory_id)
            .bind(&join.entity_id)
            .execute(&mut *$tx)
            .await?;
        }
        for entity in &before.entities {
            sqlx::query("UPDATE entities SET link_count = $2, last_linked_at = $3, archived_at = $4 WHERE id = $1")
                .bind(&entity.id)
                .bind(entity.link_count)
                .bind(entity.last_linked_at)
                .bind(entity.archived_at)
                .execute(&mut *$tx)
                .await?;
        }
    }};
}
pub(crate) use restore_rows;

/// Reads a journaled `before`/`after` pair written by this module.
pub(crate) fn journaled_rows(before: Value, after: Value) -> Result<(RowsBefore, RowsAfter)> {
    let before = serde_json::from_value(before).map_err(|error| corrupt("operations", error))?;
    let after = serde_json::from_value(after).map_err(|error| corrupt("operations", error))?;
    Ok((before, after))
}

/// Every row post-processing may touch for one user, for exact before/after comparisons in tests.
#[cfg(feature = "test-support")]
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct UserRows {
    /// Every memory (archived ones too), every column but the vector bytes, by id.
    pub memories: Vec<Value>,
    /// Every link touching the user's memories.
    pub links: Vec<Value>,
    /// Every entity join of the user's memories.
    pub joins: Vec<(String, String)>,
    /// Every entity of the user.
    pub entities: Vec<Value>,
    /// Every evidence row of the user's memories.
    pub evidence: Vec<(String, String)>,
}

#[cfg(feature = "test-support")]
#[derive(sqlx::FromRow, Serialize)]
struct FullMemoryRow {
    id: String,
    text: String,
    dedupe_key: String,
    importance: f64,
    confidence: f64,
    happens_at: Option<DateTime<Utc>>,
    expires_at: Option<DateTime<Utc>>,
    sensitive: bool,
    temporal: String,
    access_count: i64,
    last_accessed_at: Option<DateTime<Utc>>,
    archived_at: Option<DateTime<Utc>>,
    archive_reason: Option<String>,
    superseded_by: Option<String>,
    refined_at: Option<DateTime<Utc>>,
    refinement_rejections: i64,
    source_segment_id: Option<String>,
    source_request_id: Option<String>,
    prompt_version: String,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
    related_at: Option<DateTime<Utc>>,
    embedding_model: Option<String>,
}

#[cfg(feature = "test-support")]
#[derive(sqlx::FromRow, Serialize)]
struct FullEntityRow {
    id: String,
    name: String,
    normalized_name: String,
    kind: String,
    link_count: i64,
    last_linked_at: Option<DateTime<Utc>>,
    archived_at: Option<DateTime<Utc>>,
    created_at: DateTime<Utc>,
}

#[cfg(feature = "test-support")]
impl Store {
    /// Test support: an entity of `user_id` joined to `memory_ids`, last linked at `at`.
    pub async fn insert_test_entity(
        &self,
        user_id: UserId,
        name: &str,
        kind: &str,
        memory_ids: &[MemoryId],
        at: DateTime<Utc>,
    ) -> Result<String> {
        let id = memsift_core::EntityId::new_v7().to_string();
        in_write_tx!(self, |tx| {
            sqlx::query(
                "INSERT INTO entities (id, user_id, name, normalized_name, kind, link_count, last_linked_at, created_at)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $7)",
            )
            .bind(&id)
            .bind(user_id.to_string())
            .bind(name)
            .bind(name.to_lowercase())
            .bind(kind)
            .bind(memory_ids.len() as i64)
            .bind(at)
            .execute(&mut *tx)
            .await?;
            for memory_id in memory_ids {
                sqlx::query("INSERT INTO memory_entities (memory_id, entity_id) VALUES ($1, $2)")
                    .bind(memory_id.to_string())
                    .bind(&id)
                    .execute(&mut *tx)
                    .await?;
            }
        });
        Ok(id)
    }

    /// Test support: a link `source <kind> target`.
    pub async fn insert_test_link(
        &self,
        source: MemoryId,
        target: MemoryId,
        kind: &str,
        at: DateTime<Utc>,
    ) -> Result<()> {
        on_pool!(self, |pool| {
            sqlx::query(
                "INSERT INTO memory_links (source_id, target_id, kind, confidence, reasoning, created_at)
                 VALUES ($1, $2, $3, 0.9, 'test', $4)",
            )
            .bind(source.to_string())
            .bind(target.to_string())
            .bind(kind)
            .bind(at)
            .execute(pool)
            .await?;
        });
        Ok(())
    }

    /// Test support: sets a memory's read count and creation time (refinement eligibility).
    pub async fn set_test_memory_reads(
        &self,
        memory_id: MemoryId,
        reads: i64,
        created_at: DateTime<Utc>,
    ) -> Result<()> {
        on_pool!(self, |pool| {
            sqlx::query("UPDATE memories SET access_count = $2, created_at = $3 WHERE id = $1")
                .bind(memory_id.to_string())
                .bind(reads)
                .bind(created_at)
                .execute(pool)
                .await?;
        });
        Ok(())
    }

    /// Test support: every row of `user_id` that post-processing may touch.
    pub async fn user_rows(&self, user_id: UserId) -> Result<UserRows> {
        let user = user_id.to_string();
        on_pool!(self, |pool| {
            let memories: Vec<FullMemoryRow> = sqlx::query_as(
                "SELECT id, text, dedupe_key, importance, confidence, happens_at, expires_at, sensitive, temporal,
                        access_count, last_accessed_at, archived_at, archive_reason, superseded_by, refined_at,
                        refinement_rejections, source_segment_id, source_request_id, prompt_version, created_at,
                        updated_at, related_at, embedding_model
                 FROM memories WHERE user_id = $1 ORDER BY id",
            )
            .bind(&user)
            .fetch_all(pool)
            .await?;
            let links: Vec<LinkRow> = sqlx::query_as(
                "SELECT source_id, target_id, kind, confidence, reasoning, origin_request_id, created_at
                 FROM memory_links
                 WHERE source_id IN (SELECT id FROM memories WHERE user_id = $1)
                    OR target_id IN (SELECT id FROM memories WHERE user_id = $1)
                 ORDER BY source_id, target_id, kind",
            )
            .bind(&user)
            .fetch_all(pool)
            .await?;
            let joins: Vec<(String, String)> = sqlx::query_as(
                "SELECT memory_id, entity_id FROM memory_entities
                 WHERE memory_id IN (SELECT id FROM memories WHERE user_id = $1) ORDER BY memory_id, entity_id",
            )
            .bind(&user)
            .fetch_all(pool)
            .await?;
            let entities: Vec<FullEntityRow> = sqlx::query_as(
                "SELECT id, name, normalized_name, kind, link_count, last_linked_at, archived_at, created_at
                 FROM entities WHERE user_id = $1 ORDER BY id",
            )
            .bind(&user)
            .fetch_all(pool)
            .await?;
            let evidence: Vec<(String, String)> = sqlx::query_as(
                "SELECT memory_id, message_id FROM memory_evidence
                 WHERE memory_id IN (SELECT id FROM memories WHERE user_id = $1) ORDER BY memory_id, message_id",
            )
            .bind(&user)
            .fetch_all(pool)
            .await?;
            Ok(UserRows {
                memories: memories.iter().map(|row| json!(row)).collect(),
                links: links.iter().map(|row| json!(row)).collect(),
                joins,
                entities: entities.iter().map(|row| json!(row)).collect(),
                evidence,
            })
        })
    }
}
