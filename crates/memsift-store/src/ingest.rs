//! Ingest: messages into segments, one transaction per call, idempotent by message key.
//!
//! A message joins its conversation's open segment, or starts a new one when the open segment
//! went idle (the rule in `memsift_core::segment`). Membership is written on the message row and
//! never inferred later. A message whose key is already stored is skipped, so re-importing a
//! file adds nothing; a failure anywhere rolls the whole call back.

use std::collections::HashMap;

use chrono::{DateTime, Duration, Utc};
use memsift_core::segment::{Placement, place_message};
use memsift_core::{MessageId, SegmentId, UserId};
use serde::Serialize;

use crate::tx::{Arg, sql};
use crate::{Result, Store};

pub use memsift_core::message::NewMessage;

/// What an ingest call did.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct IngestReport {
    /// Messages offered.
    pub n_offered: u64,
    /// Messages stored.
    pub n_added: u64,
    /// Messages already stored (skipped).
    pub n_already_stored: u64,
    /// Users created.
    pub n_users_created: u64,
    /// Segments started.
    pub n_segments_started: u64,
    /// Segments closed (by a boundary or an idle gap inside the input).
    pub n_segments_closed: u64,
}

#[derive(Clone, Copy)]
struct OpenSegment {
    id: SegmentId,
    last_at: DateTime<Utc>,
    n_messages: i64,
}

impl Store {
    /// Stores `messages` in one transaction, assigning each to a segment; `progress` is called after each.
    pub async fn ingest(
        &self,
        messages: &[NewMessage],
        idle_timeout: Duration,
        now: DateTime<Utc>,
        progress: &(dyn Fn(u64) + Sync),
    ) -> Result<IngestReport> {
        let mut report = IngestReport {
            n_offered: messages.len() as u64,
            ..IngestReport::default()
        };
        self.write(async |tx| {
            let mut users: HashMap<&str, UserId> = HashMap::new();
            let mut open_segments: HashMap<(UserId, &str), Option<OpenSegment>> = HashMap::new();
            for (message_idx, message) in messages.iter().enumerate() {
                let user_id = match users.get(message.user_external_id.as_str()) {
                    Some(user_id) => *user_id,
                    None => {
                        let created: Option<String> = tx
                            .scalar_optional(sql!(
                                "INSERT INTO users (id, external_id, created_at) VALUES ($1, $2, $3)
                                 ON CONFLICT (external_id) DO NOTHING RETURNING id",
                                UserId::new_v7(),
                                &message.user_external_id,
                                now
                            ))
                            .await?;
                        let id_text = match created {
                            Some(id_text) => {
                                report.n_users_created += 1;
                                id_text
                            }
                            None => {
                                tx.scalar_one(sql!(
                                    "SELECT id FROM users WHERE external_id = $1",
                                    &message.user_external_id
                                ))
                                .await?
                            }
                        };
                        let user_id = UserId::parse(&id_text).map_err(|error| crate::corrupt("users", error))?;
                        users.insert(message.user_external_id.as_str(), user_id);
                        user_id
                    }
                };

                let dedupe_key = message.dedupe_key();
                let already: Option<String> = tx
                    .scalar_optional(sql!(
                        "SELECT id FROM messages WHERE user_id = $1 AND dedupe_key = $2",
                        user_id,
                        &dedupe_key
                    ))
                    .await?;
                if already.is_some() {
                    report.n_already_stored += 1;
                    progress(message_idx as u64 + 1);
                    continue;
                }

                let conversation_slot = (user_id, message.conversation_key.as_str());
                let open = match open_segments.get(&conversation_slot) {
                    Some(known) => *known,
                    None => {
                        let row: Option<(String, DateTime<Utc>, i64)> = tx
                            .fetch_optional(sql!(
                                "SELECT id, last_message_at, n_messages FROM segments
                                 WHERE user_id = $1 AND conversation_key = $2 AND status = 'open'",
                                user_id,
                                &message.conversation_key
                            ))
                            .await?;
                        let open = match row {
                            Some((id_text, last_at, n_messages)) => Some(OpenSegment {
                                id: SegmentId::parse(&id_text).map_err(|error| crate::corrupt("segments", error))?,
                                last_at,
                                n_messages,
                            }),
                            None => None,
                        };
                        open_segments.insert(conversation_slot, open);
                        open
                    }
                };
                let placement = place_message(open.map(|segment| segment.last_at), message.at, idle_timeout);
                if let (Placement::CloseAndStart, Some(idle_segment)) = (placement, open) {
                    tx.execute(sql!(
                        "UPDATE segments SET status = 'closed', close_reason = 'idle', closed_at = $2 WHERE id = $1",
                        idle_segment.id,
                        idle_segment.last_at + idle_timeout
                    ))
                    .await?;
                    report.n_segments_closed += 1;
                }
                let mut segment = match (placement, open) {
                    (Placement::Join, Some(open)) => open,
                    _ => {
                        let segment_id = SegmentId::new_v7();
                        tx.execute(sql!(
                            "INSERT INTO segments (id, user_id, conversation_key, external_id, status,
                                                   first_message_at, last_message_at, n_messages, created_at)
                             VALUES ($1, $2, $3, $4, 'open', $5, $5, 0, $6)",
                            segment_id,
                            user_id,
                            &message.conversation_key,
                            &message.segment_name,
                            message.at,
                            now
                        ))
                        .await?;
                        report.n_segments_started += 1;
                        OpenSegment {
                            id: segment_id,
                            last_at: message.at,
                            n_messages: 0,
                        }
                    }
                };

                let referenced: Vec<String> = message
                    .referenced_memory_ids
                    .iter()
                    .map(ToString::to_string)
                    .collect();
                tx.execute(sql!(
                    "INSERT INTO messages (id, user_id, segment_id, seq, role, speaker, content, created_at, external_id, dedupe_key,
                                           referenced_memory_ids)
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
                    MessageId::new_v7(),
                    user_id,
                    segment.id,
                    segment.n_messages,
                    message.role.as_str(),
                    &message.speaker,
                    &message.content,
                    message.at,
                    &message.external_id,
                    &dedupe_key,
                    Arg::json(&referenced)
                ))
                .await?;
                report.n_added += 1;
                segment.n_messages += 1;
                segment.last_at = segment.last_at.max(message.at);

                if message.boundary_after {
                    tx.execute(sql!(
                        "UPDATE segments SET last_message_at = $2, n_messages = $3, status = 'closed',
                                             close_reason = 'boundary', closed_at = $2,
                                             first_message_at = CASE WHEN first_message_at > $4 THEN $4 ELSE first_message_at END
                         WHERE id = $1",
                        segment.id,
                        segment.last_at,
                        segment.n_messages,
                        message.at
                    ))
                    .await?;
                    report.n_segments_closed += 1;
                    open_segments.insert(conversation_slot, None);
                } else {
                    tx.execute(sql!(
                        "UPDATE segments SET last_message_at = $2, n_messages = $3,
                                             first_message_at = CASE WHEN first_message_at > $4 THEN $4 ELSE first_message_at END
                         WHERE id = $1",
                        segment.id,
                        segment.last_at,
                        segment.n_messages,
                        message.at
                    ))
                    .await?;
                    open_segments.insert(conversation_slot, Some(segment));
                }
                progress(message_idx as u64 + 1);
            }
            Ok(())
        })
        .await?;
        Ok(report)
    }

    /// Closes every open segment whose last message is at least `idle_timeout` before `now`.
    pub async fn close_idle_segments(&self, now: DateTime<Utc>, idle_timeout: Duration) -> Result<u64> {
        let cutoff = now - idle_timeout;
        let closed = self
            .write(async |tx| {
                tx.execute(sql!(
                    "UPDATE segments SET status = 'closed', close_reason = 'idle', closed_at = $2
                 WHERE status = 'open' AND last_message_at <= $1",
                    cutoff,
                    now
                ))
                .await
            })
            .await?;
        Ok(closed)
    }
}

