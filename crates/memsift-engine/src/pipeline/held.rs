//! Claims other processes hold when a run has nothing left to move: a claim of a process on this
//! host that is gone (its PID no longer runs in this boot) is taken over at once; any other stops
//! `run --until-idle` with one line naming the holder, since "idle" would be untrue (after a
//! `kill -9`, a new run once exited 0 with the killed run's segments `extracting` for 900 s).

use chrono::{DateTime, Utc};
use memsift_store::{HeldClaims, WorkerIdentity};

use crate::app::App;
use crate::process::{is_gone, this_process};

/// What a run does about other workers' claims.
pub(super) enum Held {
    /// Nobody else holds anything.
    Nothing,
    /// Claims of gone processes were released; the next step takes them over.
    Released,
}

/// Releases the claims of gone holders; errs naming the first holder that still runs (or may).
pub(super) async fn settle(app: &App, now: DateTime<Utc>) -> anyhow::Result<Held> {
    let me = this_process(&app.worker_id);
    let held = app.store.workers().held_claims(&app.worker_id, now).await?;
    let mut released = 0;
    let mut waiting: Vec<&HeldClaims> = Vec::new();
    for claims in &held {
        if is_gone(claims.identity.as_ref(), &me) {
            let n = app.store.workers().release_claims_of(&claims.worker, now).await?;
            tracing::warn!(
                worker = %claims.worker,
                pid = claims.identity.as_ref().map(|identity| identity.pid),
                n_claims = n,
                "Took over the claims of a process that is gone."
            );
            released += n;
        } else {
            waiting.push(claims);
        }
    }
    if released > 0 {
        return Ok(Held::Released);
    }
    match waiting.first() {
        None => Ok(Held::Nothing),
        Some(claims) => anyhow::bail!("{}", describe(claims, waiting.len(), &me)),
    }
}

/// One line: who holds what until when, and what to do.
fn describe(claims: &HeldClaims, n_holders: usize, me: &WorkerIdentity) -> String {
    let who = match &claims.identity {
        Some(identity) if identity.host == me.host && identity.boot_id == me.boot_id => {
            format!("worker {} (pid {} on this host, running)", claims.worker, identity.pid)
        }
        Some(identity) => format!("worker {} (pid {} on {})", claims.worker, identity.pid, identity.host),
        None => format!("worker {} (not recorded)", claims.worker),
    };
    let others = if n_holders > 1 {
        format!(" and {} other workers", n_holders - 1)
    } else {
        String::new()
    };
    format!(
        "not idle: {who}{others} holds {} segments and {} requests until {}; wait for it to finish, or stop it and run again (a stopped process's claims on this host are taken over at once)",
        claims.n_segments,
        claims.n_requests,
        claims.until.format("%Y-%m-%d %H:%M:%S UTC")
    )
}
