//! `memsift demo`: the whole pipeline on a built-in sample, in a fresh database, with no keys.

use memsift_core::config::Config;

use crate::app::{App, demo_database_path, sqlite_url};
use crate::import::parse_jsonl;
use crate::{pipeline, render};

/// The sample conversations (written for memsift; not LoCoMo), compiled in.
pub const SAMPLE_JSONL: &str = include_str!("../demo/sample.jsonl");

/// Creates a fresh demo database, imports the sample, extracts, and prints what happened.
pub async fn run(config: Config) -> anyhow::Result<()> {
    let path = demo_database_path();
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    for suffix in ["", "-wal", "-shm"] {
        let file = format!("{}{suffix}", path.display());
        if std::path::Path::new(&file).exists() {
            std::fs::remove_file(&file)?;
        }
    }
    println!("demo: fresh database {}", path.display());
    let app = App::open_with_system_clock(config, &sqlite_url(&path)).await?;
    let messages = parse_jsonl("built-in sample", SAMPLE_JSONL)?;
    let report = app
        .store
        .ingest(&messages, app.config.idle_timeout(), app.clock.now(), &|_| {})
        .await?;
    println!(
        "demo: imported {} messages ({} users, {} segments started)",
        report.n_added, report.n_users_created, report.n_segments_started
    );
    let step = pipeline::run_until_idle(&app).await?;
    println!(
        "demo: extracted {} segments on the heuristic lane, {} memories written, {} items dropped",
        step.n_segments_extracted, step.n_memories, step.n_items_dropped
    );
    let segments = app.store.list_segments(None, None, None).await?;
    println!("{}", render::segments_table(&segments));
    let users: std::collections::BTreeSet<&str> = segments.iter().map(|segment| segment.user.as_str()).collect();
    let mut n_memories = 0;
    for user in users {
        let memories = app.store.list_memories(user, None).await?;
        n_memories += memories.len();
        println!("memories of {user}:");
        println!("{}", render::memories_table(&memories));
    }
    app.store.close().await;
    println!("demo: {} segments, {} memories", segments.len(), n_memories);
    Ok(())
}
