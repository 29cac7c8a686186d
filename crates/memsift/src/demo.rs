//! `memsift demo`: the whole pipeline on a built-in sample, in a fresh database, with no keys.
//!
//! By default the sample goes through the batch lane against an in-process `memsift-sim` (the
//! Anthropic Message Batches wire format, answering with the offline extractor), so the demo shows
//! the coordinator's tables; `--lane heuristic` skips the simulator.

use std::sync::Arc;

use anyhow::Context;
use memsift_core::config::{Config, EmbeddingBackend};
use memsift_embed::model::{INSTALL_COMMAND, install, verify};
use memsift_embed::{Embedder, HashingEmbedder};
use memsift_sim::{Sim, SimConfig};

use crate::import::parse_jsonl;
use memsift_engine::app::App;
use memsift_engine::embedding::minilm_dir;
use memsift_engine::pipeline;
use memsift_engine::setup::{demo_database_path, sqlite_url};

use crate::render;

/// The sample conversations (written for memsift; not LoCoMo), compiled in.
pub const SAMPLE_JSONL: &str = include_str!("../demo/sample.jsonl");

/// The demo's lane.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum DemoLane {
    /// Anthropic Message Batches against an in-process simulator.
    Batch,
    /// The offline heuristic lane only.
    Heuristic,
}

/// Creates a fresh demo database, imports the sample, extracts, and prints what happened.
pub async fn run(config: Config, lane: DemoLane) -> anyhow::Result<()> {
    let path = demo_database_path();
    let dir = path
        .parent()
        .context("the demo database has a parent directory")?
        .to_owned();
    std::fs::create_dir_all(&dir)?;
    for suffix in ["", "-wal", "-shm"] {
        let file = format!("{}{suffix}", path.display());
        if std::path::Path::new(&file).exists() {
            std::fs::remove_file(&file)?;
        }
    }
    println!("demo: fresh database {}", path.display());
    let mut sim = None;
    let config = match lane {
        DemoLane::Heuristic => config,
        DemoLane::Batch => {
            // The simulator checks a key like a provider does; the demo's key lives in a file
            // next to the database, the same way a deployment names its key file.
            let key_file = dir.join("memsift-demo-sim.key");
            std::fs::write(&key_file, "demo-key-not-a-secret")?;
            let handle =
                Sim::start(SimConfig::from_cli("heuristic", None)?.with_api_key("demo-key-not-a-secret")).await?;
            println!(
                "demo: provider simulator (Anthropic Message Batches) at {}",
                handle.base_url
            );
            let overlay = format!(
                "[batch]\npack_max_wait_secs = 0\npoll_initial_secs = 1\n\n\
                 [llm.extraction_standard]\nprovider = \"anthropic\"\nendpoint = \"{}\"\nmodel = \"claude-haiku-4-5\"\n\
                 api_key_file = \"{}\"\nlane = \"batch\"\nmax_tokens = 4096\n",
                handle.base_url,
                key_file.display()
            );
            sim = Some(handle);
            let mut merged = Config::from_layers(Some(("demo overlay", &overlay)))?;
            merged.database = config.database;
            merged.embeddings = config.embeddings;
            merged
        }
    };
    let install_failure = install_model_for_demo(&config).await?;
    let app = App::open_with_system_clock(config, &sqlite_url(&path)).await?;
    let embedder = match install_failure {
        Some(failure) => Err(failure),
        None => app.vectors.embedder().await.map_err(|error| error.to_string()),
    };
    match embedder {
        Ok(embedder) => println!(
            "demo: embeddings: {} ({} dimensions)",
            embedder.model_id(),
            embedder.dimension()
        ),
        Err(error) => {
            // The demo must run on a machine that cannot reach the package registry; it says so
            // and labels what it uses instead, so nobody mistakes lexical dedupe for the real one.
            println!("demo: {error}");
            let double = Arc::new(HashingEmbedder::new());
            println!(
                "demo: embeddings: {} (TEST DOUBLE: feature hashing, duplicates found by shared words only)",
                double.model_id()
            );
            app.vectors.use_embedder(double)?;
        }
    }
    let messages = parse_jsonl("built-in sample", SAMPLE_JSONL, app.config.ingest.max_message_len())?;
    let report = app
        .store
        .messages()
        .ingest(&messages, app.config.idle_timeout(), app.clock.now(), &|_| {})
        .await?;
    println!(
        "demo: imported {} messages ({} users, {} segments started)",
        report.n_added, report.n_users_created, report.n_segments_started
    );
    let step = pipeline::run_until_idle(&app).await?;
    println!(
        "demo: {} segments extracted, {} memories written, {} items dropped; {} batches created, {} polls",
        step.n_segments_extracted,
        step.n_memories,
        step.n_items_dropped,
        step.batch.n_batches_created,
        step.batch.n_polls
    );
    let segments = app.store.listing().list_segments(None, None, None).await?;
    println!("{}", render::segments_table(&segments));
    if lane == DemoLane::Batch {
        println!(
            "{}",
            render::batches_table(&app.store.batches().list_batches(None, None).await?)
        );
    }
    let users: std::collections::BTreeSet<&str> = segments.iter().map(|segment| segment.user.as_str()).collect();
    let mut n_memories = 0;
    for user in users {
        let memories = app.store.listing().list_memories(user, None).await?;
        n_memories += memories.len();
        println!("memories of {user}:");
        println!("{}", render::memories_table(&memories));
    }
    app.store.close().await;
    if let Some(handle) = sim {
        handle.shutdown().await?;
    }
    println!("demo: {} segments, {} memories", segments.len(), n_memories);
    Ok(())
}

/// The demo is the one command besides `memsift model install` that fetches the model: when the
/// configured MiniLM directory does not verify, it says so in one line and installs the pinned
/// files. Returns why that failed, for the demo to say before it falls back to the labelled double.
async fn install_model_for_demo(config: &Config) -> anyhow::Result<Option<String>> {
    if config.embeddings.backend != EmbeddingBackend::Minilm {
        return Ok(None);
    }
    let dir = minilm_dir(&config.embeddings);
    if verify(&dir).is_ok() {
        return Ok(None);
    }
    println!(
        "demo: installing the pinned all-MiniLM-L6-v2 into {} (what `{INSTALL_COMMAND}` does)",
        dir.display()
    );
    let installed = tokio::task::spawn_blocking(move || install(&dir))
        .await
        .context("the model install task ended abnormally")?;
    Ok(installed
        .err()
        .map(|error| format!("the embedding model could not be installed ({error})")))
}
