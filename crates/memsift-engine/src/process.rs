//! Who this process is, as the holder of its claims: worker id, host, PID and boot id, and
//! whether another holder is known to be gone. At the bottom of the engine, so the app (which
//! records itself) and the pipeline (which takes over a gone holder's claims) both read it.

use memsift_store::WorkerIdentity;

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
