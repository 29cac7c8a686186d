//! Read-only listings for the admin tables (`memsift segments`, `memories`, `requests`).
//!
//! Every user-facing listing is scoped by user (invariant 9); the admin listings take an optional
//! user filter and say so in their names.

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::Result;
use crate::handles::Listing;
use crate::tx::sql;

/// One row of `memsift segments`.
#[derive(Clone, Debug, PartialEq, Serialize, sqlx::FromRow)]
pub struct SegmentRow {
    /// Segment id.
    pub id: String,
    /// The user's external id.
    pub user: String,
    /// Conversation key.
    pub conversation_key: String,
    /// The source's name for it (a LoCoMo session).
    pub name: Option<String>,
    /// Status.
    pub status: String,
    /// Messages in it.
    pub n_messages: i64,
    /// First message time.
    pub first_message_at: DateTime<Utc>,
    /// Last message time.
    pub last_message_at: DateTime<Utc>,
    /// Why it closed.
    pub close_reason: Option<String>,
    /// Extraction attempts so far.
    pub attempts: i64,
    /// Memories whose source is this segment.
    pub n_memories: i64,
    /// The last failure.
    pub last_error: Option<String>,
    /// What planning did to make its turns fit the chunk budget (a turn sent in parts), if anything.
    pub plan_note: Option<String>,
}

/// One row of `memsift memories`.
#[derive(Clone, Debug, PartialEq, Serialize, sqlx::FromRow)]
pub struct MemoryRow {
    /// Memory id.
    pub id: String,
    /// Text.
    pub text: String,
    /// 0–1.
    pub confidence: f64,
    /// Private fact.
    pub sensitive: bool,
    /// one_off, recurring, durable, unknown.
    pub temporal: String,
    /// Event time.
    pub happens_at: Option<DateTime<Utc>>,
    /// Labels of the evidence turns, in message order.
    #[sqlx(skip)]
    pub evidence: Vec<String>,
    /// Entity names, in name order.
    #[sqlx(skip)]
    pub entities: Vec<String>,
    /// Prompt or rule-set version that produced it.
    pub prompt_version: String,
    /// The model that wrote it (`heuristic` for the offline lane); none for an operator's
    /// supersede.
    pub model: Option<String>,
    /// Created.
    pub created_at: DateTime<Utc>,
}

/// One row of `memsift requests`.
#[derive(Clone, Debug, PartialEq, Serialize, sqlx::FromRow)]
pub struct RequestRow {
    /// Request id (the provider custom_id).
    pub id: String,
    /// Purpose.
    pub purpose: String,
    /// The user's external id.
    pub user: String,
    /// Segment, for extraction.
    pub segment_id: Option<String>,
    /// Chunk index.
    pub chunk_index: i64,
    /// Attempt.
    pub attempt: i64,
    /// Lane.
    pub lane: String,
    /// Status.
    pub status: String,
    /// Prompt version.
    pub prompt_version: String,
    /// Items applied.
    pub n_items: i64,
    /// Items dropped by the processor.
    pub n_dropped: i64,
    /// Input tokens.
    pub input_tokens: i64,
    /// Output tokens.
    pub output_tokens: i64,
    /// Input tokens written to the prompt cache.
    pub cache_creation_tokens: i64,
    /// Input tokens read from the prompt cache.
    pub cache_read_tokens: i64,
    /// Cost in USD.
    pub cost_usd: f64,
    /// Created.
    pub created_at: DateTime<Utc>,
}

/// Totals for a one-line summary.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    /// Users.
    pub users: i64,
    /// Messages.
    pub messages: i64,
    /// Segments.
    pub segments: i64,
    /// Segments per status, as (status, count).
    pub segments_by_status: Vec<(String, i64)>,
    /// Active memories.
    pub memories: i64,
    /// Requests.
    pub requests: i64,
}

/// The LIMIT used when a listing is asked for "everything".
const NO_LIMIT: i64 = i64::MAX;

/// What kind of id a command asks for, and so which table [`Store::ids_matching`] searches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IdKind {
    /// A segment (`memsift segments`).
    Segment,
    /// A memory (`memsift memories`).
    Memory,
    /// An LLM request (`memsift requests`).
    Request,
    /// A provider batch (`memsift batches`).
    Batch,
    /// A journaled operation (printed by a revision or a stage change).
    Operation,
}

