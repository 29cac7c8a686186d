//! Provider lane health as the store sees it: the last known breaker state of every lane, work
//! held back or moved while a lane is unwell, and the heartbeat that splits a quota between
//! processes.
//!
//! Holding work back never spends an attempt: a request goes back to `planned` under the same id,
//! with a not-before time in `claimed_until` (the earliest moment it may be claimed or packed), and
//! its segment's `last_error` says what it waits for.

use chrono::{DateTime, Utc};
use memsift_core::status::{Lane, Purpose};
use memsift_core::{RequestId, UserId};
use serde::Serialize;

use crate::handles::Lanes;
use crate::tx::{WriteTx, sql};
use crate::{Result, corrupt};

/// One lane's breaker as the process that last changed it saw it.
#[derive(Clone, Debug, PartialEq, Serialize, sqlx::FromRow)]
pub struct LaneHealthRow {
    /// `batch` or `immediate`.
    pub lane: String,
    /// Provider kind.
    pub provider: String,
    /// Model.
    pub model: String,
    /// Base URL.
    pub endpoint: String,
    /// `closed`, `open` or `half_open`.
    pub state: String,
    /// Opened by a setting fault: the lane waits for an operator (or a probe that succeeds).
    pub setting_fault: bool,
    /// The last failure.
    pub reason: Option<String>,
    /// The likely fix.
    pub fix: Option<String>,
    /// When this spell began.
    pub opened_at: Option<DateTime<Utc>>,
    /// When the next probe may go.
    pub next_probe_at: Option<DateTime<Utc>>,
    /// When the state last changed.
    pub changed_at: DateTime<Utc>,
    /// Which process changed it.
    pub changed_by: String,
    /// Changes so far.
    pub n_transitions: i64,
}

/// A change of one lane's breaker, to be recorded.
#[derive(Clone, Debug)]
pub struct LaneTransition<'a> {
    /// `batch` or `immediate`.
    pub lane: Lane,
    /// Provider kind.
    pub provider: &'a str,
    /// Model.
    pub model: &'a str,
    /// Base URL.
    pub endpoint: &'a str,
    /// The state now.
    pub state: &'a str,
    /// Opened by a setting fault.
    pub setting_fault: bool,
    /// The last failure (none once closed).
    pub reason: Option<&'a str>,
    /// The likely fix.
    pub fix: Option<&'a str>,
    /// When the spell began.
    pub opened_at: Option<DateTime<Utc>>,
    /// When the next probe may go.
    pub next_probe_at: Option<DateTime<Utc>>,
    /// When it changed.
    pub at: DateTime<Utc>,
}

/// A planned request waiting on a lane, as re-routing needs it.
#[derive(Clone, Debug, PartialEq)]
pub struct WaitingRequest {
    /// The request.
    pub id: RequestId,
    /// Its purpose.
    pub purpose: Purpose,
    /// Whose.
    pub user_id: UserId,
    /// The section it was planned under.
    pub config_key: String,
}

/// Where a request goes instead.
#[derive(Clone, Debug)]
pub struct Reroute<'a> {
    /// The lane.
    pub lane: Lane,
    /// The section that answers.
    pub config_key: &'a str,
    /// Its provider kind.
    pub provider: &'a str,
    /// Its model (`None` for the heuristic lane).
    pub model: Option<&'a str>,
}

