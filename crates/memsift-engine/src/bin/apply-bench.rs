//! What extracting and applying a conversation costs for a user who already holds few or many
//! memories: the same new conversations through the offline lane for a user with 50 memories
//! and one with 50,000, phase by phase. Each phase should cost the same at both sizes; one that
//! grows reads or scans the user's memories where an index would answer.
//!
//! `cargo run --release -p memsift-engine --features testing --bin apply-bench -- [SIZES] [--postgres]`
//! (SIZES defaults to 50,50000; PostgreSQL as the store tests find it). The stored memories are
//! sentences over a fixed vocabulary with random unit vectors (as `search-bench` makes them); the
//! new conversations are facts the offline extractor reads, a different one for every turn, so
//! every item is new. Prints figures only.

use std::time::Instant;

use chrono::{Duration, Utc};
use memsift_core::config::Config;
use memsift_core::{Clock, ManualClock};
use memsift_engine::testing::{Noise, app_on, word};
use memsift_engine::timings::{self, Phase};
use memsift_store::testing::TestDb;

/// New conversations, and turns each: enough segments that one apply's cost is a steady figure.
const CONVERSATIONS: usize = 20;
const TURNS: usize = 10;

const PHASES: [(Phase, &str); 7] = [
    (Phase::Planning, "planning"),
    (Phase::PlanningSimilar, "  context memories"),
    (Phase::Reads, "apply reads"),
    (Phase::Processing, "processing"),
    (Phase::EmbedAnswers, "embedding answers"),
    (Phase::Index, "vector stage"),
    (Phase::Writes, "writes"),
];

/// A turn the offline extractor makes a memory of, unlike any other.
fn fact(noise: &mut Noise, n: usize) -> String {
    let (place, thing) = (word(noise), word(noise));
    match n % 3 {
        0 => format!("I moved to {} in {}.", capital(&place), 1990 + n % 30),
        1 => format!("My favourite food is {thing} from {}.", capital(&place)),
        _ => format!("I work as a {thing} teacher in {}.", capital(&place)),
    }
}

fn capital(word: &str) -> String {
    let mut chars = word.chars();
    chars
        .next()
        .map(|first| first.to_uppercase().chain(chars).collect())
        .unwrap_or_default()
}

async fn bench(db: &TestDb, backend: &str, size: usize) -> anyhow::Result<()> {
    let clock = ManualClock::new(Utc::now() - Duration::days(1));
    let app = app_on(&db.store, &clock, Config::defaults(), "bench");
    let embedder = app.vectors.embedder().await?;
    let (model_id, dimension) = (embedder.model_id().to_owned(), embedder.dimension());
    let mut noise = Noise(0x2545_f491_4f6c_dd1d ^ size as u64);
    let user = format!("apply-bench-{size}");
    let rows: Vec<(String, Vec<f32>)> = (0..size)
        .map(|n| {
            let text = format!(
                "Noor noted {} {} {} ({n}).",
                word(&mut noise),
                word(&mut noise),
                word(&mut noise)
            );
            (text, (0..dimension).map(|_| noise.unit()).collect())
        })
        .collect();
    db.store
        .insert_bench_memories(&user, &model_id, &rows, clock.now())
        .await?;
    let mut jsonl = String::new();
    let mut n_fact = 0;
    for conversation in 0..CONVERSATIONS {
        for turn in 0..TURNS {
            n_fact += 1;
            let line = serde_json::json!({
                "user": user,
                "conversation": format!("c{conversation}"),
                "role": if turn % 2 == 0 { "user" } else { "assistant" },
                "content": if turn % 2 == 0 { fact(&mut noise, n_fact) } else { "Noted.".to_owned() },
                "timestamp": (clock.now() + Duration::minutes((conversation * TURNS + turn) as i64)).to_rfc3339(),
                "boundary": turn + 1 == TURNS,
            });
            jsonl.push_str(&line.to_string());
            jsonl.push('\n');
        }
    }
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("conversations.jsonl");
    std::fs::write(&path, jsonl)?;
    memsift_engine::ingest::import_file(&app, &path, memsift_import::ImportFormat::Jsonl, &|_, _| {}).await?;
    clock.advance(Duration::hours(2));
    timings::reset();
    let statements_before = memsift_store::statements_run();
    let started = Instant::now();
    let report = memsift_engine::pipeline::run_until_idle(&app).await?;
    let wall = started.elapsed().as_secs_f64();
    let statements = memsift_store::statements_run() - statements_before;
    let segments = report.n_segments_extracted.max(1) as f64;
    println!(
        "{backend} stored={size}: {} segments, {} memories written, {:.1} ms a segment end to end, {:.0} statements a segment",
        report.n_segments_extracted,
        report.n_memories,
        wall * 1000.0 / segments,
        statements as f64 / segments
    );
    for (phase, name) in PHASES {
        let seconds = timings::seconds(phase);
        println!("  {name:<20} {:>8.2} ms a segment", seconds * 1000.0 / segments);
    }
    Ok(())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let postgres = args.iter().any(|arg| arg == "--postgres");
    let sizes: Vec<usize> = args
        .iter()
        .find(|arg| !arg.starts_with("--"))
        .map(|list| {
            list.split(',')
                .map(|size| size.trim().parse())
                .collect::<Result<_, _>>()
        })
        .transpose()?
        .unwrap_or_else(|| vec![50, 50_000]);
    timings::enable();
    for size in sizes {
        let (db, backend) = if postgres {
            (TestDb::postgres().await, "postgres")
        } else {
            (TestDb::sqlite().await, "sqlite")
        };
        bench(&db, backend, size).await?;
        db.finish().await;
    }
    Ok(())
}
