//! Workers and the claims they hold: each process records its host, PID and boot id under the
//! worker id its claims carry, so a run can tell a claim of a process that is gone (taken over at
//! once) from one of a process that still runs (waited for, or reported).

use chrono::{DateTime, Utc};

use crate::Result;
use crate::handles::Workers;
use crate::tx::sql;

/// What identifies a running process: where it runs and which process it is there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkerIdentity {
    /// The worker id its claims carry in `claimed_by`.
    pub id: String,
    /// Its host name.
    pub host: String,
    /// Its process id on that host.
    pub pid: i64,
    /// The host's boot id (`/proc/sys/kernel/random/boot_id`), when known: a PID means nothing
    /// across reboots.
    pub boot_id: Option<String>,
}

/// Claims of one worker that have not run out, with what is known of the worker.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HeldClaims {
    /// The worker id in `claimed_by`.
    pub worker: String,
    /// The worker as it recorded itself; `None` when it never did (an older build, a test).
    pub identity: Option<WorkerIdentity>,
    /// Segments it claimed and has not planned.
    pub n_segments: i64,
    /// Immediate-lane requests it is calling.
    pub n_requests: i64,
    /// When the latest of its claims runs out.
    pub until: DateTime<Utc>,
}

#[derive(sqlx::FromRow)]
struct HeldRow {
    worker: String,
    n_segments: i64,
    n_requests: i64,
    until: DateTime<Utc>,
    host: Option<String>,
    pid: Option<i64>,
    boot_id: Option<String>,
}

impl Workers<'_> {
    /// Records this process as `identity` (once, at start; a restart with the same id replaces it).
    pub async fn register_worker(self, identity: &WorkerIdentity, now: DateTime<Utc>) -> Result<()> {
        self.write(async |tx| {
            tx.execute(sql!(
                "INSERT INTO workers (id, host, pid, boot_id, seen_at) VALUES ($1, $2, $3, $4, $5)
                 ON CONFLICT (id) DO UPDATE SET host = $2, pid = $3, boot_id = $4, seen_at = $5",
                identity.id.as_str(),
                identity.host.as_str(),
                identity.pid,
                identity.boot_id.as_deref(),
                now
            ))
            .await?;
            Ok(())
        })
        .await
    }

    /// Every other worker's claims still within their lease at `now`: segments claimed and not
    /// yet planned, and immediate calls in flight.
    pub async fn held_claims(self, own_worker: &str, now: DateTime<Utc>) -> Result<Vec<HeldClaims>> {
        let rows: Vec<HeldRow> = self
            .read_all(sql!(
                "SELECT held.worker, CAST(SUM(held.n_segments) AS BIGINT) AS n_segments,
                        CAST(SUM(held.n_requests) AS BIGINT) AS n_requests, MAX(held.until) AS until,
                        w.host, w.pid, w.boot_id
                 FROM (SELECT claimed_by AS worker, 1 AS n_segments, 0 AS n_requests, claimed_until AS until
                       FROM segments WHERE status = 'extracting' AND claimed_by IS NOT NULL AND claimed_until > $1
                       UNION ALL
                       SELECT claimed_by, 0, 1, claimed_until FROM llm_requests
                       WHERE status = 'submitted' AND batch_id IS NULL AND claimed_by IS NOT NULL AND claimed_until > $1)
                      AS held
                 LEFT JOIN workers w ON w.id = held.worker AND w.pid IS NOT NULL
                 WHERE held.worker <> $2
                 GROUP BY held.worker, w.host, w.pid, w.boot_id
                 ORDER BY held.worker",
                now,
                own_worker
            ))
            .await?;
        Ok(rows
            .into_iter()
            .map(|row| HeldClaims {
                identity: match (row.host, row.pid) {
                    (Some(host), Some(pid)) => Some(WorkerIdentity {
                        id: row.worker.clone(),
                        host,
                        pid,
                        boot_id: row.boot_id,
                    }),
                    _ => None,
                },
                worker: row.worker,
                n_segments: row.n_segments,
                n_requests: row.n_requests,
                until: row.until,
            })
            .collect())
    }

    /// Ends at `now` the leases of every claim `worker` holds (a process proven gone), so the next
    /// step takes them over; returns how many claims were released.
    pub async fn release_claims_of(self, worker: &str, now: DateTime<Utc>) -> Result<u64> {
        self.write(async |tx| {
            let segments = tx
                .execute(sql!(
                    "UPDATE segments SET claimed_until = $2
                     WHERE claimed_by = $1 AND status = 'extracting' AND claimed_until > $2",
                    worker,
                    now
                ))
                .await?;
            let requests = tx
                .execute(sql!(
                    "UPDATE llm_requests SET claimed_until = $2
                     WHERE claimed_by = $1 AND status = 'submitted' AND batch_id IS NULL AND claimed_until > $2",
                    worker,
                    now
                ))
                .await?;
            Ok(segments + requests)
        })
        .await
    }
}
