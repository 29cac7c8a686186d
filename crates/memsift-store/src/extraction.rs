//! Extraction state: claiming segments, planning requests, recording outputs, and the apply path.
//!
//! `apply` is the one place that writes memories from lane output. In a single
//! transaction it checks-and-sets the request's `applied` status (invariant 2), writes memories,
//! evidence and entities, and marks the segment `extracted` once every planned chunk is applied
//! (invariant 1). Replaying the same result finds the request already applied and writes nothing.

use std::collections::HashSet;

use chrono::{DateTime, Duration, Utc};
use memsift_core::contract::Turn;
use memsift_core::status::{Lane, Purpose, RequestStatus, Role};
use memsift_core::text::{collapse_whitespace, dedupe_key};
use memsift_core::{EntityId, MemoryId, MessageId, OperationId, RequestId, SegmentId, UserId};
use memsift_processor::ValidItem;
use serde_json::Value;
use sqlx::types::Json;

use crate::memory_insert::{DEFAULT_IMPORTANCE, Inserted, MemoryInsert};
use crate::tx::{Arg, WriteTx, sql};
use crate::vectors::vector_to_le_bytes;
use crate::{BackendKind, Result, Store, StoreError, corrupt, on_pool};

/// A segment a worker now holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClaimedSegment {
    /// The segment.
    pub id: SegmentId,
    /// Its user.
    pub user_id: UserId,
    /// This attempt's number (1 for the first).
    pub attempt: i64,
}

/// One turn of a segment with the message it came from.
#[derive(Clone, Debug, PartialEq)]
pub struct SegmentTurn {
    /// The message row.
    pub message_id: MessageId,
    /// The turn as lanes see it.
    pub turn: Turn,
}

impl WriteTx {
    /// Inserts one `planned` request row. A request with a segment continues that chunk's attempt
    /// numbers (so re-planning never makes two live twins); one without starts at 1.
    pub(crate) async fn insert_planned_request(&mut self, request: &NewRequest, now: DateTime<Utc>) -> Result<()> {
        self.execute(sql!(
            "INSERT INTO llm_requests (id, purpose, user_id, segment_id, chunk_index, attempt, lane, config_key,
                                       provider, model, prompt_version, context, request_body, status, created_at,
                                       subject, parent_request_id)
             VALUES ($1, $2, $3, $4, $5,
                     (SELECT COALESCE(MAX(attempt), 0) + 1 FROM llm_requests
                      WHERE purpose = $2 AND segment_id = $4 AND chunk_index = $5),
                     $6, $7, $8, $9, $10, $11, $12, 'planned', $13, $14, $15)",
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
            now,
            Arg::json(&request.subject),
            request.parent_request_id
        ))
        .await?;
        Ok(())
    }
}

/// A request attempt to record.
#[derive(Clone, Debug)]
pub struct NewRequest {
    /// Its id; also the provider `custom_id`.
    pub id: RequestId,
    /// What it is for.
    pub purpose: Purpose,
    /// Whose data it carries.
    pub user_id: UserId,
    /// The segment, for extraction.
    pub segment_id: Option<SegmentId>,
    /// Which chunk of the segment.
    pub chunk_index: i64,
    /// The lane it goes through.
    pub lane: Lane,
    /// The `{purpose}_{tier}` key that configured it.
    pub config_key: String,
    /// Provider kind (`heuristic`, `anthropic`, …).
    pub provider: String,
    /// Model name.
    pub model: Option<String>,
    /// Prompt (or rule set) version.
    pub prompt_version: String,
    /// The context snapshot the processor needs later: short ids, memory texts, turn labels.
    pub context: Value,
    /// What to send: `{"system": …, "user_message": …}` (kept so the batch lane can submit later;
    /// erasure removes it).
    pub request_body: Value,
    /// What a post-processing request is about (memory, cluster, entity ids and its run); `{}`
    /// for extraction, whose segment and chunk say it.
    pub subject: Value,
    /// The request whose answer planned this one (a consolidation review names its proposal).
    pub parent_request_id: Option<RequestId>,
}

