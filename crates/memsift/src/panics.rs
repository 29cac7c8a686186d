//! Panics nothing handled, counted so the process can exit non-zero, and a closed stdout ended quietly.
//!
//! A panic is a bug. One that [`catch_panic`] catches (a job, an API worker job)
//! is recorded there and the process goes on; any other (a spawned task's, a blocking thread's,
//! one inside tokio during shutdown) used to vanish with its task and let the process exit 0.
//! The hook counts those, and `main` exits 1 when the count is not zero.

use std::cell::Cell;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Once;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};

use futures_util::FutureExt;

static UNHANDLED: AtomicU64 = AtomicU64::new(0);
static INSTALL: Once = Once::new();

thread_local! {
    /// How many [`Handled`] polls are running on this thread: a panic raised inside one is caught.
    static HANDLING: Cell<u32> = const { Cell::new(0) };
}

/// Installs the process's panic hook (once; later calls do nothing). It counts every panic raised
/// outside a [`Handled`] future and then reports it as before, except a write to a closed stdout
/// (`memsift segments | head -1`), which ends the process quietly with exit 0: the reader has
/// what it wanted.
pub fn install_hook() {
    INSTALL.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if is_closed_stdout(info) {
                std::process::exit(0);
            }
            if HANDLING.with(Cell::get) == 0 {
                UNHANDLED.fetch_add(1, Ordering::SeqCst);
            }
            previous(info);
        }));
    });
}

/// Panics raised outside a [`Handled`] future since the hook was installed.
pub fn unhandled() -> u64 {
    UNHANDLED.load(Ordering::SeqCst)
}

/// `println!`'s panic when stdout's reader has gone (EPIPE: Rust ignores SIGPIPE).
fn is_closed_stdout(info: &std::panic::PanicHookInfo<'_>) -> bool {
    let message = info
        .payload()
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| info.payload().downcast_ref::<&str>().copied())
        .unwrap_or_default();
    message.starts_with("failed printing to stdout") && message.contains("Broken pipe")
}

/// A future whose panics its caller catches and handles, so the hook does not count them.
pub(crate) struct Handled<F>(pub(crate) Pin<Box<F>>);

impl<F: Future> Future for Handled<F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let _handling = HandlingGuard::enter();
        self.0.as_mut().poll(cx)
    }
}

/// Marks this thread as inside a [`Handled`] poll until dropped (on return or while unwinding,
/// which runs after the hook).
struct HandlingGuard;

impl HandlingGuard {
    fn enter() -> HandlingGuard {
        HANDLING.with(|depth| depth.set(depth.get() + 1));
        HandlingGuard
    }
}

impl Drop for HandlingGuard {
    fn drop(&mut self) {
        HANDLING.with(|depth| depth.set(depth.get() - 1));
    }
}

/// Runs `job` to its end, or returns the message of the panic that stopped it. A panic is a bug in
/// one job; the daemon and the API worker record it and go on with the next job, which is safe
/// because every step leaves the store in a committed state.
///
/// A panic caught here is not counted as unhandled; one anywhere else is.
pub async fn catch_panic<T>(job: impl Future<Output = T>) -> Result<T, String> {
    AssertUnwindSafe(Handled(Box::pin(job)))
        .catch_unwind()
        .await
        .map_err(|panic| panic_message(panic.as_ref()))
}

fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    if let Some(text) = panic.downcast_ref::<&str>() {
        (*text).to_owned()
    } else if let Some(text) = panic.downcast_ref::<String>() {
        text.clone()
    } else {
        "a non-text panic payload".to_owned()
    }
}

#[cfg(test)]
mod catch_tests {
    use super::*;

    #[tokio::test]
    async fn a_panic_catch_panic_handles_is_not_counted_and_a_spawned_tasks_is() {
        install_hook();
        let before = unhandled();
        let caught = catch_panic(async { panic!("a bug in a job") }).await;
        assert_eq!(caught.unwrap_err(), "a bug in a job");
        assert_eq!(unhandled(), before, "a caught panic is handled");
        let joined = tokio::spawn(async { panic!("a bug in a spawned task") }).await;
        assert!(joined.unwrap_err().is_panic());
        assert_eq!(unhandled(), before + 1, "a spawned task's panic is not");
    }
}