impl IdKind {
    /// The word a person uses for it.
    pub fn as_str(self) -> &'static str {
        match self {
            IdKind::Segment => "segment",
            IdKind::Memory => "memory",
            IdKind::Request => "request",
            IdKind::Batch => "batch",
            IdKind::Operation => "operation",
        }
    }

    /// The table, and whether its rows belong to a user (`user_id`).
    fn table(self) -> (&'static str, bool) {
        match self {
            IdKind::Segment => ("segments", true),
            IdKind::Memory => ("memories", true),
            IdKind::Request => ("llm_requests", true),
            IdKind::Batch => ("batches", false),
            IdKind::Operation => ("operations", true),
        }
    }
}

/// How many ids [`Store::ids_matching`] returns at most: enough to list an ambiguity, never a table.
const MAX_ID_MATCHES: i64 = 10;

impl Listing<'_> {
    /// The full ids of `kind` that begin or end with `fragment` (so both a pasted prefix and the
    /// last 12 characters the tables print find their row), in id order, at most ten; only among
    /// `user`'s rows when given (external id) and the kind belongs to a user.
    ///
    /// `fragment` is matched literally: anything but hex digits and hyphens matches nothing, so
    /// no LIKE wildcard reaches the query.
    pub async fn ids_matching(self, kind: IdKind, fragment: &str, user: Option<&str>) -> Result<Vec<String>> {
        let fragment = fragment.to_ascii_lowercase();
        if fragment.is_empty() || !fragment.chars().all(|c| c.is_ascii_hexdigit() || c == '-') {
            return Ok(Vec::new());
        }
        let (table, owned) = kind.table();
        let user = if owned { user } else { None };
        let sql = format!(
            "SELECT t.id FROM {table} t
             WHERE (t.id LIKE $1 OR t.id LIKE $2)
               AND ($3 IS NULL OR {owner})
             ORDER BY t.id LIMIT $4",
            owner = if owned {
                "t.user_id IN (SELECT u.id FROM users u WHERE u.external_id = $3)"
            } else {
                "$3 IS NULL"
            }
        );
        self.read_scalar_all(sql!(
            &sql,
            format!("{fragment}%"),
            format!("%{fragment}"),
            user,
            MAX_ID_MATCHES
        ))
        .await
    }

    /// Segments, newest first, optionally of one user and one status (admin listing).
    pub async fn list_segments(
        self,
        user: Option<&str>,
        status: Option<&str>,
        limit: Option<i64>,
    ) -> Result<Vec<SegmentRow>> {
        self.read_all(sql!(
            "SELECT s.id, u.external_id AS user, s.conversation_key, s.external_id AS name, s.status, s.n_messages,
                        s.first_message_at, s.last_message_at, s.close_reason, s.attempts,
                        (SELECT COUNT(*) FROM memories m WHERE m.source_segment_id = s.id) AS n_memories,
                        s.last_error, s.plan_note
                 FROM segments s JOIN users u ON u.id = s.user_id
                 WHERE ($1 IS NULL OR u.external_id = $1) AND ($2 IS NULL OR s.status = $2)
                 ORDER BY s.first_message_at, s.id
                 LIMIT $3",
            user,
            status,
            limit.unwrap_or(NO_LIMIT)
        ))
        .await
    }

    /// A user's active memories, oldest first (user-scoped).
    pub async fn list_memories(self, user: &str, limit: Option<i64>) -> Result<Vec<MemoryRow>> {
        // Evidence and entity lists are gathered with correlated subqueries rather than
        // GROUP_CONCAT / STRING_AGG, whose names differ between the two backends.
        let mut rows: Vec<MemoryRow> = self
            .read_all(sql!(
                "SELECT m.id, m.text, m.confidence, m.sensitive, m.temporal, m.happens_at,
                        m.prompt_version, m.model, m.created_at
                 FROM memories m JOIN users u ON u.id = m.user_id
                 WHERE u.external_id = $1 AND m.archived_at IS NULL
                 ORDER BY m.created_at, m.id
                 LIMIT $2",
                user,
                limit.unwrap_or(NO_LIMIT)
            ))
            .await?;
        for row in &mut rows {
            let (evidence, entities): (Vec<(Option<String>, i64)>, Vec<String>) = {
                let evidence = self.read_all(sql!("SELECT msg.external_id, msg.seq FROM memory_evidence e JOIN messages msg ON msg.id = e.message_id
                     WHERE e.memory_id = $1 ORDER BY msg.created_at, msg.seq", &row.id)).await?;
                let entities = self
                    .read_scalar_all(sql!(
                        "SELECT en.name FROM memory_entities me JOIN entities en ON en.id = me.entity_id
                     WHERE me.memory_id = $1 ORDER BY en.name",
                        &row.id
                    ))
                    .await?;
                (evidence, entities)
            };
            row.evidence = evidence
                .into_iter()
                .map(|(external_id, seq)| external_id.unwrap_or_else(|| format!("t{seq}")))
                .collect();
            row.entities = entities;
        }
        Ok(rows)
    }

    /// Requests, newest first, optionally of one user and one status (admin listing).
    pub async fn list_requests(
        self,
        user: Option<&str>,
        status: Option<&str>,
        limit: Option<i64>,
    ) -> Result<Vec<RequestRow>> {
        self.read_all(sql!("SELECT r.id, r.purpose, u.external_id AS user, r.segment_id, r.chunk_index, r.attempt, r.lane, r.status,
                        r.prompt_version, r.n_items, r.n_dropped, r.input_tokens, r.output_tokens, r.cache_creation_tokens,
                        r.cache_read_tokens, r.cost_usd, r.created_at
                 FROM llm_requests r JOIN users u ON u.id = r.user_id
                 WHERE ($1 IS NULL OR u.external_id = $1) AND ($2 IS NULL OR r.status = $2)
                 ORDER BY r.created_at DESC, r.id DESC
                 LIMIT $3", user, status, limit.unwrap_or(NO_LIMIT))).await
    }

    /// Totals across the store.
    pub async fn counts(self) -> Result<Counts> {
        Ok({
            let users: i64 = self.read_scalar_one(sql!("SELECT COUNT(*) FROM users")).await?;
            let messages: i64 = self.read_scalar_one(sql!("SELECT COUNT(*) FROM messages")).await?;
            let segments: i64 = self.read_scalar_one(sql!("SELECT COUNT(*) FROM segments")).await?;
            let segments_by_status: Vec<(String, i64)> = self
                .read_all(sql!(
                    "SELECT status, COUNT(*) FROM segments GROUP BY status ORDER BY status"
                ))
                .await?;
            let memories: i64 = self
                .read_scalar_one(sql!("SELECT COUNT(*) FROM memories WHERE archived_at IS NULL"))
                .await?;
            let requests: i64 = self.read_scalar_one(sql!("SELECT COUNT(*) FROM llm_requests")).await?;
            Counts {
                users,
                messages,
                segments,
                segments_by_status,
                memories,
                requests,
            }
        })
    }
}

impl Listing<'_> {}

/// Everything stored about one request (`memsift show`).
#[derive(Clone, Debug, PartialEq, Serialize, sqlx::FromRow)]
pub struct RequestDetail {
    /// Request id.
    pub id: String,
    /// Purpose.
    pub purpose: String,
    /// The user's external id.
    pub user: String,
    /// Segment.
    pub segment_id: Option<String>,
    /// Chunk.
    pub chunk_index: i64,
    /// Attempt.
    pub attempt: i64,
    /// Lane.
    pub lane: String,
    /// Config key.
    pub config_key: String,
    /// Model.
    pub model: Option<String>,
    /// Prompt version.
    pub prompt_version: String,
    /// Status.
    pub status: String,
    /// Batch.
    pub batch_id: Option<String>,
    /// Raw output.
    pub raw_output: Option<String>,
    /// Stop reason.
    pub stop_reason: Option<String>,
    /// Items applied.
    pub n_items: i64,
    /// Items dropped.
    pub n_dropped: i64,
    /// Drop records.
    pub drops: sqlx::types::Json<Vec<memsift_core::drops::DroppedItem>>,
    /// Tokens.
    pub input_tokens: i64,
    /// Tokens.
    pub output_tokens: i64,
    /// Tokens.
    pub cache_creation_tokens: i64,
    /// Tokens.
    pub cache_read_tokens: i64,
    /// USD.
    pub cost_usd: f64,
    /// The estimate held against the user's daily budget while the request was planned or in
    /// flight (USD).
    pub reserved_usd: f64,
    /// Error.
    pub error: Option<String>,
    /// Created.
    pub created_at: DateTime<Utc>,
}

/// Everything stored about one memory but its vector (`memsift show`).
#[derive(Clone, Debug, PartialEq, Serialize, sqlx::FromRow)]
pub struct MemoryDetail {
    /// Memory id.
    pub id: String,
    /// The user's external id.
    pub user: String,
    /// Text.
    pub text: String,
    /// 0–1.
    pub importance: f64,
    /// 0–1.
    pub confidence: f64,
    /// Private fact.
    pub sensitive: bool,
    /// one_off, recurring, durable, unknown.
    pub temporal: String,
    /// Event time.
    pub happens_at: Option<DateTime<Utc>>,
    /// When it stops being true.
    pub expires_at: Option<DateTime<Utc>>,
    /// Reads so far.
    pub access_count: i64,
    /// Archived (no longer served), and why.
    pub archived_at: Option<DateTime<Utc>>,
    /// Why it was archived.
    pub archive_reason: Option<String>,
    /// The memory that replaced it.
    pub superseded_by: Option<String>,
    /// The segment it was extracted from.
    pub source_segment_id: Option<String>,
    /// The request whose answer wrote it.
    pub source_request_id: Option<String>,
    /// Prompt or rule-set version that produced it.
    pub prompt_version: String,
    /// The model that wrote it (`heuristic` for the offline lane); none for an operator's
    /// supersede.
    pub model: Option<String>,
    /// The embedding's model, if it has one.
    pub embedding_model: Option<String>,
    /// Created.
    pub created_at: DateTime<Utc>,
    /// Last changed.
    pub updated_at: DateTime<Utc>,
}

/// One row of the `admin_cost_by_user_stage` view: tokens and cost of one user, stage and lane.
#[derive(Clone, Debug, PartialEq, Serialize, sqlx::FromRow)]
pub struct CostRow {
    /// The user (external id).
    pub user_external_id: String,
    /// The stage (request purpose).
    pub purpose: String,
    /// The lane.
    pub lane: String,
    /// Request attempts.
    pub n_requests: i64,
    /// Uncached input tokens.
    pub input_tokens: i64,
    /// Output tokens.
    pub output_tokens: i64,
    /// Cache-write tokens.
    pub cache_creation_tokens: i64,
    /// Cache-read tokens.
    pub cache_read_tokens: i64,
    /// USD.
    pub cost_usd: f64,
}

impl Listing<'_> {
    /// Tokens and cost by user, stage and lane, most expensive first (the admin view of the same name).
    pub async fn cost_by_user_stage(self) -> Result<Vec<CostRow>> {
        self.read_all(sql!(
            "SELECT user_external_id, purpose, lane, n_requests,
                        CAST(input_tokens AS BIGINT) AS input_tokens, CAST(output_tokens AS BIGINT) AS output_tokens,
                        CAST(cache_creation_tokens AS BIGINT) AS cache_creation_tokens,
                        CAST(cache_read_tokens AS BIGINT) AS cache_read_tokens,
                        CAST(cost_usd AS DOUBLE PRECISION) AS cost_usd
                 FROM admin_cost_by_user_stage
                 ORDER BY cost_usd DESC, user_external_id, purpose, lane"
        ))
        .await
    }

    /// One request in full.
    pub async fn request_detail(self, request_id: memsift_core::RequestId) -> Result<RequestDetail> {
        let row: Option<RequestDetail> = self.read_optional(sql!("SELECT r.id, r.purpose, u.external_id AS user, r.segment_id, r.chunk_index, r.attempt, r.lane, r.config_key,
                        r.model, r.prompt_version, r.status, r.batch_id, r.raw_output, r.stop_reason, r.n_items, r.n_dropped,
                        r.drops, r.input_tokens, r.output_tokens, r.cache_creation_tokens, r.cache_read_tokens, r.cost_usd,
                        r.reserved_usd, r.error, r.created_at
                 FROM llm_requests r JOIN users u ON u.id = r.user_id WHERE r.id = $1", request_id)).await?;
        row.ok_or_else(|| {
            crate::StoreError::NotFound(format!(
                "no request, batch or memory {request_id}; list them with `memsift requests`, `memsift batches` or `memsift memories`"
            ))
        })
    }

    /// One memory, active or archived, if stored.
    pub async fn memory_detail(self, memory_id: memsift_core::MemoryId) -> Result<Option<MemoryDetail>> {
        self.read_optional(sql!(
            "SELECT m.id, u.external_id AS user, m.text, m.importance, m.confidence, m.sensitive, m.temporal,
                        m.happens_at, m.expires_at, m.access_count, m.archived_at, m.archive_reason, m.superseded_by,
                        m.source_segment_id, m.source_request_id, m.prompt_version, m.model, m.embedding_model,
                        m.created_at, m.updated_at
                 FROM memories m JOIN users u ON u.id = m.user_id WHERE m.id = $1",
            memory_id
        ))
        .await
    }

    /// The requests of one batch (admin listing).
    pub async fn list_batch_requests(self, batch_id: memsift_core::BatchId) -> Result<Vec<RequestRow>> {
        self.read_all(sql!("SELECT r.id, r.purpose, u.external_id AS user, r.segment_id, r.chunk_index, r.attempt, r.lane, r.status,
                        r.prompt_version, r.n_items, r.n_dropped, r.input_tokens, r.output_tokens, r.cache_creation_tokens,
                        r.cache_read_tokens, r.cost_usd, r.created_at
                 FROM llm_requests r JOIN users u ON u.id = r.user_id
                 WHERE r.batch_id = $1 ORDER BY r.created_at, r.id", batch_id)).await
    }
}

impl Listing<'_> {
    /// The internal id of a user named by the host application's id, if stored.
    pub async fn user_id(self, user: &str) -> Result<Option<memsift_core::UserId>> {
        let id: Option<String> = self
            .read_scalar_optional(sql!("SELECT id FROM users WHERE external_id = $1", user))
            .await?;
        id.map(|id| memsift_core::UserId::parse(&id).map_err(|error| crate::corrupt("users", error)))
            .transpose()
    }

    /// Counts a read of each of `user`'s active memories in `memory_ids`: `access_count + 1` and
    /// `last_accessed_at = now`. Ids of other users' memories are ignored. Returns rows touched.
    pub async fn record_memory_access<Id: std::fmt::Display>(
        self,
        user: &str,
        memory_ids: &[Id],
        now: DateTime<Utc>,
    ) -> Result<u64> {
        if memory_ids.is_empty() {
            return Ok(0);
        }
        // One statement for the whole page: a search that returned ten memories wrote ten
        // statements before, as many as the rest of the search read.
        let sql = format!(
            "UPDATE memories SET access_count = access_count + 1, last_accessed_at = $3
             WHERE id{} AND archived_at IS NULL AND user_id = (SELECT id FROM users WHERE external_id = $2)",
            crate::search::in_set(self.kind(), 1)
        );
        let ids = crate::search::ids_arg(memory_ids.iter());
        self.write(async |tx| {
            tx.execute(crate::tx::Statement {
                sql: &sql,
                args: vec![ids.clone(), crate::tx::Arg::from(user), crate::tx::Arg::from(now)],
            })
            .await
        })
        .await
    }
}

/// Store-wide totals behind `GET /metrics`, read at scrape time.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct MetricsSnapshot {
    /// Segments per status.
    pub segments_by_status: Vec<(String, i64)>,
    /// Requests per (status, purpose, lane).
    pub requests: Vec<(String, String, String, i64)>,
    /// Token and cost totals per purpose.
    pub usage_by_purpose: Vec<UsageTotals>,
    /// Items dropped by the processor or at write, over every request held (not the
    /// `unchanged` records of stage answers).
    pub items_dropped: i64,
    /// Active memories.
    pub memories_active: i64,
    /// Memories held (active or archived) by (temporal kind, sensitive).
    pub memories_by_kind: Vec<(String, bool, i64)>,
    /// Drop records held with requests, by reason (the dedupe stages' hits among them).
    pub drops_by_reason: Vec<(String, i64)>,
    /// Seconds from submission to the provider's end, one per batch that ended.
    pub batch_latencies_secs: Vec<f64>,
}

/// Token and cost totals of one purpose.
#[derive(Clone, Debug, Default, PartialEq, Serialize, sqlx::FromRow)]
pub struct UsageTotals {
    /// Purpose.
    pub purpose: String,
    /// Input tokens.
    pub input_tokens: i64,
    /// Output tokens.
    pub output_tokens: i64,
    /// Input tokens written to the prompt cache.
    pub cache_creation_tokens: i64,
    /// Input tokens read from the prompt cache.
    pub cache_read_tokens: i64,
    /// USD.
    pub cost_usd: f64,
}

impl Listing<'_> {
    /// The totals behind the Prometheus gauges.
    pub async fn metrics_snapshot(self) -> Result<MetricsSnapshot> {
        // SUM of a BIGINT is NUMERIC on PostgreSQL: cast back so both backends decode as i64.
        Ok({
            let segments_by_status = self
                .read_all(sql!(
                    "SELECT status, COUNT(*) FROM segments GROUP BY status ORDER BY status"
                ))
                .await?;
            let requests = self
                .read_all(sql!(
                    "SELECT status, purpose, lane, COUNT(*) FROM llm_requests
                 GROUP BY status, purpose, lane ORDER BY status, purpose, lane"
                ))
                .await?;
            let usage_by_purpose = self
                .read_all(sql!(
                    "SELECT purpose,
                        CAST(COALESCE(SUM(input_tokens), 0) AS BIGINT) AS input_tokens,
                        CAST(COALESCE(SUM(output_tokens), 0) AS BIGINT) AS output_tokens,
                        CAST(COALESCE(SUM(cache_creation_tokens), 0) AS BIGINT) AS cache_creation_tokens,
                        CAST(COALESCE(SUM(cache_read_tokens), 0) AS BIGINT) AS cache_read_tokens,
                        CAST(COALESCE(SUM(cost_usd), 0) AS DOUBLE PRECISION) AS cost_usd
                 FROM llm_requests GROUP BY purpose ORDER BY purpose"
                ))
                .await?;
            // Items, counted from the per-reason records: a stage answer that changed nothing
            // (`unchanged`) is a record, not an item (498 of them once read as 511 items dropped).
            let items_dropped: i64 = self
                .read_scalar_one(sql!(
                    "SELECT CAST(COALESCE(SUM(n), 0) AS BIGINT) FROM request_drops WHERE reason <> 'unchanged'"
                ))
                .await?;
            let memories_active: i64 = self
                .read_scalar_one(sql!("SELECT COUNT(*) FROM memories WHERE archived_at IS NULL"))
                .await?;
            let memories_by_kind: Vec<(String, bool, i64)> = self
                .read_all(sql!(
                    "SELECT temporal, sensitive, COUNT(*) FROM memories GROUP BY temporal, sensitive
                 ORDER BY temporal, sensitive"
                ))
                .await?;
            let drops_by_reason: Vec<(String, i64)> = self
                .read_all(sql!(
                    "SELECT reason, CAST(SUM(n) AS BIGINT) FROM request_drops GROUP BY reason ORDER BY reason"
                ))
                .await?;
            let windows: Vec<(DateTime<Utc>, DateTime<Utc>)> = self
                .read_all(sql!(
                    "SELECT submitted_at, ended_at FROM batches WHERE submitted_at IS NOT NULL AND ended_at IS NOT NULL"
                ))
                .await?;
            let batch_latencies_secs = windows
                .into_iter()
                .map(|(submitted, ended)| (ended - submitted).num_milliseconds().max(0) as f64 / 1000.0)
                .collect();
            MetricsSnapshot {
                segments_by_status,
                requests,
                usage_by_purpose,
                items_dropped,
                memories_active,
                memories_by_kind,
                drops_by_reason,
                batch_latencies_secs,
            }
        })
    }
}
