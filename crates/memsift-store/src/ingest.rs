//! Ingest: messages into segments, one transaction per call, idempotent by message key.
//!
//! A message joins its conversation's open segment, or starts a new one when the open segment
//! went idle (the rule in `memsift_core::segment`). Membership is written on the message row and
//! never inferred later. A message whose key is already stored is skipped, so re-importing a
//! file adds nothing; a failure anywhere rolls the whole call back.

use std::collections::{BTreeSet, HashMap};

use chrono::{DateTime, Duration, Utc};
use memsift_core::message::canonical_user_id;
use memsift_core::segment::{Placement, place_message};
use memsift_core::{MessageId, SegmentId, UserId};
use serde::Serialize;

use crate::tx::{Arg, WriteTx, sql};
use crate::{Result, StoreError};

use crate::handles::Messages;
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
    /// Messages dated more than `MAX_FUTURE_SKEW` after they arrived, stored at their arrival time.
    pub n_times_clamped: u64,
    /// Messages stored with a character replaced: U+0000 (which neither database stores in text)
    /// in the content, speaker, conversation or id is stored as U+FFFD.
    pub n_text_replaced: u64,
    /// Messages refused because their id was stored before with another role or content: the
    /// stored message is kept, and the new one is not a repeat but a conflict to look at.
    pub n_conflicting_repeats: u64,
    /// The ids of those messages (conversation and id), the first [`MAX_REPORTED_IDS`].
    pub conflicting_repeat_ids: Vec<String>,
}

/// The most message ids an ingest report lists, so a file of conflicts cannot make the answer as
/// large as the file; the count is always whole.
pub const MAX_REPORTED_IDS: usize = 100;

#[derive(Clone, Copy)]
struct OpenSegment {
    id: SegmentId,
    last_at: DateTime<Utc>,
    n_messages: i64,
}

/// How far after its arrival a message may be dated. A later time is clamped to the arrival
/// time (and counted in the report): a clock that runs ahead, or a time typed as 2099, would
/// otherwise keep its segment open until then and every later message of the conversation in it.
/// Times in the past are kept as given: importing old conversations is what they are for, and an
/// old time can only make a segment close sooner.
pub const MAX_FUTURE_SKEW: Duration = Duration::days(1);

/// The time a message is stored with: its own, or its arrival time when it is dated more than
/// [`MAX_FUTURE_SKEW`] after it arrived.
pub fn stored_message_time(at: DateTime<Utc>, arrived: DateTime<Utc>) -> DateTime<Utc> {
    if at > arrived + MAX_FUTURE_SKEW { arrived } else { at }
}

/// One ingest call's transaction state: the users it holds, the conversations' open segments.
struct Ingest<'a> {
    users: HashMap<String, UserId>,
    open_segments: HashMap<(UserId, &'a str), Option<OpenSegment>>,
    idle_timeout: Duration,
    now: DateTime<Utc>,
    /// Users given a new turn: their turn version moves, so every daemon's turn indexes reload.
    added_to: Vec<UserId>,
}