/// What the apply path writes for one request.
#[derive(Clone, Debug)]
pub struct ApplyInput {
    /// The request whose output this is.
    pub request_id: RequestId,
    /// Its user.
    pub user_id: UserId,
    /// Its segment, for extraction.
    pub segment_id: Option<SegmentId>,
    /// Recorded on each memory.
    pub prompt_version: String,
    /// Recorded on the segment.
    pub model: Option<String>,
    /// Items that survived processing.
    pub items: Vec<ValidItem>,
    /// The processor's drop records, stored with the request.
    pub drops: Value,
    /// How many items the processor dropped.
    pub n_dropped: i64,
    /// One embedding per item, stored with the memory it becomes (`None`: leave the vectors to
    /// `memsift reembed`).
    pub embeddings: Option<ItemEmbeddings>,
    /// `Some(reason)`: a replay of an already-applied request under today's rules. It writes the
    /// items and journals them in `operations`, leaves the request and segment as they are, and
    /// refuses a request that was never applied (that one belongs to the normal path).
    pub replay: Option<String>,
    /// The clock reading.
    pub now: DateTime<Utc>,
}

/// The embeddings of an apply's items, in item order, all made by one model.
#[derive(Clone, Debug, PartialEq)]
pub struct ItemEmbeddings {
    /// The model that made them (recorded with each vector).
    pub model_id: String,
    /// One unit vector per item.
    pub vectors: Vec<Vec<f32>>,
}

/// What `apply` did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ApplyOutcome {
    /// Written now.
    Applied {
        /// The memories created, in item order (duplicates omitted).
        memory_ids: Vec<MemoryId>,
        /// For each created memory, the position of its item in `ApplyInput::items`.
        item_positions: Vec<usize>,
        /// The user's memory version after this write (unchanged when nothing was created), so a
        /// vector cache can follow its own write without a reload.
        memory_version: i64,
        /// Items that matched an active memory written since processing (a concurrent writer).
        n_duplicates_at_write: u64,
        /// Items whose fact the user had erased (a tombstone holds its fingerprint); never stored.
        n_erased_at_write: u64,
        /// The segment became `extracted` in this transaction.
        segment_extracted: bool,
        /// The journal row of a replay.
        operation_id: Option<OperationId>,
    },
    /// Applied before; nothing written (invariant 2).
    AlreadyApplied,
}

#[derive(sqlx::FromRow)]
struct TurnRow {
    id: String,
    seq: i64,
    role: String,
    speaker: Option<String>,
    content: String,
    created_at: DateTime<Utc>,
    external_id: Option<String>,
}

impl Store {
    /// Claims up to `limit` closed (or failed and due) segments for `worker`, one atomic statement.
    ///
    /// A claim whose lease ran out (its worker died) is taken over; each claim counts an attempt,
    /// so a segment that kills its worker every time still ends `dead` instead of looping.
    pub async fn claim_segments(
        &self,
        worker: &str,
        now: DateTime<Utc>,
        lease: Duration,
        limit: i64,
    ) -> Result<Vec<ClaimedSegment>> {
        // SQLite has one writer, so a single UPDATE … RETURNING is already atomic; PostgreSQL
        // needs SKIP LOCKED so two daemons take disjoint rows instead of waiting on each other.
        let sql = match self.kind() {
            BackendKind::Sqlite => {
                "UPDATE segments SET status = 'extracting', claimed_by = $1, claimed_until = $2, attempts = attempts + 1
                 WHERE id IN (SELECT id FROM segments
                              WHERE (status IN ('closed', 'failed') AND (next_attempt_at IS NULL OR next_attempt_at <= $3))
                                 OR (status = 'extracting' AND claimed_until <= $3)
                              ORDER BY closed_at, id LIMIT $4)
                 RETURNING id, user_id, attempts"
            }
            BackendKind::Postgres => {
                "UPDATE segments SET status = 'extracting', claimed_by = $1, claimed_until = $2, attempts = attempts + 1
                 WHERE id IN (SELECT id FROM segments
                              WHERE (status IN ('closed', 'failed') AND (next_attempt_at IS NULL OR next_attempt_at <= $3))
                                 OR (status = 'extracting' AND claimed_until <= $3)
                              ORDER BY closed_at, id LIMIT $4 FOR UPDATE SKIP LOCKED)
                 RETURNING id, user_id, attempts"
            }
        };
        let rows: Vec<(String, String, i64)> = on_pool!(self, |pool| {
            sqlx::query_as(sql)
                .bind(worker)
                .bind(now + lease)
                .bind(now)
                .bind(limit)
                .fetch_all(pool)
                .await?
        });
        rows.into_iter()
            .map(|(id, user_id, attempt)| {
                Ok(ClaimedSegment {
                    id: SegmentId::parse(&id).map_err(|error| corrupt("segments", error))?,
                    user_id: UserId::parse(&user_id).map_err(|error| corrupt("segments", error))?,
                    attempt,
                })
            })
            .collect()
    }

