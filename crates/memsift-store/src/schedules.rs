//! Schedule claims (invariant 11): a daemon runs a periodic job's tick only after winning a
//! compare-and-set on that job's `schedules` row.
//!
//! The cron library only says *when* a trigger fires; the row decides *who* runs it. One
//! conditional `UPDATE … RETURNING` moves `last_fired_at` forward to the tick and takes a lease in
//! the same statement, so two daemons on one PostgreSQL never run the same tick (the loser's
//! `UPDATE` re-checks the row after the winner commits and matches nothing), a run still holding
//! its lease is never overlapped by the next tick, and a tick already run is never run again.
//! This is graphile-worker's `last_execution` rule, with River's lease added against overlap.

use chrono::{DateTime, Duration, Utc};
use serde::Serialize;

use crate::Result;
use crate::handles::Schedules;
use crate::tx::sql;

/// One job's row, for listings.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, sqlx::FromRow)]
pub struct ScheduleRow {
    /// The job's name.
    pub name: String,
    /// The tick of the last run that was claimed (not when it ran: the tick it stood for).
    pub last_fired_at: Option<DateTime<Utc>>,
    /// The daemon holding the lease, while a run is in flight (or until its lease runs out, if it died).
    pub lease_owner: Option<String>,
    /// When the lease stops blocking other daemons.
    pub lease_until: Option<DateTime<Utc>>,
}

impl Schedules<'_> {
    /// Claims the run of job `name` for the tick `scheduled_at` on behalf of `owner`; returns
    /// whether this caller won and must run it.
    ///
    /// It wins only if that tick was not already claimed (`last_fired_at` is older or unset) and no
    /// other owner holds a live lease (a run in flight). Winning sets `last_fired_at` to the tick
    /// and leases the job until `now + lease`, atomically. A lease left by a daemon that died
    /// expires on its own, so nobody needs to clean it up.
    pub async fn claim_schedule(
        self,
        name: &str,
        owner: &str,
        scheduled_at: DateTime<Utc>,
        now: DateTime<Utc>,
        lease: Duration,
    ) -> Result<bool> {
        // The row must exist for the conditional UPDATE to have something to compare; creating it
        // is idempotent and races harmlessly with another daemon doing the same.
        let won: Option<String> = {
            self.write(async |tx| {
                tx.execute(sql!(
                    "INSERT INTO schedules (name) VALUES ($1) ON CONFLICT (name) DO NOTHING",
                    name
                ))
                .await
            })
            .await?;
            self.write(async |tx| {
                tx.scalar_optional(sql!(
                    "UPDATE schedules SET last_fired_at = $3, lease_owner = $2, lease_until = $5
                 WHERE name = $1
                   AND (last_fired_at IS NULL OR last_fired_at < $3)
                   AND (lease_until IS NULL OR lease_until <= $4 OR lease_owner = $2)
                 RETURNING name",
                    name,
                    owner,
                    scheduled_at,
                    now,
                    now + lease
                ))
                .await
            })
            .await?
        };
        Ok(won.is_some())
    }

    /// Releases `owner`'s lease on job `name` once its run is over (finished, failed or
    /// abandoned), so the next tick need not wait for the lease to expire. Another owner's lease
    /// is left alone; `last_fired_at` is kept, so the tick is not run again.
    pub async fn finish_schedule(self, name: &str, owner: &str) -> Result<bool> {
        let updated = self
            .write(async |tx| {
                tx.execute(sql!(
                    "UPDATE schedules SET lease_owner = NULL, lease_until = NULL WHERE name = $1 AND lease_owner = $2",
                    name,
                    owner
                ))
                .await
            })
            .await?;
        Ok(updated == 1)
    }
}
