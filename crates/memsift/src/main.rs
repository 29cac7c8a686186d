//! The `memsift` binary: parse arguments, install logging, run the command, report errors once.

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = memsift::cli::Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("MEMSIFT_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("error: cannot start the async runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(memsift::cli::run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            // One line: the context chain, outermost first.
            eprintln!("error: {error:#}");
            ExitCode::FAILURE
        }
    }
}