    /// The turns of a segment in order. Labels are the message's external id, else `t<seq>`.
    pub async fn segment_turns(&self, segment_id: SegmentId) -> Result<Vec<SegmentTurn>> {
        let rows: Vec<TurnRow> = on_pool!(self, |pool| {
            sqlx::query_as(
                "SELECT id, seq, role, speaker, content, created_at, external_id FROM messages
                 WHERE segment_id = $1 ORDER BY seq",
            )
            .bind(segment_id.to_string())
            .fetch_all(pool)
            .await?
        });
        rows.into_iter()
            .map(
                |TurnRow {
                     id,
                     seq,
                     role,
                     speaker,
                     content,
                     created_at: at,
                     external_id,
                 }| {
                    Ok(SegmentTurn {
                        message_id: MessageId::parse(&id).map_err(|error| corrupt("messages", error))?,
                        turn: Turn {
                            label: external_id.unwrap_or_else(|| format!("t{seq}")),
                            role: Role::parse(&role).map_err(|error| corrupt("messages", error))?,
                            speaker,
                            content,
                            at,
                        },
                    })
                },
            )
            .collect()
    }

    /// Records the requests planned for a segment's extraction and how many chunks it has, and
    /// releases the segment's claim: from here the requests carry the work, so a slow batch can
    /// never look like a dead worker. Each chunk's attempt number continues from its last one.
    pub async fn plan_segment_requests(
        &self,
        segment_id: SegmentId,
        requests: &[NewRequest],
        now: DateTime<Utc>,
    ) -> Result<()> {
        self.write(async |tx| {
            for request in requests {
                tx.insert_planned_request(request, now).await?;
            }
            tx.execute(sql!(
                "UPDATE segments SET planned_chunks = $2, claimed_by = NULL, claimed_until = NULL WHERE id = $1",
                segment_id,
                requests.len()
            ))
            .await?;
            Ok(())
        })
        .await
    }

    /// Marks a claimed segment `extracted` with nothing to do (no user turns, so no request).
    pub async fn finish_empty_segment(&self, segment_id: SegmentId, now: DateTime<Utc>) -> Result<()> {
        self.write(async |tx| {
            tx.execute(sql!(
                "UPDATE segments SET status = 'extracted', extracted_at = $2, planned_chunks = 0, claimed_by = NULL,
                        claimed_until = NULL, last_error = NULL
                 WHERE id = $1 AND status = 'extracting'",
                segment_id,
                now
            ))
            .await?;
            Ok(())
        })
        .await
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
            .record_answer(request_id, raw_output, stop_reason, &usage, now)
            .await?
        {
            return Err(StoreError::NotFound(format!(
                "request {request_id} is not waiting for output"
            )));
        }
        Ok(())
    }

    /// The context snapshot stored with a request.
    pub async fn request_context(&self, request_id: RequestId) -> Result<Value> {
        let context: Option<Json<Value>> = on_pool!(self, |pool| {
            sqlx::query_scalar("SELECT context FROM llm_requests WHERE id = $1")
                .bind(request_id.to_string())
                .fetch_optional(pool)
                .await?
        });
        context
            .map(|Json(value)| value)
            .ok_or_else(|| StoreError::NotFound(format!("no request {request_id}")))
    }

    /// The normalised keys of all a user's memories, archived ones included: a replay must not
    /// bring back a fact that consolidation or an admin retired.
    pub async fn all_dedupe_keys(&self, user_id: UserId) -> Result<HashSet<String>> {
        let keys: Vec<String> = on_pool!(self, |pool| {
            sqlx::query_scalar("SELECT dedupe_key FROM memories WHERE user_id = $1")
                .bind(user_id.to_string())
                .fetch_all(pool)
                .await?
        });
        Ok(keys.into_iter().collect())
    }

    /// The normalised keys of a user's active memories (the exact dedupe stage against the store).
    pub async fn active_dedupe_keys(&self, user_id: UserId) -> Result<HashSet<String>> {
        let keys: Vec<String> = on_pool!(self, |pool| {
            sqlx::query_scalar("SELECT dedupe_key FROM memories WHERE user_id = $1 AND archived_at IS NULL")
                .bind(user_id.to_string())
                .fetch_all(pool)
                .await?
        });
        Ok(keys.into_iter().collect())
    }

