//! Claims other processes hold when a run has nothing left to move: a claim of a process on this
//! host that is gone (its PID no longer runs in this boot) is taken over at once; any other stops
//! `run --until-idle` with one line naming the holder, since "idle" would be untrue (after a
//! `kill -9`, a new run once exited 0 with the killed run's segments `extracting` for 900 s).

use chrono::{DateTime, Utc};
use memsift_store::{HeldClaims, WorkerIdentity};

use crate::app::App;

/// What a run does about other workers' claims.
pub(super) enum Held {
    /// Nobody else holds anything.
    Nothing,
    /// Claims of gone processes were released; the next step takes them over.
    Released,
}

/// This process as its claims' holder: the worker id, this host, its PID and boot id.
pub fn this_process(worker_id: &str) -> WorkerIdentity {
    WorkerIdentity {
        id: worker_id.to_owned(),
        host: host_name(),
        pid: i64::from(std::process::id()),
        boot_id: boot_id(),
    }
}

/// The host name as the kernel has it (`HOSTNAME` is a shell variable, often not exported).
pub fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|name| name.trim().to_owned())
        .filter(|name| !name.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "localhost".to_owned())
}

/// This boot's id: a PID names a process only within one boot of one host.
fn boot_id() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .ok()
        .map(|id| id.trim().to_owned())
        .filter(|id| !id.is_empty())
}

/// Whether a holder is known gone: it recorded this host's boot id and its PID runs no more.
/// Another process of this boot (or this one, under another worker id) that runs, another
/// host, or a holder that never recorded itself, is not known gone.
pub fn is_gone(holder: Option<&WorkerIdentity>, me: &WorkerIdentity) -> bool {
    let Some(holder) = holder else {
        return false;
    };
    let same_boot = holder.boot_id.is_some() && holder.boot_id == me.boot_id;
    same_boot && holder.pid != me.pid && !std::path::Path::new(&format!("/proc/{}", holder.pid)).exists()
}

/// Releases the claims of gone holders; errs naming the first holder that still runs (or may).
pub(super) async fn settle(app: &App, now: DateTime<Utc>) -> anyhow::Result<Held> {
    let me = this_process(&app.worker_id);
    let held = app.store.held_claims(&app.worker_id, now).await?;
    let mut released = 0;
    let mut waiting: Vec<&HeldClaims> = Vec::new();
    for claims in &held {
        if is_gone(claims.identity.as_ref(), &me) {
            let n = app.store.release_claims_of(&claims.worker, now).await?;
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