/// What closing one segment by hand found.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ClosedSegment {
    /// The segment.
    pub id: String,
    /// Its status after the call (`closed` when it was open; otherwise unchanged).
    pub status: String,
    /// Whether this call closed it.
    pub closed_now: bool,
}

impl Store {
    /// Closes one open segment of `user` now (reason `manual`). A segment of another user is
    /// reported as absent, so ids cannot be probed across users; one already closed is left as it is.
    pub async fn close_user_segment(
        &self,
        user: &str,
        segment_id: SegmentId,
        now: DateTime<Utc>,
    ) -> Result<Option<ClosedSegment>> {
        let row: Option<(String, bool)> = self
            .write(async |tx| {
                let closed = tx
                    .execute(sql!(
                        "UPDATE segments SET status = 'closed', close_reason = 'manual', closed_at = $3
                         WHERE id = $1 AND status = 'open' AND user_id = (SELECT id FROM users WHERE external_id = $2)",
                        segment_id,
                        user,
                        now
                    ))
                    .await?;
                let status: Option<String> = tx
                    .scalar_optional(sql!(
                        "SELECT s.status FROM segments s JOIN users u ON u.id = s.user_id WHERE s.id = $1 AND u.external_id = $2",
                        segment_id,
                        user
                    ))
                    .await?;
                Ok(status.map(|status| (status, closed > 0)))
            })
            .await?;
        Ok(row.map(|(status, closed_now)| ClosedSegment {
            id: segment_id.to_string(),
            status,
            closed_now,
        }))
    }

    /// Closes every open segment of `user` now (reason `manual`), so extraction can take them
    /// without waiting for the idle timeout.
    pub async fn close_user_segments(&self, user: &str, now: DateTime<Utc>) -> Result<u64> {
        self.write(async |tx| {
            tx.execute(sql!(
                "UPDATE segments SET status = 'closed', close_reason = 'manual', closed_at = $2
                 WHERE status = 'open' AND user_id = (SELECT id FROM users WHERE external_id = $1)",
                user,
                now
            ))
            .await
        })
        .await
    }
}