    /// Writes one request's processed output, exactly once (invariants 1 and 2).
    pub async fn apply(&self, input: &ApplyInput) -> Result<ApplyOutcome> {
        self.write(async |tx| {
            let claimed = if input.replay.is_some() {
                let applied: Option<String> = tx
                    .scalar_optional(sql!(
                        "SELECT id FROM llm_requests WHERE id = $1 AND status = 'applied'",
                        input.request_id
                    ))
                    .await?;
                applied.is_some()
            } else {
                tx.execute(sql!(
                    "UPDATE llm_requests SET status = 'applied', applied_at = $2, n_items = $3, n_dropped = $4, drops = $5
                     WHERE id = $1 AND status = 'succeeded'",
                    input.request_id,
                    input.now,
                    input.items.len(),
                    input.n_dropped,
                    Arg::json(&input.drops)
                ))
                .await?
                    == 1
            };
            if !claimed {
                let status: Option<String> = tx
                    .scalar_optional(sql!("SELECT status FROM llm_requests WHERE id = $1", input.request_id))
                    .await?;
                return match status.as_deref().map(RequestStatus::parse) {
                    Some(Ok(other)) if input.replay.is_some() => Err(StoreError::NotFound(format!(
                        "request {} is `{other}`: only applied requests are replayed; `memsift run` applies the rest",
                        input.request_id
                    ))),
                    Some(Ok(RequestStatus::Applied)) => Ok(ApplyOutcome::AlreadyApplied),
                    Some(Ok(other)) => Err(StoreError::NotFound(format!(
                        "request {} is `{other}`, not `succeeded`: there is no output to apply",
                        input.request_id
                    ))),
                    Some(Err(error)) => Err(corrupt("llm_requests", error)),
                    None => Err(StoreError::NotFound(format!("no request {}", input.request_id))),
                };
            }
            let mut memory_ids = Vec::with_capacity(input.items.len());
            let mut item_positions = Vec::with_capacity(input.items.len());
            let mut n_duplicates_at_write = 0;
            let mut n_erased_at_write = 0;
            for (position, item) in input.items.iter().enumerate() {
                let embedding = input.embeddings.as_ref().and_then(|embeddings| {
                    let vector = embeddings.vectors.get(position)?;
                    Some((
                        vector_to_le_bytes(vector),
                        embeddings.model_id.as_str(),
                        vector.len() as i64,
                    ))
                });
                let memory = MemoryInsert {
                    user_id: input.user_id,
                    text: &item.text,
                    dedupe_key: &item.dedupe_key,
                    importance: DEFAULT_IMPORTANCE,
                    confidence: item.confidence,
                    happens_at: item.happens_at,
                    expires_at: item.expires_at,
                    sensitive: item.sensitive,
                    temporal: item.temporal.as_str(),
                    source_segment_id: input.segment_id,
                    source_request_id: Some(input.request_id),
                    prompt_version: &input.prompt_version,
                    refined_at: None,
                    embedding,
                    now: input.now,
                };
                let memory_id = match tx.insert_memory(&memory).await? {
                    Inserted::Written(memory_id) => memory_id,
                    Inserted::Erased => {
                        n_erased_at_write += 1;
                        continue;
                    }
                    Inserted::Duplicate => {
                        n_duplicates_at_write += 1;
                        // The same fact read again: its turns support the memory already stored.
                        for message_id in &item.evidence {
                            tx.execute(sql!(
                                "INSERT INTO memory_evidence (memory_id, message_id)
                                 SELECT id, $3 FROM memories WHERE user_id = $1 AND dedupe_key = $2 AND archived_at IS NULL
                                 ON CONFLICT DO NOTHING",
                                input.user_id,
                                &item.dedupe_key,
                                message_id
                            ))
                            .await?;
                        }
                        continue;
                    }
                };
                for message_id in &item.evidence {
                    tx.execute(sql!(
                        "INSERT INTO memory_evidence (memory_id, message_id) VALUES ($1, $2) ON CONFLICT DO NOTHING",
                        memory_id,
                        message_id
                    ))
                    .await?;
                }
                for (name, kind) in &item.entities {
                    let normalized_name = collapse_whitespace(name).to_lowercase();
                    // Re-linking un-archives: an entity named again is alive again (the
                    // reference kept linking new memories to archived entities).
                    let entity_id: String = tx
                        .scalar_one(sql!(
                            "INSERT INTO entities (id, user_id, name, normalized_name, kind, link_count, last_linked_at, created_at)
                             VALUES ($1, $2, $3, $4, $5, 1, $6, $6)
                             ON CONFLICT (user_id, normalized_name, kind)
                             DO UPDATE SET link_count = entities.link_count + 1, last_linked_at = $6, archived_at = NULL
                             RETURNING id",
                            EntityId::new_v7(),
                            input.user_id,
                            name,
                            &normalized_name,
                            kind,
                            input.now
                        ))
                        .await?;
                    tx.execute(sql!(
                        "INSERT INTO memory_entities (memory_id, entity_id) VALUES ($1, $2) ON CONFLICT DO NOTHING",
                        memory_id,
                        &entity_id
                    ))
                    .await?;
                }
                memory_ids.push(memory_id);
                item_positions.push(position);
            }
            tx.pass_on_dropped_evidence(input).await?;
            // The extractor's pointers (known memories it relates to or merges, and other items
            // of this response) become link hints: relationship classification's first
            // candidates. Hinted items that were not written have no memory to point at.
            for (memory_id, &position) in memory_ids.iter().zip(&item_positions) {
                let item = &input.items[position];
                let mut hints: Vec<String> = item
                    .related_memory_ids
                    .iter()
                    .chain(&item.consolidates_memory_ids)
                    .map(ToString::to_string)
                    .collect();
                for &hinted in &item.linking_hints {
                    if let Some(slot) = item_positions.iter().position(|&written| written == hinted) {
                        hints.push(memory_ids[slot].to_string());
                    }
                }
                hints.sort();
                hints.dedup();
                if !hints.is_empty() {
                    tx.execute(sql!(
                        "UPDATE memories SET link_hints = $2 WHERE id = $1",
                        memory_id,
                        Arg::json(&hints)
                    ))
                    .await?;
                }
            }
            // Cached vector indexes compare this version with their own, so a write by any
            // process makes every other process reload this user's vectors.
            let memory_version: i64 = tx
                .scalar_one(sql!(
                    "UPDATE users SET memory_version = memory_version + $2 WHERE id = $1 RETURNING memory_version",
                    input.user_id,
                    i64::from(!memory_ids.is_empty())
                ))
                .await?;
            let mut segment_extracted = false;
            let mut operation_id = None;
            if let Some(reason) = &input.replay {
                let id = OperationId::new_v7();
                let written: Vec<Value> = memory_ids
                    .iter()
                    .zip(&item_positions)
                    .map(|(memory_id, &position)| {
                        serde_json::json!({ "memory_id": memory_id, "text": input.items[position].text })
                    })
                    .collect();
                tx.execute(sql!(
                    "INSERT INTO operations (id, kind, user_id, request_id, reason, before, after, applied_at)
                     VALUES ($1, 'replay', $2, $3, $4, $5, $6, $7)",
                    id,
                    input.user_id,
                    input.request_id,
                    reason,
                    Arg::json(&serde_json::json!({ "memories": [] })),
                    Arg::json(&serde_json::json!({ "memories": written, "drops": input.drops })),
                    input.now
                ))
                .await?;
                operation_id = Some(id);
            } else if let Some(segment_id) = input.segment_id {
                segment_extracted = tx
                    .execute(sql!(
                        "UPDATE segments SET status = 'extracted', extracted_at = $2, prompt_version = $3, model = $4,
                                             claimed_by = NULL, claimed_until = NULL, last_error = NULL
                         WHERE id = $1 AND status <> 'extracted'
                           AND planned_chunks IS NOT NULL
                           AND planned_chunks <= (SELECT COUNT(DISTINCT chunk_index) FROM llm_requests
                                                  WHERE segment_id = $1 AND purpose = 'extraction' AND status = 'applied')",
                        segment_id,
                        input.now,
                        &input.prompt_version,
                        &input.model
                    ))
                    .await?
                    == 1;
            }
            Ok(ApplyOutcome::Applied {
                memory_ids,
                item_positions,
                memory_version,
                n_duplicates_at_write,
                n_erased_at_write,
                segment_extracted,
                operation_id,
            })
        })
        .await
    }

