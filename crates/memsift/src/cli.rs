//! The command line: every subcommand, parsed by clap and dispatched to the library.

use std::path::PathBuf;

use anyhow::Context;
use clap::{Parser, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};
use memsift_core::SegmentId;
use memsift_store::redact;

use crate::app::{App, database_url, load_config};
use crate::import::{ImportFormat, read_file};
use crate::{pipeline, render};

/// memsift: turns finished conversations into durable, deduplicated long-term memories.
#[derive(Debug, Parser)]
#[command(name = "memsift", version, about, long_about = None)]
pub struct Cli {
    /// A TOML file laid over the built-in defaults (config/memsift.toml documents every key).
    #[arg(long, global = true, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Database URL: sqlite://PATH or postgres://USER@HOST/DB. Default: <data dir>/memsift.db.
    #[arg(long, global = true, env = "MEMSIFT_DATABASE_URL", value_name = "URL")]
    pub database: Option<String>,
    /// Print listings as JSON instead of tables.
    #[arg(long, global = true)]
    pub json: bool,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the whole pipeline on a built-in sample in a fresh demo database (no keys, no network).
    Demo {
        /// `batch`: through an in-process provider simulator; `heuristic`: offline rules only.
        #[arg(long, value_enum, default_value = "batch")]
        lane: crate::demo::DemoLane,
    },
    /// Create or update the database schema.
    Migrate,
    /// Import conversations; each file is stored whole or not at all.
    Import {
        /// The file format.
        #[arg(long, value_enum)]
        format: ImportFormat,
        /// Files to import, in order.
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
    /// Extract memories from closed segments now.
    Extract {
        /// Every closed segment that is due.
        #[arg(long, conflicts_with = "segment", required_unless_present = "segment")]
        pending: bool,
        /// One segment by id (closed first if still open; retried if failed or dead).
        #[arg(long, value_name = "ID")]
        segment: Option<String>,
    },
    /// Run the pipeline: close idle segments, extract, apply.
    Run {
        /// Exit 0 once a step finds nothing left to do.
        #[arg(long)]
        until_idle: bool,
        /// Seconds between steps when not exiting at idle.
        #[arg(long, default_value_t = 5)]
        interval_secs: u64,
    },
    /// Run as a service: periodic jobs claimed through the database, systemd notify, drain on SIGTERM.
    Daemon,
    /// One safety-net pass: move every stuck segment, request, claim and batch forward once.
    Sweep,
    /// List segments.
    Segments {
        /// Only this user's (external id).
        #[arg(long)]
        user: Option<String>,
        /// Only this status (open, closed, extracting, extracted, failed, dead).
        #[arg(long)]
        status: Option<String>,
        /// At most this many rows.
        #[arg(long)]
        limit: Option<i64>,
    },
    /// List a user's active memories with their evidence turns.
    Memories {
        /// The user (external id).
        #[arg(long)]
        user: String,
        /// At most this many rows.
        #[arg(long)]
        limit: Option<i64>,
    },
    /// List LLM request attempts, newest first.
    Requests {
        /// Only this user's (external id).
        #[arg(long)]
        user: Option<String>,
        /// Only this status.
        #[arg(long)]
        status: Option<String>,
        /// At most this many rows.
        #[arg(long)]
        limit: Option<i64>,
    },
    /// List provider batches, newest first.
    Batches {
        /// Only this status (planned, submitting, submitted, ended, ingested, orphaned, failed).
        #[arg(long)]
        status: Option<String>,
        /// At most this many rows.
        #[arg(long)]
        limit: Option<i64>,
    },
    /// Show one request (with its raw output and drops) or one batch (with its requests).
    Show {
        /// A request id or a batch id.
        id: String,
    },
    /// Check the configuration (and that every reachable `{purpose}_{tier}` key resolves).
    CheckConfig,
    /// Serve the protocol-faithful provider simulator (Anthropic and OpenAI wire formats) until Ctrl-C.
    Sim {
        /// Address to listen on; port 0 picks a free one (the first stdout line names it).
        #[arg(long, default_value = "127.0.0.1:0")]
        listen: String,
        /// `heuristic` (answers with the offline extractor) or `locomo:PATH` (LoCoMo observations).
        #[arg(long, default_value = "heuristic")]
        responder: String,
        /// A fault plan, TOML or JSON (see crates/memsift-sim/src/faults.rs).
        #[arg(long, value_name = "FILE")]
        faults: Option<PathBuf>,
    },
}

/// Runs one parsed command line.
pub async fn run(cli: Cli) -> anyhow::Result<()> {
    let config = load_config(cli.config.as_deref())?;
    if let Command::Demo { lane } = cli.command {
        return crate::demo::run(config, lane).await;
    }
    if let Command::Sim {
        listen,
        responder,
        faults,
    } = &cli.command
    {
        return run_sim(listen, responder, faults.as_deref()).await;
    }
    if let Command::CheckConfig = cli.command {
        let mut problems: Vec<String> = config
            .llm
            .iter()
            .flat_map(|(key, llm)| memsift_llm::validate_llm_config(key, llm))
            .map(|problem| problem.to_string())
            .collect();
        if let Err(error) = crate::daemon::parse_schedules(&config.schedules) {
            problems.push(error.to_string());
        }
        if !problems.is_empty() {
            anyhow::bail!("{}", problems.join("\n"));
        }
        let url = database_url(&config, cli.database.as_deref())?;
        println!(
            "config ok: {}; database {}; tiers {:?}; llm keys {:?}",
            cli.config
                .as_ref()
                .map(|path| path.display().to_string())
                .unwrap_or_else(|| "built-in defaults".to_owned()),
            redact(&url),
            config.billing.tiers,
            config.llm.keys().collect::<Vec<_>>()
        );
        return Ok(());
    }
    let url = database_url(&config, cli.database.as_deref())?;
    let app = App::open_with_system_clock(config, &url).await?;
    if let Command::Daemon = cli.command {
        // Opening the app migrated the store and checked every tier's route; the schedules are
        // checked here, before READY=1 tells systemd the daemon is up.
        let daemon = crate::daemon::Daemon::new(app.clone(), std::sync::Arc::new(crate::daemon::PipelineRunner))?;
        let result = crate::daemon::serve(&daemon).await;
        // Closing the pool checkpoints SQLite's WAL before the process exits.
        app.store.close().await;
        return result;
    }
    let result = dispatch(&app, cli.command, cli.json).await;
    app.store.close().await;
    result
}

async fn dispatch(app: &App, command: Command, json: bool) -> anyhow::Result<()> {
    match command {
        Command::Demo { .. } | Command::CheckConfig | Command::Sim { .. } | Command::Daemon => {
            unreachable!("handled before the store is opened")
        }
        Command::Migrate => println!("migrate: schema is up to date"),
        Command::Import { format, files } => {
            for file in files {
                let report = import_file(app, &file, format).await?;
                if json {
                    render::print_json(&report)?;
                } else {
                    println!(
                        "import: {}: {} messages read, {} added, {} already stored; {} segments started, {} closed",
                        file.display(),
                        report.n_offered,
                        report.n_added,
                        report.n_already_stored,
                        report.n_segments_started,
                        report.n_segments_closed
                    );
                }
            }
        }
        Command::Extract {
            pending: _,
            segment: Some(segment),
        } => {
            let segment_id = SegmentId::parse(&segment)?;
            let claimed = app
                .store
                .claim_segment(segment_id, &app.worker_id, app.clock.now())
                .await?;
            pipeline::plan_segment(app, &claimed).await?;
            let report = pipeline::run_until_idle(app).await?;
            print_step("extract", &report, json)?;
        }
        Command::Extract { .. } => {
            let report = pipeline::run_until_idle(app).await?;
            print_step("extract", &report, json)?;
        }
        Command::Run {
            until_idle,
            interval_secs,
        } => {
            if until_idle {
                let report = pipeline::run_until_idle(app).await?;
                print_step("run", &report, json)?;
            } else {
                loop {
                    let step = pipeline::run_once(app).await?;
                    if step.progressed() {
                        print_step("run", &step, json)?;
                    }
                    tokio::select! {
                        _ = tokio::signal::ctrl_c() => break,
                        _ = tokio::time::sleep(std::time::Duration::from_secs(interval_secs)) => {}
                    }
                }
            }
        }
        Command::Segments { user, status, limit } => {
            let rows = app
                .store
                .list_segments(user.as_deref(), status.as_deref(), limit)
                .await?;
            if json {
                render::print_json(&rows)?
            } else {
                println!("{}", render::segments_table(&rows))
            }
        }
        Command::Memories { user, limit } => {
            let rows = app.store.list_memories(&user, limit).await?;
            if json {
                render::print_json(&rows)?
            } else {
                println!("{}", render::memories_table(&rows))
            }
        }
        Command::Sweep => {
            let report = pipeline::sweep(app).await?;
            print_step("sweep", &report, json)?;
        }
        Command::Batches { status, limit } => {
            let rows = app.store.list_batches(status.as_deref(), limit).await?;
            if json {
                render::print_json(&rows)?
            } else {
                println!("{}", render::batches_table(&rows))
            }
        }
        Command::Show { id } => show(app, &id, json).await?,
        Command::Requests { user, status, limit } => {
            let rows = app
                .store
                .list_requests(user.as_deref(), status.as_deref(), limit)
                .await?;
            if json {
                render::print_json(&rows)?
            } else {
                println!("{}", render::requests_table(&rows))
            }
        }
    }
    Ok(())
}

/// Imports one file in one transaction, with a progress bar on a terminal.
pub async fn import_file(
    app: &App,
    file: &std::path::Path,
    format: ImportFormat,
) -> anyhow::Result<memsift_store::IngestReport> {
    let messages = read_file(file, format)
        .map_err(|error| anyhow::anyhow!("import: {error}; nothing from this file was stored"))?;
    // indicatif draws only when stderr is a terminal, so scripts and CI see no bar.
    let bar = ProgressBar::new(messages.len() as u64);
    bar.set_style(
        ProgressStyle::with_template("{msg} [{bar:30}] {pos}/{len} messages ({per_sec}, eta {eta})")
            .expect("the template is a constant and valid")
            .progress_chars("=> "),
    );
    bar.set_message(format!("import {}", file.display()));
    let report = app
        .store
        .ingest(&messages, app.config.idle_timeout(), app.clock.now(), &|n_done| {
            bar.set_position(n_done)
        })
        .await
        .with_context(|| format!("import: {}: nothing from this file was stored", file.display()))?;
    bar.finish_and_clear();
    Ok(report)
}

fn print_step(verb: &str, report: &pipeline::StepReport, json: bool) -> anyhow::Result<()> {
    if json {
        return render::print_json(report);
    }
    println!(
        "{verb}: {} segments extracted, {} memories written, {} items dropped, {} attempts failed, {} idle segments closed",
        report.n_segments_extracted,
        report.n_memories,
        report.n_items_dropped,
        report.n_segments_failed,
        report.n_segments_closed
    );
    Ok(())
}

async fn run_sim(listen: &str, responder: &str, faults: Option<&std::path::Path>) -> anyhow::Result<()> {
    use std::io::Write;

    let config = memsift_sim::SimConfig::from_cli(responder, faults)?;
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .with_context(|| format!("sim: cannot listen on {listen}"))?;
    println!("listening on http://{}", listener.local_addr()?);
    std::io::stdout().flush()?;
    memsift_sim::serve(listener, config, async {
        let _ = tokio::signal::ctrl_c().await;
    })
    .await?;
    Ok(())
}

async fn show(app: &App, id: &str, json: bool) -> anyhow::Result<()> {
    if let Ok(batch_id) = memsift_core::BatchId::parse(id)
        && let Some(batch) = app.store.batch(batch_id).await?
    {
        let requests = app.store.list_batch_requests(batch_id).await?;
        if json {
            return render::print_json(&serde_json::json!({ "batch": batch, "requests": requests }));
        }
        println!("{}", render::batches_table(std::slice::from_ref(&batch)));
        println!("{}", render::requests_table(&requests));
        return Ok(());
    }
    let request_id = memsift_core::RequestId::parse(id)?;
    let detail = app.store.request_detail(request_id).await?;
    if json {
        return render::print_json(&detail);
    }
    println!("{}", serde_json::to_string_pretty(&detail)?);
    Ok(())
}