impl Messages<'_> {
    /// Stores `messages` in one transaction, assigning each to a segment; `progress` is called after each.
    ///
    /// User ids are taken in their canonical form (`canonical_user_id`; one that cannot be stored
    /// faithfully refuses the call). The transaction first takes every user's row lock, in one
    /// order, so it runs either wholly before an erasure of one of them (which then erases what it
    /// stored) or wholly after (as a new user), and two ingests into one conversation number its
    /// messages one after the other.
    pub async fn ingest(
        self,
        messages: &[NewMessage],
        idle_timeout: Duration,
        now: DateTime<Utc>,
        progress: &(dyn Fn(u64) + Sync),
    ) -> Result<IngestReport> {
        let mut report = IngestReport {
            n_offered: messages.len() as u64,
            ..IngestReport::default()
        };
        let mut canonical = Vec::with_capacity(messages.len());
        for message in messages {
            let user = canonical_user_id(&message.user_external_id).map_err(|error| {
                StoreError::Invalid(format!("user `{}`: {error}", message.user_external_id.escape_debug()))
            })?;
            canonical.push(user);
        }
        let distinct: BTreeSet<&String> = canonical.iter().collect();
        self.write(async |tx| {
            let mut state = Ingest {
                users: HashMap::new(),
                open_segments: HashMap::new(),
                idle_timeout,
                now,
                added_to: Vec::new(),
            };
            for user in distinct {
                let (user_id, created) = tx.lock_or_create_user(user, now).await?;
                report.n_users_created += u64::from(created);
                state.users.insert(user.clone(), user_id);
            }
            for (message_idx, (message, user)) in messages.iter().zip(&canonical).enumerate() {
                let user_id = state.users[user];
                tx.ingest_message(&mut state, user_id, message, &mut report).await?;
                progress(message_idx as u64 + 1);
            }
            for user_id in std::mem::take(&mut state.added_to) {
                tx.execute(sql!(
                    "UPDATE users SET turn_version = turn_version + 1 WHERE id = $1",
                    user_id
                ))
                .await?;
            }
            Ok(())
        })
        .await?;
        Ok(report)
    }
    /// Closes every open segment whose last message is dated, or arrived, at least
    /// `idle_timeout` before `now`: arrival time closes a conversation whose messages are dated
    /// ahead of the clock (stored before times were clamped, or within the allowed skew).
    pub async fn close_idle_segments(self, now: DateTime<Utc>, idle_timeout: Duration) -> Result<u64> {
        let cutoff = now - idle_timeout;
        let closed = self
            .write(async |tx| {
                tx.execute(sql!(
                    "UPDATE segments SET status = 'closed', close_reason = 'idle', closed_at = $2
                 WHERE status = 'open' AND (last_message_at <= $1 OR COALESCE(last_arrived_at, created_at) <= $1)",
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

impl Messages<'_> {
    /// Closes one open segment of `user` now (reason `manual`). A segment of another user is
    /// reported as absent, so ids cannot be probed across users; one already closed is left as it is.
    pub async fn close_user_segment(
        self,
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
    pub async fn close_user_segments(self, user: &str, now: DateTime<Utc>) -> Result<u64> {
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

impl WriteTx {
    /// Stores one message of an ingest call (its user's lock already held), or skips it when its
    /// key is stored.
    async fn ingest_message<'a>(
        &mut self,
        state: &mut Ingest<'a>,
        user_id: UserId,
        message: &'a NewMessage,
        report: &mut IngestReport,
    ) -> Result<()> {
        // The key is made from the message as sent, so a re-import is recognised whenever it comes.
        let dedupe_key = message.dedupe_key();
        let already: Option<(String, String)> = self
            .fetch_optional(sql!(
                "SELECT role, content FROM messages WHERE user_id = $1 AND dedupe_key = $2",
                user_id,
                &dedupe_key
            ))
            .await?;
        if let Some((role, content)) = already {
            // Only a message with an id can differ from its stored copy: without one, the key is
            // made from the content and role.
            if role == message.role.as_str() && content == crate::tx::storable_text(&message.content) {
                report.n_already_stored += 1;
            } else {
                report.n_conflicting_repeats += 1;
                if report.conflicting_repeat_ids.len() < MAX_REPORTED_IDS {
                    report.conflicting_repeat_ids.push(format!(
                        "{}/{}",
                        message.conversation_key,
                        message.external_id.as_deref().unwrap_or_default()
                    ));
                }
            }
            return Ok(());
        }
        let replaced = [
            Some(&message.content),
            message.speaker.as_ref(),
            Some(&message.conversation_key),
            message.external_id.as_ref(),
        ]
        .into_iter()
        .flatten()
        .any(|text| text.contains('\0'));
        report.n_text_replaced += u64::from(replaced);
        let at = stored_message_time(message.at, state.now);
        if at != message.at {
            report.n_times_clamped += 1;
        }
        let conversation_slot = (user_id, message.conversation_key.as_str());
        let open = match state.open_segments.get(&conversation_slot) {
            Some(known) => *known,
            None => {
                let open = self.open_segment(user_id, &message.conversation_key).await?;
                state.open_segments.insert(conversation_slot, open);
                open
            }
        };
        let mut segment = self.segment_for(state, user_id, message, at, open, report).await?;
        let referenced: Vec<String> = message.referenced_memory_ids.iter().map(ToString::to_string).collect();
        self.execute(sql!(
            // Stamped with the turn version this transaction ends at (it moves the version once per
            // user, after its messages), so a search's cached turn index reads it as new.
            "INSERT INTO messages (id, user_id, segment_id, seq, role, speaker, content, created_at, external_id, dedupe_key,
                                   referenced_memory_ids, turn_stamp)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11,
                     (SELECT turn_version + 1 FROM users WHERE id = $2))",
            MessageId::new_v7(),
            user_id,
            segment.id,
            segment.n_messages,
            message.role.as_str(),
            &message.speaker,
            &message.content,
            at,
            &message.external_id,
            &dedupe_key,
            Arg::json(&referenced)
        ))
        .await?;
        report.n_added += 1;
        if !state.added_to.contains(&user_id) {
            state.added_to.push(user_id);
        }
        segment.n_messages += 1;
        segment.last_at = segment.last_at.max(at);
        self.execute(sql!(
            "UPDATE segments SET last_message_at = $2, n_messages = $3, last_arrived_at = $5,
                                 status = CASE WHEN $6 THEN 'closed' ELSE status END,
                                 close_reason = CASE WHEN $6 THEN 'boundary' ELSE close_reason END,
                                 closed_at = CASE WHEN $6 THEN $2 ELSE closed_at END,
                                 first_message_at = CASE WHEN first_message_at > $4 THEN $4 ELSE first_message_at END
             WHERE id = $1",
            segment.id,
            segment.last_at,
            segment.n_messages,
            at,
            state.now,
            message.boundary_after
        ))
        .await?;
        if message.boundary_after {
            report.n_segments_closed += 1;
            state.open_segments.insert(conversation_slot, None);
        } else {
            state.open_segments.insert(conversation_slot, Some(segment));
        }
        Ok(())
    }

    /// The conversation's open segment, as stored.
    async fn open_segment(&mut self, user_id: UserId, conversation_key: &str) -> Result<Option<OpenSegment>> {
        let row: Option<(String, DateTime<Utc>, i64)> = self
            .fetch_optional(sql!(
                "SELECT id, last_message_at, n_messages FROM segments
                 WHERE user_id = $1 AND conversation_key = $2 AND status = 'open'",
                user_id,
                conversation_key
            ))
            .await?;
        row.map(|(id_text, last_at, n_messages)| {
            Ok(OpenSegment {
                id: SegmentId::parse(&id_text).map_err(|error| crate::corrupt("segments", error))?,
                last_at,
                n_messages,
            })
        })
        .transpose()
    }

    /// The segment a message at `at` joins: the open one, or a new one (closing the open one
    /// when the gap is the idle timeout or more).
    async fn segment_for(
        &mut self,
        state: &Ingest<'_>,
        user_id: UserId,
        message: &NewMessage,
        at: DateTime<Utc>,
        open: Option<OpenSegment>,
        report: &mut IngestReport,
    ) -> Result<OpenSegment> {
        let placement = place_message(open.map(|segment| segment.last_at), at, state.idle_timeout);
        if let (Placement::CloseAndStart, Some(idle_segment)) = (placement, open) {
            self.execute(sql!(
                "UPDATE segments SET status = 'closed', close_reason = 'idle', closed_at = $2 WHERE id = $1",
                idle_segment.id,
                idle_segment.last_at + state.idle_timeout
            ))
            .await?;
            report.n_segments_closed += 1;
        }
        if let (Placement::Join, Some(open)) = (placement, open) {
            return Ok(open);
        }
        let segment_id = SegmentId::new_v7();
        self.execute(sql!(
            "INSERT INTO segments (id, user_id, conversation_key, external_id, status,
                                   first_message_at, last_message_at, n_messages, created_at, last_arrived_at)
             VALUES ($1, $2, $3, $4, 'open', $5, $5, 0, $6, $6)",
            segment_id,
            user_id,
            &message.conversation_key,
            &message.segment_name,
            at,
            state.now
        ))
        .await?;
        report.n_segments_started += 1;
        Ok(OpenSegment {
            id: segment_id,
            last_at: at,
            n_messages: 0,
        })
    }
}
