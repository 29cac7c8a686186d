//! The `memsift` binary: parse arguments, install logging, run the command, report errors once.

use std::io::IsTerminal;
use std::process::ExitCode;

use clap::Parser;

/// Every heap block is zeroed when it is freed, so the texts a process handled (request bodies,
/// answers, rows) do not stay readable in freed memory after the user is erased; measured in
/// BENCHMARKS.md.
#[global_allocator]
static ALLOCATOR: zeroizing_alloc::ZeroAlloc<std::alloc::System> = zeroizing_alloc::ZeroAlloc(std::alloc::System);

/// How long the runtime's shutdown waits for blocking threads (a provider call, chunking) before
/// the process exits without them.
const SHUTDOWN_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

fn main() -> ExitCode {
    // First, so that even `--help` piped into `head` ends quietly.
    memsift::panics::install_hook();
    let cli = memsift::cli::Cli::parse();
    let logs = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("MEMSIFT_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        // Colour codes only where a person reads them, not in a file or a pipe.
        .with_ansi(std::io::stderr().is_terminal());
    // Under systemd (which sets JOURNAL_STREAM for a unit's stderr, INVOCATION_ID for any unit)
    // logs are one JSON object a line, for the journal and whatever ships it; on a terminal, text.
    if std::env::var_os("JOURNAL_STREAM").is_some() || std::env::var_os("INVOCATION_ID").is_some() {
        logs.json().init();
    } else {
        logs.init();
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("error: cannot start the async runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(memsift::cli::run(cli));
    // Every task is dropped here, which stops the calls they awaited; a thread still busy after
    // the bound is left behind rather than holding the exit.
    runtime.shutdown_timeout(SHUTDOWN_TIMEOUT);
    let n_panics = memsift::panics::unhandled();
    match result {
        Ok(()) if n_panics == 0 => ExitCode::SUCCESS,
        Ok(()) => {
            eprintln!(
                "error: {n_panics} unhandled panic(s), reported above; this is a bug, and the run may be incomplete"
            );
            ExitCode::FAILURE
        }
        Err(error) => {
            // One line: the context chain, outermost first.
            eprintln!("error: {error:#}");
            ExitCode::FAILURE
        }
    }
}
