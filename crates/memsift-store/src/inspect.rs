//! Test support (feature `testing`): reads that only tests make, to look at what the product wrote.

use chrono::{DateTime, Utc};
use memsift_core::{OperationId, SegmentId};

use crate::revisions::STATE_COLUMNS;
use crate::tx::sql;
use crate::{MemoryState, Result, ScheduleRow, Store, StoreError};

impl Store {
    /// Rows in one of the data model's tables (for tests and reports).
    pub async fn count_rows(&self, table: &str) -> Result<i64> {
        const TABLES: &[&str] = &[
            "users",
            "segments",
            "messages",
            "batches",
            "llm_requests",
            "memories",
            "memory_evidence",
            "memory_links",
            "entities",
            "memory_entities",
            "operations",
            "schedules",
            "tombstones",
            "segment_summaries",
            "request_drops",
        ];
        let table = TABLES.iter().find(|known| **known == table).ok_or_else(|| {
            crate::StoreError::NotFound(format!("no table `{table}`; tables are {}", TABLES.join(", ")))
        })?;
        let sql = format!("SELECT COUNT(*) FROM {table}");
        self.read_scalar_one(sql!(&sql)).await
    }

    /// How often a memory was read and when last (for tests and admin views); `None` if absent.
    pub async fn memory_access(&self, memory_id: &str) -> Result<Option<(i64, Option<DateTime<Utc>>)>> {
        self.read_optional(sql!(
            "SELECT access_count, last_accessed_at FROM memories WHERE id = $1",
            memory_id
        ))
        .await
    }

    /// The body a request was (or will be) sent with: the system prompt and the user message.
    pub async fn request_body(&self, request_id: memsift_core::RequestId) -> Result<serde_json::Value> {
        let body: Option<Option<sqlx::types::Json<serde_json::Value>>> = self
            .read_scalar_optional(sql!("SELECT request_body FROM llm_requests WHERE id = $1", request_id))
            .await?;
        match body {
            None => Err(StoreError::NotFound(format!("no request {request_id}"))),
            Some(body) => Ok(body.map_or(serde_json::Value::Null, |body| body.0)),
        }
    }

    /// Foreign keys, as `table.column`, that no index leads with (for the schema test): deleting
    /// a parent row, or counting a parent's children, scans the whole child table without one.
    pub async fn unindexed_foreign_keys(&self) -> Result<Vec<String>> {
        let rows: Vec<(String, String)> = match &self.backend {
            crate::Backend::Sqlite(_) => {
                self.read_all(sql!("SELECT m.name, f.\"from\" FROM sqlite_master m JOIN pragma_foreign_key_list(m.name) f \
                     WHERE m.type = 'table' AND NOT EXISTS ( \
                         SELECT 1 FROM pragma_index_list(m.name) il JOIN pragma_index_info(il.name) ii \
                         WHERE ii.seqno = 0 AND ii.name = f.\"from\") \
                     ORDER BY 1, 2")).await?
            }
            crate::Backend::Postgres(_) => {
                self.read_all(sql!("SELECT c.conrelid::regclass::text, a.attname::text FROM pg_constraint c \
                     JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = c.conkey[1] \
                     WHERE c.contype = 'f' \
                       AND c.connamespace = (SELECT oid FROM pg_namespace WHERE nspname = current_schema()) \
                       AND NOT EXISTS (SELECT 1 FROM pg_index i WHERE i.indrelid = c.conrelid AND i.indkey[0] = c.conkey[1]) \
                     ORDER BY 1, 2")).await?
            }
        };
        Ok(rows
            .into_iter()
            .map(|(table, column)| format!("{table}.{column}"))
            .collect())
    }

    /// A user's journal entries of one kind, oldest first (for audits, and undoing a run).
    pub async fn operation_ids(&self, user_external_id: &str, kind: &str) -> Result<Vec<OperationId>> {
        let ids: Vec<String> = self
            .read_scalar_all(sql!(
                "SELECT o.id FROM operations o JOIN users u ON u.id = o.user_id
                 WHERE u.external_id = $1 AND o.kind = $2 ORDER BY o.applied_at, o.id",
                user_external_id,
                kind
            ))
            .await?;
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
        let rows: Vec<Row> = self.read_all(sql!(&sql, user_id)).await?;
        Ok(rows.into_iter().map(|row| (row.id, row.text, row.state)).collect())
    }

    /// Every job's row, by name.
    pub async fn schedule_rows(&self) -> Result<Vec<ScheduleRow>> {
        self.read_all(sql!(
            "SELECT name, last_fired_at, lease_owner, lease_until FROM schedules ORDER BY name"
        ))
        .await
    }

    /// A segment's live summary.
    pub async fn live_summary(&self, segment_id: SegmentId) -> Result<Option<String>> {
        self.read_scalar_optional(sql!(
            "SELECT text FROM segment_summaries WHERE segment_id = $1 AND superseded_at IS NULL",
            segment_id
        ))
        .await
    }

    /// Memories a post-processing run has changed so far, as its cap counts them.
    pub async fn run_changes(&self, run: &str) -> Result<i64> {
        self.write(async |tx| tx.run_changes(run).await).await
    }

    /// A request's typed subject columns: its run and the entity it reviews.
    pub async fn request_subject_columns(
        &self,
        request_id: memsift_core::RequestId,
    ) -> Result<(Option<String>, Option<String>)> {
        self.read_one(sql!(
            "SELECT run_id, subject_entity_id FROM llm_requests WHERE id = $1",
            request_id
        ))
        .await
    }
}
