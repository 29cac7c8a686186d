//! Writing a segment's plan: its extraction requests and chunk count, with the segment's claim
//! released, fenced so that a worker whose claim lapsed and was taken over writes nothing.

use chrono::{DateTime, Utc};
use memsift_core::SegmentId;

use crate::Result;
use crate::handles::Requests;
use crate::requests::NewRequest;
use crate::tx::sql;

impl Requests<'_> {
    /// Records the requests planned for a segment's extraction and how many chunks it has, and
    /// releases the segment's claim: from here the requests carry the work, so a slow batch can
    /// never look like a dead worker. Each chunk's attempt number continues from its last one.
    /// Whoever holds the claim is not checked: for a caller that knows it does (fixtures, tests);
    /// the pipeline uses [`Requests::plan_claimed_segment`].
    pub async fn plan_segment_requests(
        self,
        segment_id: SegmentId,
        requests: &[NewRequest],
        now: DateTime<Utc>,
    ) -> Result<()> {
        self.write_plan(segment_id, None, requests, None, now).await.map(|_| ())
    }

    /// [`Requests::plan_segment_requests`] for a segment `claimed_by` claimed, recording `note` on
    /// the segment (`plan_note`: what planning did to make its turns fit, for an admin to see;
    /// `None` clears an older note). Returns `false`, writing nothing, when the claim is no
    /// longer `claimed_by`'s: a worker that stalled past its lease finds the segment taken over
    /// (and perhaps planned) by another, and a second plan would extract it twice.
    pub async fn plan_claimed_segment(
        self,
        segment_id: SegmentId,
        claimed_by: &str,
        requests: &[NewRequest],
        note: Option<&str>,
        now: DateTime<Utc>,
    ) -> Result<bool> {
        self.write_plan(segment_id, Some(claimed_by), requests, note, now).await
    }

    async fn write_plan(
        self,
        segment_id: SegmentId,
        claimed_by: Option<&str>,
        requests: &[NewRequest],
        note: Option<&str>,
        now: DateTime<Utc>,
    ) -> Result<bool> {
        self.write(async |tx| {
            // The user's lock first, as every write of a user's data (see `users.rs`); an erased
            // user's segment is gone, so nothing is planned.
            if let Some(first) = requests.first()
                && !tx.lock_live_user(first.user_id).await?
            {
                return Ok(false);
            }
            let n_released = tx
                .execute(sql!(
                    "UPDATE segments SET planned_chunks = $2, plan_note = $3, claimed_by = NULL, claimed_until = NULL
                     WHERE id = $1 AND ($4 IS NULL OR (claimed_by = $4 AND status = 'extracting'))",
                    segment_id,
                    requests.len(),
                    note,
                    claimed_by
                ))
                .await?;
            if n_released == 0 {
                return Ok(false);
            }
            // Every chunk is the segment's, so its user's, whose lock is held.
            for request in requests {
                tx.insert_request_of_locked_user(request, now).await?;
            }
            Ok(true)
        })
        .await
    }
}