impl Lanes<'_> {
    /// Records a change of one lane's breaker (upserted: one row per lane).
    pub async fn record_lane_transition(self, transition: &LaneTransition<'_>, worker: &str) -> Result<()> {
        self.write(async |tx| {
            tx.execute(sql!(
                "INSERT INTO lane_health (lane, provider, model, endpoint, state, setting_fault, reason, fix, opened_at,
                                          next_probe_at, changed_at, changed_by, n_transitions)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, 1)
                 ON CONFLICT (lane, provider, model, endpoint) DO UPDATE SET
                     state = excluded.state, setting_fault = excluded.setting_fault, reason = excluded.reason,
                     fix = excluded.fix, opened_at = excluded.opened_at, next_probe_at = excluded.next_probe_at,
                     changed_at = excluded.changed_at, changed_by = excluded.changed_by,
                     n_transitions = lane_health.n_transitions + 1",
                transition.lane.as_str(),
                transition.provider,
                transition.model,
                transition.endpoint,
                transition.state,
                transition.setting_fault,
                transition.reason,
                transition.fix,
                transition.opened_at,
                transition.next_probe_at,
                transition.at,
                worker
            ))
            .await
        })
        .await?;
        Ok(())
    }

    /// Every lane's last known breaker state, unhealthy ones first.
    pub async fn lane_health(self) -> Result<Vec<LaneHealthRow>> {
        self.read_all(sql!(
            "SELECT lane, provider, model, endpoint, state, setting_fault, reason, fix, opened_at, next_probe_at,
                        changed_at, changed_by, n_transitions
                 FROM lane_health ORDER BY state = 'closed', provider, model, endpoint, lane"
        ))
        .await
    }

    /// An immediate-lane request claimed while its lane is paused goes back to `planned` (no
    /// attempt spent), not claimable before `not_before`; its segment says what it waits for.
    pub async fn hold_request(self, request_id: RequestId, reason: &str, not_before: DateTime<Utc>) -> Result<()> {
        self.write(async |tx| {
            note_waiting_segments(tx, "id = $1 AND status = 'submitted'", request_id.to_string(), reason).await?;
            tx.execute(sql!(
                "UPDATE llm_requests SET status = 'planned', submitted_at = NULL, claimed_by = NULL, claimed_until = $2
                 WHERE id = $1 AND status = 'submitted' AND batch_id IS NULL",
                request_id,
                not_before
            ))
            .await?;
            Ok(())
        })
        .await
    }

    /// Planned requests of `lane` under any of `config_keys` not yet in a batch, oldest first.
    pub async fn waiting_requests(self, lane: Lane, config_keys: &[String], limit: i64) -> Result<Vec<WaitingRequest>> {
        let mut waiting = Vec::new();
        for config_key in config_keys {
            let room = limit - waiting.len() as i64;
            if room <= 0 {
                break;
            }
            let rows: Vec<(String, String, String)> = self
                .read_all(sql!(
                    "SELECT id, purpose, user_id FROM llm_requests
                     WHERE lane = $1 AND config_key = $2 AND status = 'planned' AND batch_id IS NULL
                     ORDER BY created_at, id LIMIT $3",
                    lane.as_str(),
                    config_key,
                    room
                ))
                .await?;
            for (id, purpose, user_id) in rows {
                let bad = |error: &dyn std::fmt::Display| corrupt("llm_requests", error);
                waiting.push(WaitingRequest {
                    id: RequestId::parse(&id).map_err(|error| bad(&error))?,
                    purpose: Purpose::parse(&purpose).map_err(|error| bad(&error))?,
                    user_id: UserId::parse(&user_id).map_err(|error| bad(&error))?,
                    config_key: config_key.clone(),
                });
            }
        }
        Ok(waiting)
    }

    /// Moves a planned request to another lane or provider of its route (same id, same payload,
    /// no attempt spent); a request claimed or packed meanwhile is left alone. Returns whether it
    /// moved.
    pub async fn reroute_request(self, request_id: RequestId, to: &Reroute<'_>) -> Result<bool> {
        let moved = self
            .write(async |tx| {
                tx.execute(sql!(
                    "UPDATE llm_requests SET lane = $2, config_key = $3, provider = $4, model = $5, claimed_until = NULL
                     WHERE id = $1 AND status = 'planned' AND batch_id IS NULL",
                    request_id,
                    to.lane.as_str(),
                    to.config_key,
                    to.provider,
                    to.model
                ))
                .await
            })
            .await?;
        Ok(moved == 1)
    }

    /// Records that this process is alive and, when `wanting`, that it is using provider quotas.
    pub async fn heartbeat(self, worker: &str, now: DateTime<Utc>, wanting: bool) -> Result<()> {
        let wanted_at = wanting.then_some(now);
        self.write(async |tx| {
            tx.execute(sql!(
                "INSERT INTO workers (id, seen_at, wanted_at) VALUES ($1, $2, $3)
                 ON CONFLICT (id) DO UPDATE SET seen_at = excluded.seen_at,
                                                wanted_at = COALESCE(excluded.wanted_at, workers.wanted_at)",
                worker,
                now,
                wanted_at
            ))
            .await
        })
        .await?;
        Ok(())
    }

    /// Processes other than `worker` that used provider quotas since `since`: the ones this
    /// process shares them with. A process that only runs (serving, idle) takes no part.
    pub async fn other_demanding_workers(self, worker: &str, since: DateTime<Utc>) -> Result<i64> {
        self.read_scalar_one(sql!(
            "SELECT COUNT(*) FROM workers WHERE wanted_at >= $1 AND id <> $2",
            since,
            worker
        ))
        .await
    }
}

/// Writes `reason` on the segments of the requests that `filter` (over `llm_requests`, with `$1`
/// bound to `value`) selects, leaving their status alone: they wait, they have not failed.
pub(crate) async fn note_waiting_segments(tx: &mut WriteTx, filter: &str, value: String, reason: &str) -> Result<u64> {
    let statement = format!(
        "UPDATE segments SET last_error = $2
         WHERE id IN (SELECT segment_id FROM llm_requests WHERE {filter} AND segment_id IS NOT NULL)
           AND status NOT IN ('extracted', 'dead')"
    );
    tx.execute(sql!(&statement, value, format!("waiting: {reason}"))).await
}