    /// Records a failed attempt: the segment is due again after `retry_after`, or `dead` when out of attempts.
    pub async fn fail_segment(
        &self,
        segment_id: SegmentId,
        error: &str,
        max_attempts: i64,
        retry_after: Duration,
        now: DateTime<Utc>,
    ) -> Result<()> {
        on_pool!(self, |pool| {
            sqlx::query(
                "UPDATE segments SET
                     status = CASE WHEN attempts >= $3 THEN 'dead' ELSE 'failed' END,
                     next_attempt_at = CASE WHEN attempts >= $3 THEN NULL ELSE $4 END,
                     last_error = $2, claimed_by = NULL, claimed_until = NULL
                 WHERE id = $1",
            )
            .bind(segment_id.to_string())
            .bind(error)
            .bind(max_attempts)
            .bind(now + retry_after)
            .execute(pool)
            .await?;
        });
        Ok(())
    }
}

/// A request's stored output and the snapshot needed to process it.
#[derive(Clone, Debug)]
pub struct StoredOutput {
    /// The request.
    pub request_id: RequestId,
    /// Its user.
    pub user_id: UserId,
    /// Its segment, for extraction.
    pub segment_id: Option<SegmentId>,
    /// Its status.
    pub status: RequestStatus,
    /// Prompt version.
    pub prompt_version: String,
    /// Model.
    pub model: Option<String>,
    /// Raw text, when an output was recorded.
    pub raw_output: Option<String>,
    /// Stop reason as the provider reported it.
    pub stop_reason: Option<String>,
    /// The context snapshot.
    pub context: Value,
    /// What it is for.
    pub purpose: Purpose,
    /// What a post-processing request is about.
    pub subject: Value,
}

