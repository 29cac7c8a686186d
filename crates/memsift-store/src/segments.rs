//! Segments as extraction sees them: claiming closed segments (one atomic statement each), their
//! turns, the known memories they referenced, and what happens when planning fails or waits.

use std::collections::HashSet;

use chrono::{DateTime, Duration, Utc};
use memsift_core::contract::Turn;
use memsift_core::status::Role;
use memsift_core::{MemoryId, MessageId, SegmentId, UserId};
use sqlx::types::Json;

use crate::handles::Segments;
use crate::tx::sql;
use crate::{Result, StoreError, corrupt};

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

impl Segments<'_> {
    /// Claims up to `limit` closed (or failed and due) segments for `worker`, oldest first, one
    /// atomic statement.
    ///
    /// A claim whose lease ran out (its worker died) is taken over; each claim counts an attempt,
    /// so a segment that kills its worker every time still ends `dead` instead of looping.
    pub async fn claim_segments(
        self,
        worker: &str,
        now: DateTime<Utc>,
        lease: Duration,
        limit: i64,
    ) -> Result<Vec<ClaimedSegment>> {
        // SQLite has one writer, so a single UPDATE … RETURNING is already atomic; PostgreSQL
        // needs SKIP LOCKED so two daemons take disjoint rows instead of waiting on each other.
        // Each kind of due segment (closed, failed and due again, claimed by a worker whose lease
        // ran out) is read apart in the `segments_due` index's order, so a claim reads one page
        // of each rather than sorting the whole backlog (one OR across them made the planner scan
        // and sort every due row). A branch may lock rows the page leaves out; they are free again
        // when this statement's transaction ends.
        let lock = self.skip_locked();
        let sql = format!(
            "UPDATE segments SET status = 'extracting', claimed_by = $1, claimed_until = $2, attempts = attempts + 1
             WHERE id IN (SELECT id FROM (
                 SELECT id, closed_at FROM (SELECT id, closed_at FROM segments
                                            WHERE status = 'closed' AND (next_attempt_at IS NULL OR next_attempt_at <= $3)
                                            ORDER BY closed_at, id LIMIT $4 {lock}) AS due_closed
                 UNION ALL
                 SELECT id, closed_at FROM (SELECT id, closed_at FROM segments
                                            WHERE status = 'failed' AND (next_attempt_at IS NULL OR next_attempt_at <= $3)
                                            ORDER BY closed_at, id LIMIT $4 {lock}) AS due_failed
                 UNION ALL
                 SELECT id, closed_at FROM (SELECT id, closed_at FROM segments
                                            WHERE status = 'extracting' AND claimed_until <= $3
                                            ORDER BY closed_at, id LIMIT $4 {lock}) AS lapsed
             ) AS due ORDER BY closed_at, id LIMIT $4)
             RETURNING id, user_id, attempts, closed_at"
        );
        let mut rows: Vec<(String, String, i64, Option<DateTime<Utc>>)> = self
            .write(async |tx| tx.fetch_all(sql!(&sql, worker, now + lease, now, limit)).await)
            .await?;
        // RETURNING follows no ORDER BY: the oldest first again, as they were chosen.
        rows.sort_by(|a, b| (a.3, &a.0).cmp(&(b.3, &b.0)));
        rows.into_iter()
            .map(|(id, user_id, attempt, _)| {
                Ok(ClaimedSegment {
                    id: SegmentId::parse(&id).map_err(|error| corrupt("segments", error))?,
                    user_id: UserId::parse(&user_id).map_err(|error| corrupt("segments", error))?,
                    attempt,
                })
            })
            .collect()
    }

    /// The turns of a segment in order. Labels are the message's external id, else `t<seq>`.
    pub async fn segment_turns(self, segment_id: SegmentId) -> Result<Vec<SegmentTurn>> {
        let rows: Vec<TurnRow> = self
            .read_all(sql!(
                "SELECT id, seq, role, speaker, content, created_at, external_id FROM messages
                 WHERE segment_id = $1 ORDER BY seq",
                segment_id
            ))
            .await?;
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

    /// Marks a claimed segment `extracted` with nothing to do (no user turns, so no request).
    pub async fn finish_empty_segment(self, segment_id: SegmentId, now: DateTime<Utc>) -> Result<()> {
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

    /// Claims one segment by hand (`memsift extract --segment`): an open one is closed first, and a
    /// failed or dead one is retried; one being extracted by a live claim, or already extracted, is refused.
    pub async fn claim_segment(
        self,
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
        let status: Option<(String, Option<String>)> = self
            .read_optional(sql!(
                "SELECT status, claimed_by FROM segments WHERE id = $1",
                segment_id
            ))
            .await?;
        Err(StoreError::NotFound(match status {
            None => format!("no segment {segment_id}; list them with `memsift segments`"),
            Some((status, Some(worker))) if status == "extracting" => {
                format!("segment {segment_id} is being extracted by {worker}; wait for its lease to end")
            }
            Some((status, _)) => format!("segment {segment_id} is `{status}`; there is nothing to extract"),
        }))
    }

    /// Records a failed attempt: the segment is due again after `retry_after`, or `dead` when out of attempts.
    pub async fn fail_segment(
        self,
        segment_id: SegmentId,
        error: &str,
        max_attempts: i64,
        retry_after: Duration,
        now: DateTime<Utc>,
    ) -> Result<()> {
        self.write(async |tx| {
            tx.execute(sql!(
                "UPDATE segments SET
                     status = CASE WHEN attempts >= $3 THEN 'dead' ELSE 'failed' END,
                     next_attempt_at = CASE WHEN attempts >= $3 THEN NULL ELSE $4 END,
                     last_error = $2, claimed_by = NULL, claimed_until = NULL
                 WHERE id = $1",
                segment_id,
                error,
                max_attempts,
                now + retry_after
            ))
            .await
        })
        .await?;
        Ok(())
    }

    /// A segment's status (`open`, `closed`, `extracting`, `extracted`, `failed`, `dead`), or
    /// `None` when there is no such segment.
    pub async fn segment_status(self, segment_id: SegmentId) -> Result<Option<String>> {
        self.read_scalar_optional(sql!("SELECT status FROM segments WHERE id = $1", segment_id))
            .await
    }

    /// Hands a `failed` or `dead` segment back to the pipeline with fresh attempts (an admin's
    /// retry after fixing the cause); returns false when no such segment is in either state.
    pub async fn retry_segment(self, segment_id: SegmentId) -> Result<bool> {
        let updated = self
            .write(async |tx| {
                tx.execute(sql!(
                    "UPDATE segments SET status = 'closed', attempts = 0, next_attempt_at = NULL, last_error = NULL,
                                     claimed_by = NULL, claimed_until = NULL
                 WHERE id = $1 AND status IN ('failed', 'dead')",
                    segment_id
                ))
                .await
            })
            .await?;
        Ok(updated == 1)
    }

    /// Hands a claimed segment back until `until` without spending an attempt (its user is over
    /// budget): it waits `closed` with the reason as its last error, and is claimed again after.
    pub async fn defer_segment(self, segment_id: SegmentId, until: DateTime<Utc>, reason: &str) -> Result<()> {
        self.write(async |tx| {
            tx.execute(sql!(
                "UPDATE segments SET status = 'closed', next_attempt_at = $2, last_error = $3,
                                     attempts = CASE WHEN attempts > 0 THEN attempts - 1 ELSE 0 END,
                                     claimed_by = NULL, claimed_until = NULL
                 WHERE id = $1 AND status = 'extracting'",
                segment_id,
                until,
                reason
            ))
            .await
        })
        .await?;
        Ok(())
    }

    /// The memories a segment's turns referenced (the host's retrieval hits, recorded at ingest), in
    /// order of first reference, each once. Only the segment owner's active memories count: an id
    /// of another user's memory, or of an archived one, is skipped.
    pub async fn referenced_memories(self, segment_id: SegmentId) -> Result<Vec<(MemoryId, String)>> {
        let rows: Vec<(String, Json<Vec<String>>)> = self
            .read_all(sql!(
                "SELECT user_id, referenced_memory_ids FROM messages
                 WHERE segment_id = $1 ORDER BY seq",
                segment_id
            ))
            .await?;
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
    pub async fn active_memory_texts(self, user_id: UserId, ids: &[MemoryId]) -> Result<Vec<(MemoryId, String)>> {
        let mut found = Vec::with_capacity(ids.len());
        for &id in ids {
            let text: Option<String> = self
                .read_scalar_optional(sql!(
                    "SELECT text FROM memories WHERE id = $1 AND user_id = $2 AND archived_at IS NULL",
                    id,
                    user_id
                ))
                .await?;
            if let Some(text) = text {
                found.push((id, text));
            }
        }
        Ok(found)
    }
}
