//! What a daemon holds in memory after searching many users: USERS generated users of MEMORIES
//! memories each (each memory on a turn of its own, with a random unit vector stored as the
//! configured MiniLM's), every user searched once with turns, and the process's resident memory
//! read before and after, next to `[search] held_mb`.
//!
//! `cargo run --release -p memsift-engine --features testing --bin held-bench -- [USERS] [MEMORIES]`
//! (defaults 5000 and 200; SQLite in a temporary directory). Prints figures only.

use std::time::Instant;

use chrono::Utc;
use memsift_core::config::Config;
use memsift_core::{Clock, ManualClock};
use memsift_engine::search::{SearchRequest, search};
use memsift_engine::testing::{Noise, app_on, resident_mb};
use memsift_store::testing::TestDb;

/// A pronounceable word of two or three syllables.
fn word(noise: &mut Noise) -> String {
    const SYLLABLES: [&str; 16] = [
        "ba", "ce", "di", "fo", "gu", "la", "me", "ni", "po", "ru", "sa", "te", "vi", "ro", "stu", "bra",
    ];
    (0..2 + noise.below(2)).map(|_| SYLLABLES[noise.below(16)]).collect()
}

/// A sentence about Noor of `n_words` words.
fn sentence(noise: &mut Noise, n_words: usize) -> String {
    let words: Vec<String> = (0..n_words).map(|_| word(noise)).collect();
    format!("Noor {}.", words.join(" "))
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .map(|arg| arg.parse())
        .collect::<Result<_, _>>()?;
    let users = args.first().copied().unwrap_or(5000);
    let memories = args.get(1).copied().unwrap_or(200);
    let db = TestDb::sqlite().await;
    let clock = ManualClock::new(Utc::now());
    let config = Config::defaults();
    let app = app_on(&db.store, &clock, config.clone(), "held-bench");
    let embedder = app.vectors.embedder().await?;
    let (model_id, dimension) = (embedder.model_id().to_owned(), embedder.dimension());
    let mut noise = Noise(0x2545_f491_4f6c_dd1d);
    let started = Instant::now();
    for user in 0..users {
        let rows: Vec<(String, Vec<f32>)> = (0..memories)
            .map(|_| {
                let n_words = 4 + noise.below(8);
                (
                    sentence(&mut noise, n_words),
                    (0..dimension).map(|_| noise.unit()).collect(),
                )
            })
            .collect();
        db.store
            .insert_bench_memories(&format!("user-{user}"), &model_id, &rows, clock.now())
            .await?;
    }
    println!(
        "{users} users × {memories} memories written in {:.0} s",
        started.elapsed().as_secs_f64()
    );
    let before = resident_mb();
    let started = Instant::now();
    for user in 0..users {
        let query = sentence(&mut noise, 4);
        let request = SearchRequest {
            record_access: false,
            include_turns: true,
            ..SearchRequest::new(format!("user-{user}"), query)
        };
        search(&app, &request).await?;
    }
    let searched = started.elapsed().as_secs_f64();
    println!(
        "searched each once in {searched:.0} s ({:.1} ms a search): resident {before:.0} MB before the searches, {:.0} MB after; [search] held_mb = {}",
        searched * 1000.0 / users as f64,
        resident_mb(),
        config.search.held_mb,
    );
    let held = app.held.stats();
    println!(
        "held: {:.0} MB of {} users (budget {:.0} MB), {} evictions, {} builds, {} forwards, {} hits",
        held.held_bytes as f64 / 1048576.0,
        held.users,
        held.budget_bytes as f64 / 1048576.0,
        held.evictions,
        held.builds,
        held.forwards,
        held.hits,
    );
    db.finish().await;
    Ok(())
}
