//! Relationship classification's write: links between memories, and the supersedes that come with
//! confident `supersedes` / `invalidated_by` links (the end the kind names is archived).

use chrono::{DateTime, Utc};
use memsift_core::{RequestId, UserId};
use serde_json::json;

use super::{LinkEnd, NewLink, RunCap, StageApplied, StageOutcome};
use crate::Result;
use crate::handles::Stages;
use crate::journal::{JournalEntry, LinkRow, OrderedF64, RowsAfter, RowsBefore, STATE_SELECT, StageMemoryState};
use crate::tx::sql;

impl Stages<'_> {
    /// Writes the links of one relationship answer, and archives the end each link names as
    /// superseded (`NewLink::superseded`) within the run's cap; journaled as `link`.
    pub async fn apply_links(
        self,
        request_id: RequestId,
        user_id: UserId,
        links: &[NewLink],
        cap: &RunCap,
        now: DateTime<Utc>,
    ) -> Result<StageOutcome> {
        self.write(async |tx| {
            if !tx.claim_answer(request_id, links.len(), None, now).await? {
                tx.unclaimed(request_id).await?;
                return Ok(StageOutcome::AlreadyApplied);
            }
            let mut used = tx.run_changes(&cap.run).await?;
            let mut applied = StageApplied::default();
            let mut before = RowsBefore::default();
            let mut after = RowsAfter::default();
            let mut notes = Vec::new();
            for link in links {
                // Both ends must be this user's and still active (an answer can arrive late).
                type End = (String, Option<DateTime<Utc>>);
                let mut ends = Vec::with_capacity(2);
                for id in [link.source, link.target] {
                    let end: Option<End> = tx
                        .fetch_optional(sql!(
                            "SELECT id, archived_at FROM memories WHERE id = $1 AND user_id = $2",
                            id,
                            user_id
                        ))
                        .await?;
                    ends.extend(end.filter(|(_, archived)| archived.is_none()));
                }
                if ends.len() != 2 || link.source == link.target {
                    notes.push(format!(
                        "{} → {}: a memory is gone or archived",
                        link.source, link.target
                    ));
                    continue;
                }
                let row = LinkRow {
                    source_id: link.source.to_string(),
                    target_id: link.target.to_string(),
                    kind: link.kind.clone(),
                    confidence: OrderedF64(link.confidence),
                    reasoning: link.reasoning.clone(),
                    origin_request_id: Some(request_id.to_string()),
                    created_at: now,
                };
                if tx.insert_link(&row, false).await? {
                    applied.n_links += 1;
                    after.created_links.push(row);
                }
                // The link's kind says which end is no longer current; that one is archived and
                // points at the other, whichever is older.
                let (stale, current) = match link.superseded {
                    None => continue,
                    Some(LinkEnd::Target) => (&ends[1].0, &ends[0].0),
                    Some(LinkEnd::Source) => (&ends[0].0, &ends[1].0),
                };
                if used + 1 > cap.cap {
                    notes.push(format!(
                        "{stale} not superseded: the run's cap of {} is reached",
                        cap.cap
                    ));
                    continue;
                }
                let state: Option<StageMemoryState> = tx.fetch_optional(sql!(STATE_SELECT, stale)).await?;
                let Some(state) = state.filter(|state| state.archived_at.is_none()) else {
                    continue;
                };
                before.memories.push(state);
                tx.execute(sql!(
                    "UPDATE memories SET archived_at = $2, archive_reason = $3, superseded_by = $4, updated_at = $2
                     WHERE id = $1",
                    stale,
                    now,
                    format!("superseded ({}): {}", link.kind, link.reasoning),
                    current
                ))
                .await?;
                used += 1;
                after.n_changed += 1;
                applied.n_memories_archived += 1;
            }
            if !notes.is_empty() {
                applied.note = Some(notes.join("; "));
            }
            if applied.n_links > 0 || applied.n_memories_archived > 0 {
                after.detail = json!({ "notes": notes });
                let entry = JournalEntry {
                    kind: "link",
                    user_id,
                    request_id: Some(request_id),
                    reason: "relationship classification",
                    now,
                };
                applied.operation_id = Some(tx.journal(entry, &before, &after).await?);
            }
            Ok(StageOutcome::Applied(applied))
        })
        .await
    }
}
