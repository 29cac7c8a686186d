//! Test fixtures (feature `testing`): rows written directly, and every row of a user read
//! back for exact before/after comparisons.

use chrono::{DateTime, Utc};
use memsift_core::{MemoryId, RequestId, UserId};
use serde::Serialize;
use serde_json::{Value, json};

use crate::journal::LinkRow;
use crate::tx::sql;
use crate::{Result, Store, StoreError, corrupt, vector_to_le_bytes};

/// Every row post-processing may touch for one user, for exact before/after comparisons in tests.
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

impl Store {
    /// Test support (migration tests): a closed segment of `user` with `contents` as alternating
    /// user and assistant turns a minute apart, written with the columns of the first schema only,
    /// so a database at an older migration can be filled. Returns the segment and the user.
    pub async fn insert_test_closed_segment(
        &self,
        user: &str,
        conversation: &str,
        contents: &[&str],
        at: DateTime<Utc>,
    ) -> Result<(memsift_core::SegmentId, UserId)> {
        use crate::tx::Arg;
        let segment_id = memsift_core::SegmentId::new_v7();
        let user_id = self
            .write(async |tx| {
                tx.execute(sql!(
                    "INSERT INTO users (id, external_id, created_at) VALUES ($1, $2, $3) ON CONFLICT (external_id) DO NOTHING",
                    UserId::new_v7(),
                    user,
                    at
                ))
                .await?;
                let user_id: String = tx.scalar_one(sql!("SELECT id FROM users WHERE external_id = $1", user)).await?;
                let last = at + chrono::Duration::minutes(contents.len() as i64);
                tx.execute(sql!(
                    "INSERT INTO segments (id, user_id, conversation_key, status, first_message_at, last_message_at,
                                           n_messages, closed_at, close_reason, created_at)
                     VALUES ($1, $2, $3, 'closed', $4, $5, $6, $5, 'boundary', $4)",
                    segment_id,
                    &user_id,
                    conversation,
                    at,
                    last,
                    contents.len()
                ))
                .await?;
                for (seq, content) in contents.iter().enumerate() {
                    let role = if seq % 2 == 0 { "user" } else { "assistant" };
                    tx.execute(sql!(
                        "INSERT INTO messages (id, user_id, segment_id, seq, role, content, created_at, dedupe_key, referenced_memory_ids)
                         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
                        memsift_core::MessageId::new_v7(),
                        &user_id,
                        segment_id,
                        seq,
                        role,
                        *content,
                        at + chrono::Duration::minutes(seq as i64),
                        format!("test:{segment_id}:{seq}"),
                        Arg::json(&Vec::<String>::new())
                    ))
                    .await?;
                }
                UserId::parse(&user_id).map_err(|error| crate::corrupt("users", error))
            })
            .await?;
        Ok((segment_id, user_id))
    }

    /// Holds a write transaction (on SQLite, the database's write lock: `BEGIN IMMEDIATE`) until
    /// `until` completes, as a long writer would; tests check who waits behind it.
    pub async fn hold_write_lock_until(&self, until: impl Future<Output = ()>) -> Result<()> {
        self.write(async |tx| {
            tx.execute(sql!("UPDATE users SET billing_tier = billing_tier WHERE 1 = 0"))
                .await?;
            until.await;
            Ok(())
        })
        .await
    }

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
        self.write(async |tx| {
            tx.execute(sql!(
                "INSERT INTO entities (id, user_id, name, normalized_name, kind, link_count, last_linked_at, created_at)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $7)",
                &id,
                user_id,
                name,
                name.to_lowercase(),
                kind,
                memory_ids.len(),
                at
            ))
            .await?;
            for memory_id in memory_ids {
                tx.execute(sql!(
                    "INSERT INTO memory_entities (memory_id, entity_id) VALUES ($1, $2)",
                    memory_id,
                    &id
                ))
                .await?;
            }
            Ok(())
        })
        .await?;
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
        self.write(async |tx| {
            tx.execute(sql!(
                "INSERT INTO memory_links (source_id, target_id, kind, confidence, reasoning, created_at)
                 VALUES ($1, $2, $3, 0.9, 'test', $4)",
                source.to_string(),
                target.to_string(),
                kind,
                at
            ))
            .await
        })
        .await?;
        Ok(())
    }

    /// Test support: sets a memory's read count and creation time (refinement eligibility).
    pub async fn set_test_memory_reads(
        &self,
        memory_id: MemoryId,
        reads: i64,
        created_at: DateTime<Utc>,
    ) -> Result<()> {
        self.write(async |tx| {
            tx.execute(sql!(
                "UPDATE memories SET access_count = $2, created_at = $3 WHERE id = $1",
                memory_id,
                reads,
                created_at
            ))
            .await
        })
        .await?;
        Ok(())
    }

    /// Test support: every row of `user_id` that post-processing may touch.
    pub async fn user_rows(&self, user_id: UserId) -> Result<UserRows> {
        let user = user_id.to_string();
        {
            let memories: Vec<FullMemoryRow> = self
                .read_all(sql!(
                    "SELECT id, text, dedupe_key, importance, confidence, happens_at, expires_at, sensitive, temporal,
                        access_count, last_accessed_at, archived_at, archive_reason, superseded_by, refined_at,
                        refinement_rejections, source_segment_id, source_request_id, prompt_version, created_at,
                        updated_at, related_at, embedding_model
                 FROM memories WHERE user_id = $1 ORDER BY id",
                    &user
                ))
                .await?;
            let links: Vec<LinkRow> = self
                .read_all(sql!(
                    "SELECT source_id, target_id, kind, confidence, reasoning, origin_request_id, created_at
                 FROM memory_links
                 WHERE source_id IN (SELECT id FROM memories WHERE user_id = $1)
                    OR target_id IN (SELECT id FROM memories WHERE user_id = $1)
                 ORDER BY source_id, target_id, kind",
                    &user
                ))
                .await?;
            let joins: Vec<(String, String)> = self
                .read_all(sql!(
                    "SELECT memory_id, entity_id FROM memory_entities
                 WHERE memory_id IN (SELECT id FROM memories WHERE user_id = $1) ORDER BY memory_id, entity_id",
                    &user
                ))
                .await?;
            let entities: Vec<FullEntityRow> = self
                .read_all(sql!(
                    "SELECT id, name, normalized_name, kind, link_count, last_linked_at, archived_at, created_at
                 FROM entities WHERE user_id = $1 ORDER BY id",
                    &user
                ))
                .await?;
            let evidence: Vec<(String, String)> = self
                .read_all(sql!(
                    "SELECT memory_id, message_id FROM memory_evidence
                 WHERE memory_id IN (SELECT id FROM memories WHERE user_id = $1) ORDER BY memory_id, message_id",
                    &user
                ))
                .await?;
            Ok(UserRows {
                memories: memories.iter().map(|row| json!(row)).collect(),
                links: links.iter().map(|row| json!(row)).collect(),
                joins,
                entities: entities.iter().map(|row| json!(row)).collect(),
                evidence,
            })
        }
    }

    /// Test support: breaks a request row so that applying its answer fails (an unknown purpose
    /// does not parse), standing in for whatever real damage makes an answer unappliable.
    pub async fn corrupt_test_request(&self, request_id: memsift_core::RequestId) -> Result<()> {
        self.write(async |tx| {
            tx.execute(sql!(
                "UPDATE llm_requests SET purpose = 'no-such-purpose' WHERE id = $1",
                request_id
            ))
            .await?;
            Ok(())
        })
        .await
    }

    /// Test support: records `checksum` (or, with `None`, the text migrations 1 and 2 first
    /// shipped with) as what ran for those migrations, as a database created earlier has it.
    pub async fn record_test_migration_checksums(&self, checksum: Option<Vec<u8>>) -> Result<()> {
        let reworded = match self.kind() {
            crate::BackendKind::Sqlite => crate::REWORDED_SQLITE_MIGRATIONS,
            crate::BackendKind::Postgres => crate::REWORDED_POSTGRES_MIGRATIONS,
        };
        for (version, old) in reworded {
            let recorded = checksum.clone().unwrap_or_else(|| crate::hex_bytes(old));
            self.write(async |tx| {
                tx.execute(sql!(
                    "UPDATE _sqlx_migrations SET checksum = $1 WHERE version = $2",
                    recorded,
                    version
                ))
                .await
            })
            .await?;
        }
        Ok(())
    }

    /// Test support: records `requests` as planned (and, with a segment, as that segment's chunks)
    /// with raw statements of the oldest schema, for migration tests that fill an older database
    /// (planning itself writes columns later migrations added).
    pub async fn plan_test_requests(
        &self,
        segment_id: Option<memsift_core::SegmentId>,
        requests: &[crate::NewRequest],
        at: DateTime<Utc>,
    ) -> Result<()> {
        use crate::tx::Arg;
        self.write(async |tx| {
            for request in requests {
                tx.execute(sql!(
                    "INSERT INTO llm_requests (id, purpose, user_id, segment_id, chunk_index, attempt, lane, config_key,
                                               provider, model, prompt_version, context, request_body, status,
                                               created_at, subject, parent_request_id)
                     VALUES ($1, $2, $3, $4, $5, 1, $6, $7, $8, $9, $10, $11, $12, 'planned', $13, $14, $15)",
                    request.id,
                    request.purpose.as_str(),
                    request.user_id,
                    request.segment_id,
                    request.chunk_index,
                    request.lane.as_str(),
                    &request.config_key,
                    &request.provider,
                    &request.model,
                    &request.prompt_version,
                    Arg::json(&request.context),
                    Arg::json(&request.request_body),
                    at,
                    Arg::json(&request.subject),
                    request.parent_request_id
                ))
                .await?;
            }
            if let Some(segment_id) = segment_id {
                tx.execute(sql!(
                    "UPDATE segments SET planned_chunks = $2, claimed_by = NULL, claimed_until = NULL WHERE id = $1",
                    segment_id,
                    requests.len()
                ))
                .await?;
            }
            Ok(())
        })
        .await
    }

    /// Test support: writes `texts` as memories of `request_id` and marks it applied with raw
    /// statements of the oldest schema, for migration tests that fill an older database (the
    /// apply path itself needs the latest one).
    pub async fn apply_test_memories(
        &self,
        request_id: memsift_core::RequestId,
        user_id: UserId,
        texts: &[&str],
        at: DateTime<Utc>,
    ) -> Result<Vec<MemoryId>> {
        self.write(async |tx| {
            let mut ids = Vec::new();
            for text in texts {
                let id = MemoryId::new_v7();
                tx.execute(sql!(
                    "INSERT INTO memories (id, user_id, text, dedupe_key, confidence, temporal, source_request_id,
                                           prompt_version, created_at, updated_at)
                     VALUES ($1, $2, $3, $4, 0.9, 'durable', $5, 'test@1', $6, $6)",
                    id,
                    user_id,
                    *text,
                    memsift_core::text::dedupe_key(text),
                    request_id,
                    at
                ))
                .await?;
                ids.push(id);
            }
            tx.execute(sql!(
                "UPDATE llm_requests SET status = 'applied', applied_at = $2, n_items = $3 WHERE id = $1",
                request_id,
                at,
                texts.len()
            ))
            .await?;
            Ok(ids)
        })
        .await
    }

    /// Test support (erasure audits): every (table, column) of the data model whose text holds
    /// `needle`, case-insensitively, read through SQL.
    pub async fn find_text_anywhere(&self, needle: &str) -> Result<Vec<(String, String)>> {
        let columns: Vec<(String, String)> = match self.kind() {
            crate::BackendKind::Sqlite => self.read_all(sql!("SELECT m.name, p.name FROM sqlite_master m, pragma_table_info(m.name) p
                     WHERE m.type = 'table' AND m.name NOT LIKE 'sqlite_%' AND p.type IN ('TEXT', 'BLOB', 'ANY', '')")).await?,
            crate::BackendKind::Postgres => self.read_all(sql!("SELECT table_name::TEXT, column_name::TEXT FROM information_schema.columns
                     WHERE table_schema = current_schema() AND data_type IN ('text', 'jsonb', 'json', 'bytea', 'character varying')")).await?,
        };
        let pattern = format!("%{}%", needle.to_lowercase());
        let mut found = Vec::new();
        for (table, column) in columns {
            let statement = match self.kind() {
                crate::BackendKind::Sqlite => {
                    format!("SELECT COUNT(*) FROM \"{table}\" WHERE LOWER(CAST(\"{column}\" AS TEXT)) LIKE $1")
                }
                crate::BackendKind::Postgres => format!(
                    "SELECT COUNT(*) FROM \"{table}\" WHERE LOWER(CASE WHEN pg_typeof(\"{column}\") = 'bytea'::regtype \
                     THEN encode(CAST(CAST(\"{column}\" AS TEXT) AS BYTEA), 'escape') ELSE CAST(\"{column}\" AS TEXT) END) LIKE $1"
                ),
            };
            let n: i64 = self.read_scalar_one(sql!(&statement, &pattern)).await?;
            if n > 0 {
                found.push((table, column));
            }
        }
        Ok(found)
    }

    /// Test support (erasure audits): the SQLite database's files (main file, write-ahead log,
    /// shared memory), as they are on disk; empty on PostgreSQL.
    pub fn database_files(&self) -> Vec<std::path::PathBuf> {
        match &self.backend {
            crate::Backend::Sqlite(pool) => {
                let main = pool.connect_options().get_filename().to_path_buf();
                let with_suffix = |suffix: &str| {
                    let mut name = main.clone().into_os_string();
                    name.push(suffix);
                    std::path::PathBuf::from(name)
                };
                vec![main.clone(), with_suffix("-wal"), with_suffix("-shm")]
            }
            crate::Backend::Postgres(_) => Vec::new(),
        }
    }

    /// Test support: a user (created on first use) and one active memory with no embedding.
    pub async fn insert_test_memory(&self, user_external_id: &str, text: &str) -> Result<(UserId, MemoryId)> {
        let now = chrono::DateTime::parse_from_rfc3339("2026-03-01T10:00:00Z")
            .map_err(|error| corrupt("memories", error))?
            .with_timezone(&chrono::Utc);
        let memory_id = MemoryId::new_v7();
        let user_id: String = self
            .write(async |tx| {
                let user_id: String = tx
                    .scalar_one(sql!(
                        "INSERT INTO users (id, external_id, created_at) VALUES ($1, $2, $3)
                         ON CONFLICT (external_id) DO UPDATE SET external_id = excluded.external_id
                         RETURNING id",
                        UserId::new_v7(),
                        user_external_id,
                        now
                    ))
                    .await?;
                tx.execute(sql!(
                    "INSERT INTO memories (id, user_id, text, dedupe_key, confidence, temporal, prompt_version,
                                           created_at, updated_at)
                     VALUES ($1, $2, $3, $4, 0.9, 'durable', 'test@1', $5, $5)",
                    memory_id,
                    &user_id,
                    text,
                    format!("{text}#{memory_id}"),
                    now
                ))
                .await?;
                Ok(user_id)
            })
            .await?;
        Ok((
            UserId::parse(&user_id).map_err(|error| corrupt("users", error))?,
            memory_id,
        ))
    }

    /// Test support: archives a memory, as post-processing would (and bumps the version, as it must).
    pub async fn archive_test_memory(&self, user_id: UserId, memory_id: MemoryId) -> Result<i64> {
        let now = chrono::DateTime::parse_from_rfc3339("2026-03-02T10:00:00Z")
            .map_err(|error| corrupt("memories", error))?
            .with_timezone(&chrono::Utc);
        self.write(async |tx| {
            tx.execute(sql!(
                "UPDATE memories SET archived_at = $1, archive_reason = 'test' WHERE id = $2 AND user_id = $3",
                now,
                memory_id,
                user_id
            ))
            .await
        })
        .await?;
        self.bump_memory_version(user_id).await
    }

    /// Test support: deletes a memory outright, standing in for a fault that lost it.
    pub async fn delete_test_memory(&self, user_id: UserId, memory_id: MemoryId) -> Result<i64> {
        self.write(async |tx| {
            tx.execute(sql!(
                "DELETE FROM memories WHERE id = $1 AND user_id = $2",
                memory_id,
                user_id
            ))
            .await
        })
        .await?;
        self.bump_memory_version(user_id).await
    }

    /// Bumps `user_id`'s memory version and returns the new value. Every write that changes a
    /// user's active memories or their vectors calls this inside its own transaction.
    pub async fn bump_memory_version(&self, user_id: UserId) -> Result<i64> {
        let version: Option<i64> = self
            .write(async |tx| {
                tx.scalar_optional(sql!(
                    "UPDATE users SET memory_version = memory_version + 1 WHERE id = $1 RETURNING memory_version",
                    user_id
                ))
                .await
            })
            .await?;
        version.ok_or_else(|| StoreError::NotFound(format!("no user {user_id}")))
    }

    /// Stores `vector` (made by `model_id`) as the embedding of `user_id`'s memory `memory_id` and
    /// bumps the user's memory version in the same transaction; returns the new version.
    ///
    /// Scoped by user (invariant 9): a memory id of another user is `NotFound`.
    pub async fn set_memory_embedding(
        &self,
        user_id: UserId,
        memory_id: MemoryId,
        model_id: &str,
        vector: &[f32],
    ) -> Result<i64> {
        if vector.is_empty() || vector.iter().any(|value| !value.is_finite()) {
            return Err(corrupt(
                "memories",
                format!("refusing to store an empty or non-finite embedding for memory {memory_id}"),
            ));
        }
        let bytes = vector_to_le_bytes(vector);
        let dimension = vector.len() as i64;
        self.write(async |tx| {
            let updated: Option<String> = tx
                .scalar_optional(sql!(
                    "UPDATE memories SET embedding = $1, embedding_model = $2, embedding_dim = $3
                     WHERE id = $4 AND user_id = $5
                     RETURNING id",
                    bytes,
                    model_id,
                    dimension,
                    memory_id,
                    user_id
                ))
                .await?;
            if updated.is_none() {
                return Err(StoreError::NotFound(format!(
                    "user {user_id} has no memory {memory_id}"
                )));
            }
            tx.scalar_one(sql!(
                "UPDATE users SET memory_version = memory_version + 1 WHERE id = $1 RETURNING memory_version",
                user_id
            ))
            .await
        })
        .await
    }

    /// Sets a user's billing tier (`None`: the configured default); returns whether the user exists.
    pub async fn set_user_billing_tier(&self, user_external_id: &str, tier: Option<&str>) -> Result<bool> {
        let updated = self
            .write(async |tx| {
                tx.execute(sql!(
                    "UPDATE users SET billing_tier = $2 WHERE external_id = $1",
                    user_external_id,
                    tier
                ))
                .await
            })
            .await?;
        Ok(updated == 1)
    }

    /// Stores a lane's raw output (kept for `memsift replay`) and marks the request `succeeded`.
    pub async fn record_output(
        &self,
        request_id: RequestId,
        raw_output: &str,
        stop_reason: Option<&str>,
        now: DateTime<Utc>,
    ) -> Result<()> {
        let usage = crate::RequestUsage::default();
        if !self
            .requests()
            .record_answer(request_id, raw_output, stop_reason, &usage, now)
            .await?
        {
            return Err(StoreError::NotFound(format!(
                "request {request_id} is not waiting for output"
            )));
        }
        Ok(())
    }

    /// Test support: overwrites a request's drop records with raw JSON, as an older schema stored
    /// them (migration tests).
    pub async fn record_test_drops(&self, request_id: RequestId, drops: Value) -> Result<()> {
        self.write(async |tx| {
            tx.execute(sql!(
                "UPDATE llm_requests SET drops = $2 WHERE id = $1",
                request_id,
                crate::tx::Arg::json(&drops)
            ))
            .await
        })
        .await?;
        Ok(())
    }

    /// Test support: a journal row of `request_id` with raw `after` JSON, in the columns the
    /// oldest schema has (migration tests).
    pub async fn insert_test_operation(
        &self,
        user_id: UserId,
        request_id: RequestId,
        after: Value,
        now: DateTime<Utc>,
    ) -> Result<()> {
        self.write(async |tx| {
            tx.execute(sql!(
                "INSERT INTO operations (id, kind, user_id, request_id, reason, before, after, applied_at)
                 VALUES ($1, 'consolidate', $2, $3, 'test', '{}', $4, $5)",
                memsift_core::OperationId::new_v7(),
                user_id,
                request_id,
                crate::tx::Arg::json(&after),
                now
            ))
            .await
        })
        .await?;
        Ok(())
    }

    /// Test support: puts an ingested batch back to `ended` with its cursor at `cursor`, as an
    /// ingest that stopped after that many lines left it.
    pub async fn reopen_test_ingest(&self, batch_id: memsift_core::BatchId, cursor: i64) -> Result<()> {
        self.write(async |tx| {
            tx.execute(sql!(
                "UPDATE batches SET status = 'ended', ingest_cursor = $2, claimed_by = NULL, claimed_until = NULL
                 WHERE id = $1 AND status = 'ingested'",
                batch_id,
                cursor
            ))
            .await
        })
        .await?;
        Ok(())
    }

    /// Bench support: `rows` (text, vector) as active memories of `user_external_id` (created on
    /// first use) with embeddings of `model_id`, written in transactions of 1,000 rows; the user's
    /// memory version is bumped once per transaction, as an apply would. Each memory rests on a
    /// turn of its own saying its text, with the same vector, twenty turns to a conversation
    /// (already extracted, as the memories say: a pipeline run leaves them alone), so
    /// the turn signals and what was said next to a result have as many turns to read. Turns are
    /// stamped with the turn version the transaction ends at, as ingest stamps them, so a held
    /// turn index is brought forward by them.
    pub async fn insert_bench_memories(
        &self,
        user_external_id: &str,
        model_id: &str,
        rows: &[(String, Vec<f32>)],
        at: DateTime<Utc>,
    ) -> Result<UserId> {
        let user_id: String = self
            .write(async |tx| {
                tx.scalar_one(sql!(
                    "INSERT INTO users (id, external_id, created_at) VALUES ($1, $2, $3)
                     ON CONFLICT (external_id) DO UPDATE SET external_id = excluded.external_id
                     RETURNING id",
                    UserId::new_v7(),
                    user_external_id,
                    at
                ))
                .await
            })
            .await?;
        for chunk in rows.chunks(1000) {
            self.write(async |tx| {
                let mut segment_id = memsift_core::SegmentId::new_v7();
                for (index, (text, vector)) in chunk.iter().enumerate() {
                    let seq = index % 20;
                    if seq == 0 {
                        segment_id = memsift_core::SegmentId::new_v7();
                        tx.execute(sql!(
                            "INSERT INTO segments (id, user_id, conversation_key, status, first_message_at, last_message_at,
                                                   n_messages, closed_at, close_reason, created_at, extracted_at,
                                                   planned_chunks)
                             VALUES ($1, $2, $3, 'extracted', $4, $4, 20, $4, 'boundary', $4, $4, 1)",
                            segment_id,
                            &user_id,
                            format!("bench-{segment_id}"),
                            at
                        ))
                        .await?;
                    }
                    let message_id = memsift_core::MessageId::new_v7();
                    tx.execute(sql!(
                        "INSERT INTO messages (id, user_id, segment_id, seq, role, content, created_at, dedupe_key,
                                               referenced_memory_ids, embedding, embedding_model, turn_stamp)
                         VALUES ($1, $2, $3, $4, 'user', $5, $6, $7, $8, $9, $10,
                                 (SELECT turn_version + 1 FROM users WHERE id = $2))",
                        message_id,
                        &user_id,
                        segment_id,
                        seq,
                        text.as_str(),
                        at,
                        format!("bench:{message_id}"),
                        crate::tx::Arg::json(&Vec::<String>::new()),
                        vector_to_le_bytes(vector),
                        model_id
                    ))
                    .await?;
                    let id = MemoryId::new_v7();
                    tx.execute(sql!(
                        "INSERT INTO memories (id, user_id, text, dedupe_key, confidence, temporal, prompt_version,
                                               created_at, updated_at, embedding, embedding_model, embedding_dim)
                         VALUES ($1, $2, $3, $4, 0.9, 'durable', 'bench@1', $5, $5, $6, $7, $8)",
                        id,
                        &user_id,
                        text.as_str(),
                        format!("{text}#{id}"),
                        at,
                        vector_to_le_bytes(vector),
                        model_id,
                        vector.len()
                    ))
                    .await?;
                    tx.execute(sql!(
                        "INSERT INTO memory_evidence (memory_id, message_id) VALUES ($1, $2)",
                        id,
                        message_id
                    ))
                    .await?;
                }
                tx.execute(sql!(
                    "UPDATE users SET memory_version = memory_version + 1, turn_version = turn_version + 1 WHERE id = $1",
                    &user_id
                ))
                .await?;
                Ok(())
            })
            .await?;
        }
        UserId::parse(&user_id).map_err(|error| corrupt("users", error))
    }
}
