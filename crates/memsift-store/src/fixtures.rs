//! Test fixtures (feature `test-support`): rows written directly, and every row of a user read
//! back for exact before/after comparisons.

use chrono::{DateTime, Utc};
use memsift_core::{MemoryId, UserId};
use serde::Serialize;
use serde_json::{Value, json};

use crate::journal::LinkRow;
use crate::tx::sql;
use crate::{Result, Store, on_pool};

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
            on_pool!(self, |pool| {
                sqlx::query("UPDATE _sqlx_migrations SET checksum = $1 WHERE version = $2")
                    .bind(recorded)
                    .bind(version)
                    .execute(pool)
                    .await?;
            });
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
            crate::BackendKind::Sqlite => on_pool!(self, |pool| {
                sqlx::query_as(
                    "SELECT m.name, p.name FROM sqlite_master m, pragma_table_info(m.name) p
                     WHERE m.type = 'table' AND m.name NOT LIKE 'sqlite_%' AND p.type IN ('TEXT', 'BLOB', 'ANY', '')",
                )
                .fetch_all(pool)
                .await?
            }),
            crate::BackendKind::Postgres => on_pool!(self, |pool| {
                sqlx::query_as(
                    "SELECT table_name::TEXT, column_name::TEXT FROM information_schema.columns
                     WHERE table_schema = current_schema() AND data_type IN ('text', 'jsonb', 'json', 'bytea', 'character varying')",
                )
                .fetch_all(pool)
                .await?
            }),
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
            let n: i64 = on_pool!(self, |pool| {
                sqlx::query_scalar(&statement).bind(&pattern).fetch_one(pool).await?
            });
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
}
