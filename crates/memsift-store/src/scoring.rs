//! Daily importance scoring, and archiving (never deleting) the memories that fall under the
//! floor, capped per run and journaled so `memsift undo` brings any of them back.
//!
//! importance = 0.35·access + 0.25·links + 0.25·recency + 0.15·event, each part in [0, 1]:
//! - access  = r / (r + 1), r = reads per 30 days since the memory was written;
//! - links   = n / (n + 3), n = links to or from the memory;
//! - recency = exp(−d / 90), d = days since it was last read (or written);
//! - event   = exp(−|t| / 14), t = days between now and its `happens_at` (0 without one).
//!
//! A memory is archived only when its importance is under the floor, it is older than the grace
//! period, the user has not confirmed it (confidence 1), and the run's cap is not reached.

use chrono::{DateTime, Utc};
use memsift_core::OperationId;
use serde::Serialize;

use crate::Result;
use crate::handles::Memories;
use crate::revisions::MemoryState;
use crate::tx::{Arg, sql};

/// When memories are archived for low importance.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ScoringPolicy {
    /// Importance below which a memory may be archived.
    pub floor: f64,
    /// Younger memories are never archived (they have had no chance to be read).
    pub min_age_days: i64,
    /// At most this share of a user's active memories is archived in one run.
    pub max_share_per_run: f64,
}

/// What one scoring run did.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ScoringReport {
    /// Users scored.
    pub n_users: u64,
    /// Active memories whose importance was recalculated.
    pub n_scored: u64,
    /// Memories archived under the floor (each with its journal row).
    pub n_archived: u64,
    /// Memories under the floor left active because the per-user cap was reached.
    pub n_spared_by_cap: u64,
}

/// The inputs of one memory's score.
#[derive(sqlx::FromRow)]
struct ScoreRow {
    id: String,
    user_id: String,
    confidence: f64,
    access_count: i64,
    n_links: i64,
    happens_at: Option<DateTime<Utc>>,
    last_accessed_at: Option<DateTime<Utc>>,
    created_at: DateTime<Utc>,
}

/// The documented formula (module docs), from a memory's inputs at `now`.
pub fn importance(
    access_count: i64,
    n_links: i64,
    created_at: DateTime<Utc>,
    last_accessed_at: Option<DateTime<Utc>>,
    happens_at: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
) -> f64 {
    let days = |from: DateTime<Utc>, to: DateTime<Utc>| (to - from).num_seconds() as f64 / 86_400.0;
    let age_days = days(created_at, now).max(1.0);
    let reads_per_30_days = access_count.max(0) as f64 / age_days * 30.0;
    let access = reads_per_30_days / (reads_per_30_days + 1.0);
    let links = n_links.max(0) as f64 / (n_links.max(0) as f64 + 3.0);
    let last_touch = last_accessed_at.map_or(created_at, |read| read.max(created_at));
    let recency = (-days(last_touch, now).max(0.0) / 90.0).exp();
    let event = happens_at.map_or(0.0, |at| (-days(at, now).abs() / 14.0).exp());
    0.35 * access + 0.25 * links + 0.25 * recency + 0.15 * event
}