impl Store {
    /// Loads what the apply path needs for one request.
    pub async fn stored_output(&self, request_id: RequestId) -> Result<StoredOutput> {
        type Row = (
            String,
            Option<String>,
            String,
            String,
            Option<String>,
            Option<String>,
            Option<String>,
            Json<Value>,
            String,
            Json<Value>,
        );
        let row: Option<Row> = on_pool!(self, |pool| {
            sqlx::query_as(
                "SELECT user_id, segment_id, status, prompt_version, model, raw_output, stop_reason, context, purpose,
                        subject
                 FROM llm_requests WHERE id = $1",
            )
            .bind(request_id.to_string())
            .fetch_optional(pool)
            .await?
        });
        let (
            user_id,
            segment_id,
            status,
            prompt_version,
            model,
            raw_output,
            stop_reason,
            Json(context),
            purpose,
            Json(subject),
        ) = row.ok_or_else(|| StoreError::NotFound(format!("no request {request_id}")))?;
        Ok(StoredOutput {
            request_id,
            user_id: UserId::parse(&user_id).map_err(|error| corrupt("llm_requests", error))?,
            segment_id: segment_id
                .map(|id| SegmentId::parse(&id))
                .transpose()
                .map_err(|error| corrupt("llm_requests", error))?,
            status: RequestStatus::parse(&status).map_err(|error| corrupt("llm_requests", error))?,
            prompt_version,
            model,
            raw_output,
            stop_reason,
            context,
            purpose: Purpose::parse(&purpose).map_err(|error| corrupt("llm_requests", error))?,
            subject,
        })
    }
}

impl Store {
    /// Claims one segment by hand (`memsift extract --segment`): an open one is closed first, and a
    /// failed or dead one is retried; one being extracted by a live claim, or already extracted, is refused.
    pub async fn claim_segment(
        &self,
        segment_id: SegmentId,
        worker: &str,
        now: DateTime<Utc>,
    ) -> Result<ClaimedSegment> {
        let lease_until = now + Duration::minutes(15);
        let claimed: Option<(String, i64)> = self
            .write(async |tx| {
                tx.execute(sql!(
                    "UPDATE segments SET status = 'closed', close_reason = 'manual', closed_at = $2 WHERE id = $1 AND status = 'open'",
                    segment_id,
                    now
                ))
                .await?;
                tx.fetch_optional(sql!(
                    "UPDATE segments SET status = 'extracting', claimed_by = $2, claimed_until = $3, attempts = attempts + 1,
                                         next_attempt_at = NULL
                     WHERE id = $1 AND (status IN ('closed', 'failed', 'dead') OR (status = 'extracting' AND claimed_until <= $4))
                     RETURNING user_id, attempts",
                    segment_id,
                    worker,
                    lease_until,
                    now
                ))
                .await
            })
            .await?;
        if let Some((user_id, attempt)) = claimed {
            return Ok(ClaimedSegment {
                id: segment_id,
                user_id: UserId::parse(&user_id).map_err(|error| corrupt("segments", error))?,
                attempt,
            });
        }
        let status: Option<(String, Option<String>)> = on_pool!(self, |pool| {
            sqlx::query_as("SELECT status, claimed_by FROM segments WHERE id = $1")
                .bind(segment_id.to_string())
                .fetch_optional(pool)
                .await?
        });
        Err(StoreError::NotFound(match status {
            None => format!("no segment {segment_id}; list them with `memsift segments`"),
            Some((status, Some(worker))) if status == "extracting" => {
                format!("segment {segment_id} is being extracted by {worker}; wait for its lease to end")
            }
            Some((status, _)) => format!("segment {segment_id} is `{status}`; there is nothing to extract"),
        }))
    }
}

