//! The segment summary stage's write: one live summary per segment, older ones kept superseded.

use chrono::{DateTime, Utc};
use memsift_core::{OperationId, RequestId, SegmentId, UserId};

use super::{StageApplied, StageOutcome};
use crate::Result;
use crate::handles::Stages;
use crate::tx::sql;

impl Stages<'_> {
    /// Applies a segment summary: the same text as the live one changes nothing; a changed text
    /// supersedes the live one (kept, with `superseded_at`).
    pub async fn apply_summary(
        self,
        request_id: RequestId,
        user_id: UserId,
        segment_id: SegmentId,
        text: &str,
        now: DateTime<Utc>,
    ) -> Result<StageOutcome> {
        self.write(async |tx| {
            let live: Option<(String, String)> = tx
                .fetch_optional(sql!(
                    "SELECT id, text FROM segment_summaries WHERE segment_id = $1 AND superseded_at IS NULL",
                    segment_id
                ))
                .await?;
            let unchanged = live.as_ref().is_some_and(|(_, live)| live == text);
            let note = unchanged.then_some("the live summary already says this");
            if !tx.claim_answer(request_id, usize::from(!unchanged), note, now).await? {
                tx.unclaimed(request_id).await?;
                return Ok(StageOutcome::AlreadyApplied);
            }
            if !unchanged {
                if let Some((live_id, _)) = &live {
                    tx.execute(sql!(
                        "UPDATE segment_summaries SET superseded_at = $2 WHERE id = $1",
                        live_id,
                        now
                    ))
                    .await?;
                }
                // Summary ids are UUIDv7s like every other id; the operation id type makes them.
                tx.execute(sql!(
                    "INSERT INTO segment_summaries (id, segment_id, user_id, text, request_id, created_at)
                     VALUES ($1, $2, $3, $4, $5, $6)",
                    OperationId::new_v7(),
                    segment_id,
                    user_id,
                    text,
                    request_id,
                    now
                ))
                .await?;
            }
            Ok(StageOutcome::Applied(StageApplied {
                note: note.map(str::to_owned),
                ..StageApplied::default()
            }))
        })
        .await
    }
}