impl Memories<'_> {
    /// Recalculates every active memory's importance and archives, per user and capped, the
    /// oldest-enough unconfirmed ones under the floor, lowest first, journaling each archive.
    pub async fn score_memories(self, policy: &ScoringPolicy, now: DateTime<Utc>) -> Result<ScoringReport> {
        let rows: Vec<ScoreRow> = self
            .read_all(sql!(
                "SELECT m.id, m.user_id, m.confidence, m.access_count, m.happens_at, m.last_accessed_at, m.created_at,
                        (SELECT COUNT(*) FROM memory_links l WHERE l.source_id = m.id OR l.target_id = m.id) AS n_links
                 FROM memories m WHERE m.archived_at IS NULL ORDER BY m.user_id, m.id"
            ))
            .await?;
        let mut report = ScoringReport::default();
        let mut start = 0;
        while start < rows.len() {
            let end = rows[start..]
                .iter()
                .position(|row| row.user_id != rows[start].user_id)
                .map_or(rows.len(), |offset| start + offset);
            let user_rows = &rows[start..end];
            start = end;
            report.n_users += 1;
            let scored: Vec<(&ScoreRow, f64)> = user_rows
                .iter()
                .map(|row| {
                    let score = importance(
                        row.access_count,
                        row.n_links,
                        row.created_at,
                        row.last_accessed_at,
                        row.happens_at,
                        now,
                    );
                    (row, score)
                })
                .collect();
            let cap = crate::share_cap(policy.max_share_per_run, user_rows.len());
            let mut under: Vec<&(&ScoreRow, f64)> = scored
                .iter()
                .filter(|(row, score)| {
                    *score < policy.floor
                        && row.confidence < 1.0
                        && (now - row.created_at).num_days() >= policy.min_age_days
                })
                .collect();
            under.sort_by(|a, b| a.1.total_cmp(&b.1).then_with(|| a.0.id.cmp(&b.0.id)));
            report.n_spared_by_cap += under.len().saturating_sub(cap) as u64;
            let to_archive: Vec<(String, f64)> = under
                .iter()
                .take(cap)
                .map(|(row, score)| (row.id.clone(), *score))
                .collect();
            report.n_archived += to_archive.len() as u64;
            report.n_scored += scored.len() as u64;
            self.write_scores(&scored, &to_archive, now).await?;
        }
        Ok(report)
    }

    async fn write_scores(
        self,
        scored: &[(&ScoreRow, f64)],
        archive: &[(String, f64)],
        now: DateTime<Utc>,
    ) -> Result<()> {
        self.write(async |tx| {
            if let Some((row, _)) = scored.first() {
                tx.lock_user(&row.user_id, false).await?;
            }
            for (row, score) in scored {
                tx.execute(sql!(
                    "UPDATE memories SET importance = $2 WHERE id = $1",
                    &row.id,
                    score
                ))
                .await?;
            }
            for (memory_id, score) in archive {
                const STATE: &str =
                    "SELECT confidence, expires_at, archived_at, archive_reason, superseded_by, updated_at
                                     FROM memories WHERE id = $1";
                let before: MemoryState = tx.fetch_one(sql!(STATE, memory_id)).await?;
                let reason = format!("importance {score:.3} under the floor");
                tx.execute(sql!(
                    "UPDATE memories SET archived_at = $2, archive_reason = $3, updated_at = $2 WHERE id = $1",
                    memory_id,
                    now,
                    format!("low importance: {reason}")
                ))
                .await?;
                let after: MemoryState = tx.fetch_one(sql!(STATE, memory_id)).await?;
                tx.execute(sql!(
                    "INSERT INTO operations (id, kind, user_id, reason, before, after, applied_at)
                     SELECT $1, 'score_archive', user_id, $2, $3, $4, $5 FROM memories WHERE id = $6",
                    OperationId::new_v7(),
                    &reason,
                    Arg::json(&serde_json::json!({ "memory_id": memory_id, "state": before })),
                    Arg::json(&serde_json::json!({ "memory_id": memory_id, "state": after })),
                    now,
                    memory_id
                ))
                .await?;
                tx.execute(sql!(
                    "UPDATE users SET memory_version = memory_version + 1
                     WHERE id = (SELECT user_id FROM memories WHERE id = $1)",
                    memory_id
                ))
                .await?;
            }
            Ok(())
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use chrono::Duration;

    use super::*;

    fn now() -> DateTime<Utc> {
        DateTime::parse_from_rfc3339("2026-06-01T00:00:00Z")
            .unwrap()
            .with_timezone(&Utc)
    }

    #[test]
    fn each_part_of_the_formula_moves_the_score_the_documented_way() {
        let old = now() - Duration::days(200);
        let untouched = importance(0, 0, old, None, None, now());
        // Nothing read, linked or upcoming for 200 days: only a little recency is left.
        assert!(untouched < 0.05, "{untouched}");
        assert!(importance(20, 0, old, Some(now()), None, now()) > 0.4);
        assert!(importance(0, 6, old, None, None, now()) > untouched + 0.15);
        assert!(importance(0, 0, old, None, Some(now() + Duration::days(2)), now()) > untouched + 0.12);
        // A memory written today scores on recency alone.
        let fresh = importance(0, 0, now(), None, None, now());
        assert!((fresh - 0.25).abs() < 1e-9, "{fresh}");
        // Every score lies in [0, 1].
        let best = importance(1000, 1000, old, Some(now()), Some(now()), now());
        assert!(best <= 1.0 && best > 0.95, "{best}");
    }
}