impl Store {
    /// The user's billing tier column (`None`: the configured default applies).
    pub async fn user_billing_tier(&self, user_id: UserId) -> Result<Option<String>> {
        let tier: Option<Option<String>> = on_pool!(self, |pool| {
            sqlx::query_scalar("SELECT billing_tier FROM users WHERE id = $1")
                .bind(user_id.to_string())
                .fetch_optional(pool)
                .await?
        });
        Ok(tier.flatten())
    }

    /// Hands a `failed` or `dead` segment back to the pipeline with fresh attempts (an admin's
    /// retry after fixing the cause); returns false when no such segment is in either state.
    pub async fn retry_segment(&self, segment_id: SegmentId) -> Result<bool> {
        let updated = on_pool!(self, |pool| {
            sqlx::query(
                "UPDATE segments SET status = 'closed', attempts = 0, next_attempt_at = NULL, last_error = NULL,
                                     claimed_by = NULL, claimed_until = NULL
                 WHERE id = $1 AND status IN ('failed', 'dead')",
            )
            .bind(segment_id.to_string())
            .execute(pool)
            .await?
            .rows_affected()
        });
        Ok(updated == 1)
    }

    /// Drops the raw model output of finished requests (applied or dead) completed before
    /// `before`: retention for text nobody needs once its memories are written. `memsift replay`
    /// cannot re-read a request after this. Returns how many outputs were dropped.
    pub async fn purge_raw_outputs(&self, before: DateTime<Utc>) -> Result<u64> {
        Ok(on_pool!(self, |pool| {
            sqlx::query(
                "UPDATE llm_requests SET raw_output = NULL
                 WHERE raw_output IS NOT NULL AND status IN ('applied', 'dead') AND completed_at < $1",
            )
            .bind(before)
            .execute(pool)
            .await?
            .rows_affected()
        }))
    }

    /// What a user's requests created since `since` have cost so far (USD), every stage and lane.
    pub async fn user_cost_since(&self, user_id: UserId, since: DateTime<Utc>) -> Result<f64> {
        let cost: Option<f64> = on_pool!(self, |pool| {
            sqlx::query_scalar(
                "SELECT CAST(SUM(cost_usd) AS DOUBLE PRECISION) FROM llm_requests WHERE user_id = $1 AND created_at >= $2",
            )
            .bind(user_id.to_string())
            .bind(since)
            .fetch_one(pool)
            .await?
        });
        Ok(cost.unwrap_or(0.0))
    }

    /// Hands a claimed segment back until `until` without spending an attempt (its user is over
    /// budget): it waits `closed` with the reason as its last error, and is claimed again after.
    pub async fn defer_segment(&self, segment_id: SegmentId, until: DateTime<Utc>, reason: &str) -> Result<()> {
        on_pool!(self, |pool| {
            sqlx::query(
                "UPDATE segments SET status = 'closed', next_attempt_at = $2, last_error = $3,
                                     attempts = CASE WHEN attempts > 0 THEN attempts - 1 ELSE 0 END,
                                     claimed_by = NULL, claimed_until = NULL
                 WHERE id = $1 AND status = 'extracting'",
            )
            .bind(segment_id.to_string())
            .bind(until)
            .bind(reason)
            .execute(pool)
            .await?
            .rows_affected()
        });
        Ok(())
    }

    /// A user's most recent active memories, newest first, as (id, text): context for a payload.
    pub async fn recent_memories(&self, user_id: UserId, limit: i64) -> Result<Vec<(MemoryId, String)>> {
        let rows: Vec<(String, String)> = on_pool!(self, |pool| {
            sqlx::query_as(
                "SELECT id, text FROM memories WHERE user_id = $1 AND archived_at IS NULL
                 ORDER BY created_at DESC, id DESC LIMIT $2",
            )
            .bind(user_id.to_string())
            .bind(limit)
            .fetch_all(pool)
            .await?
        });
        rows.into_iter()
            .map(|(id, text)| Ok((MemoryId::parse(&id).map_err(|error| corrupt("memories", error))?, text)))
            .collect()
    }

