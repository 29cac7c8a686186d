//! Runs a simulator from the command line until Ctrl-C, for the SDK conformance script and manual
//! poking: `cargo run -p memsift-sim --example sim-server -- --listen 127.0.0.1:0`.
//!
//! The first line on stdout is `listening on http://ADDR`, so a script can read the chosen port.

use std::io::Write;
use std::path::PathBuf;

use clap::Parser;
use memsift_sim::{SimConfig, serve};

/// Command-line options, the same three the `memsift sim` subcommand takes.
#[derive(Parser)]
struct Args {
    /// Address to listen on; port 0 picks a free one.
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: String,
    /// `heuristic` or `locomo:PATH`.
    #[arg(long, default_value = "heuristic")]
    responder: String,
    /// A fault plan (`.toml` or JSON).
    #[arg(long)]
    faults: Option<PathBuf>,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .init();
    let args = Args::parse();
    let config = SimConfig::from_cli(&args.responder, args.faults.as_deref())?;
    let listener = tokio::net::TcpListener::bind(&args.listen).await?;
    println!("listening on http://{}", listener.local_addr()?);
    std::io::stdout().flush()?;
    serve(listener, config, async {
        let _ = tokio::signal::ctrl_c().await;
    })
    .await?;
    Ok(())
}