    /// The memories a segment's turns referenced (the host's retrieval hits, recorded at ingest), in
    /// order of first reference, each once. Only the segment owner's active memories count: an id
    /// of another user's memory, or of an archived one, is skipped.
    pub async fn referenced_memories(&self, segment_id: SegmentId) -> Result<Vec<(MemoryId, String)>> {
        let rows: Vec<(String, Json<Vec<String>>)> = on_pool!(self, |pool| {
            sqlx::query_as(
                "SELECT user_id, referenced_memory_ids FROM messages
                 WHERE segment_id = $1 ORDER BY seq",
            )
            .bind(segment_id.to_string())
            .fetch_all(pool)
            .await?
        });
        let Some((user_id, _)) = rows.first() else {
            return Ok(Vec::new());
        };
        let user_id = UserId::parse(user_id).map_err(|error| corrupt("messages", error))?;
        let mut seen = HashSet::new();
        let mut ids = Vec::new();
        for (_, Json(referenced)) in &rows {
            for id in referenced {
                let id = MemoryId::parse(id).map_err(|error| corrupt("messages", error))?;
                if seen.insert(id) {
                    ids.push(id);
                }
            }
        }
        self.active_memory_texts(user_id, &ids).await
    }

    /// The texts of `user_id`'s active memories among `ids`, in the order given; ids of other users'
    /// memories and of archived ones are skipped (invariant 9).
    pub async fn active_memory_texts(&self, user_id: UserId, ids: &[MemoryId]) -> Result<Vec<(MemoryId, String)>> {
        let mut found = Vec::with_capacity(ids.len());
        for &id in ids {
            let text: Option<String> = on_pool!(self, |pool| {
                sqlx::query_scalar("SELECT text FROM memories WHERE id = $1 AND user_id = $2 AND archived_at IS NULL")
                    .bind(id.to_string())
                    .bind(user_id.to_string())
                    .fetch_optional(pool)
                    .await?
            });
            if let Some(text) = text {
                found.push((id, text));
            }
        }
        Ok(found)
    }
}

impl Store {
    /// Sets a user's billing tier (`None`: the configured default); returns whether the user exists.
    pub async fn set_user_billing_tier(&self, user_external_id: &str, tier: Option<&str>) -> Result<bool> {
        let updated = on_pool!(self, |pool| {
            sqlx::query("UPDATE users SET billing_tier = $2 WHERE external_id = $1")
                .bind(user_external_id)
                .bind(tier)
                .execute(pool)
                .await?
                .rows_affected()
        });
        Ok(updated == 1)
    }
}

impl WriteTx {
    /// A dropped duplicate of a stored memory passes its turns on as that memory's evidence, so
    /// the facts a question needs stay cited after dedupe. Only this user's memories and messages
    /// qualify.
    async fn pass_on_dropped_evidence(&mut self, input: &ApplyInput) -> Result<()> {
        for drop in input.drops.as_array().into_iter().flatten() {
            let evidence: Vec<&str> = drop
                .get("evidence")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            let by_key = drop.get("reason").and_then(Value::as_str) == Some("duplicate_of_existing");
            let target = match (drop.get("duplicate_of").and_then(Value::as_str), by_key) {
                (Some(memory_id), _) => Some((memory_id.to_owned(), false)),
                (None, true) => drop
                    .get("text")
                    .and_then(Value::as_str)
                    .map(|text| (dedupe_key(text), true)),
                (None, false) => None,
            };
            let Some((target, is_key)) = target else { continue };
            let statement = if is_key {
                "INSERT INTO memory_evidence (memory_id, message_id)
                 SELECT m.id, $2 FROM memories m
                 WHERE m.user_id = $3 AND m.dedupe_key = $1 AND m.archived_at IS NULL
                   AND EXISTS (SELECT 1 FROM messages WHERE id = $2 AND user_id = $3)
                 ON CONFLICT DO NOTHING"
            } else {
                "INSERT INTO memory_evidence (memory_id, message_id)
                 SELECT m.id, $2 FROM memories m
                 WHERE m.id = $1 AND m.user_id = $3
                   AND EXISTS (SELECT 1 FROM messages WHERE id = $2 AND user_id = $3)
                 ON CONFLICT DO NOTHING"
            };
            for message_id in evidence {
                self.execute(sql!(statement, &target, message_id, input.user_id))
                    .await?;
            }
        }
        Ok(())
    }
}
