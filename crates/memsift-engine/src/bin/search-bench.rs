//! Search latency for one user with 1k, 10k and 100k memories (each resting on a turn of its own),
//! on SQLite and PostgreSQL, memories only and with `include_turns`, with the resident memory it
//! takes.
//!
//! `cargo run --release -p memsift-engine --features testing --bin search-bench -- [SIZES] [--postgres]`
//! (SIZES defaults to 1000,10000,100000; PostgreSQL as the store tests find it; `--timings` also
//! prints where the queries' time went, phase by phase). Each memory is a
//! sentence of words drawn from a fixed vocabulary with a random unit vector stored as the
//! configured MiniLM's: what a search costs does not depend on what the vectors say. Every query
//! is embedded by the real model, so the figures include query embedding. For each size it also
//! times a rebuild of the turn lexicon over that many turns, and what bringing the turn lexicon
//! and turn vectors forward by one new turn costs instead (live ingest). Prints figures only.

use std::sync::Arc;
use std::time::Instant;

use chrono::Utc;
use memsift_core::config::Config;
use memsift_core::{Clock, ManualClock};
use memsift_engine::search::{SearchRequest, search};
use memsift_engine::testing::{Noise, app_on, resident_mb};
use memsift_store::testing::TestDb;

const QUERIES: usize = 200;

/// A vocabulary of pronounceable words, a few very common and most rare, like a person's topics.
fn vocabulary() -> Vec<String> {
    let onsets = [
        "b", "c", "d", "f", "g", "l", "m", "n", "p", "r", "s", "t", "v", "br", "st", "tr",
    ];
    let vowels = ["a", "e", "i", "o", "u", "ai", "ou"];
    let codas = ["", "n", "r", "s", "l", "m", "nd", "st"];
    let mut words = Vec::new();
    for onset in onsets {
        for vowel in vowels {
            for coda in codas {
                for second in ["lo", "ra", "ven", "mi", ""] {
                    words.push(format!("{onset}{vowel}{coda}{second}"));
                }
            }
        }
    }
    words
}

/// A Zipf-like pick: low indexes far more often than high ones.
fn zipf(noise: &mut Noise, n: usize) -> usize {
    let u = (noise.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
    ((n as f64).powf(u) as usize).saturating_sub(1).min(n - 1)
}

fn sentence(noise: &mut Noise, words: &[String], n_words: usize) -> String {
    let mut text: Vec<&str> = (0..n_words).map(|_| words[zipf(noise, words.len())].as_str()).collect();
    text.insert(0, "Noor");
    text.join(" ") + "."
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let rank = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

async fn bench(db: &TestDb, backend: &str, size: usize, words: &[String], timings: bool) -> anyhow::Result<()> {
    let clock = ManualClock::new(Utc::now());
    let app = app_on(&db.store, &clock, Config::defaults(), "bench");
    let embedder = app.vectors.embedder().await?;
    let (model_id, dimension) = (embedder.model_id().to_owned(), embedder.dimension());
    let mut noise = Noise(0x9e37_79b9_7f4a_7c15 ^ size as u64);
    let rows: Vec<(String, Vec<f32>)> = (0..size)
        .map(|_| {
            let n_words = 6 + noise.below(10);
            (
                sentence(&mut noise, words, n_words),
                (0..dimension).map(|_| noise.unit()).collect(),
            )
        })
        .collect();
    let user = format!("bench-{size}");
    let started = Instant::now();
    db.store
        .insert_bench_memories(&user, &model_id, &rows, clock.now())
        .await?;
    let load_secs = started.elapsed().as_secs_f64();
    let before = resident_mb();
    for include_turns in [false, true] {
        let mut latencies = Vec::with_capacity(QUERIES);
        let mut statements = 0;
        for query in 0..=QUERIES {
            let n_words = 4 + noise.below(5);
            let text = sentence(&mut noise, words, n_words) + &format!(" {query}");
            let request = SearchRequest {
                record_access: false,
                include_turns,
                ..SearchRequest::new(user.clone(), text)
            };
            let started = Instant::now();
            let statements_before = memsift_store::statements_run();
            let answer = search(&app, &request).await?;
            statements += memsift_store::statements_run() - statements_before;
            // The first query loads the user's indexes; it is reported apart, not in the percentiles.
            if query == 0 {
                println!(
                    "{backend} n={size} include_turns={include_turns}: first query (loads the indexes) {:.1} ms, {} results",
                    started.elapsed().as_secs_f64() * 1000.0,
                    answer.results.len()
                );
                memsift_engine::timings::reset();
                statements = 0;
                continue;
            }
            latencies.push(started.elapsed().as_secs_f64() * 1000.0);
        }
        latencies.sort_by(f64::total_cmp);
        println!(
            "{backend} n={size} include_turns={include_turns}: p50 {:.1} ms, p95 {:.1} ms over {QUERIES} queries \
             (query embedding included), {:.1} statements a search; resident {:.0} MB after the queries ({:+.0} MB for the indexes); insert {:.1} s",
            percentile(&latencies, 0.50),
            percentile(&latencies, 0.95),
            statements as f64 / QUERIES as f64,
            resident_mb(),
            resident_mb() - before,
            load_secs,
        );
    }
    let written = Written {
        db,
        user: &user,
        model_id: &model_id,
        clock: &clock,
    };
    after_writes(&app, &written, backend, size, &mut noise, words).await?;
    if timings {
        print!("{}", memsift_engine::timings::report());
    }
    Ok(())
}

/// Where the bench writes: its store, user, model and clock.
#[derive(Clone, Copy)]
struct Written<'a> {
    db: &'a TestDb,
    user: &'a str,
    model_id: &'a str,
    clock: &'a ManualClock,
}

/// Searches after writes: each query follows one new memory (on a turn of its own) written
/// through the store as another daemon would, so the user's versions move and the search must
/// bring its indexes forward first.
async fn after_writes(
    app: &memsift_engine::app::App,
    written: &Written<'_>,
    backend: &str,
    size: usize,
    noise: &mut Noise,
    words: &[String],
) -> anyhow::Result<()> {
    let Written {
        db,
        user,
        model_id,
        clock,
    } = *written;
    const WRITES: usize = 20;
    let dimension = app.vectors.embedder().await?.dimension();
    let mut latencies = Vec::with_capacity(WRITES);
    for query in 0..WRITES {
        let row = (
            sentence(noise, words, 8),
            (0..dimension).map(|_| noise.unit()).collect::<Vec<f32>>(),
        );
        db.store
            .insert_bench_memories(user, model_id, &[row], clock.now())
            .await?;
        let text = sentence(noise, words, 5) + &format!(" w{query}");
        let request = SearchRequest {
            record_access: false,
            include_turns: true,
            ..SearchRequest::new(user.to_owned(), text)
        };
        let started = Instant::now();
        search(app, &request).await?;
        latencies.push(started.elapsed().as_secs_f64() * 1000.0);
    }
    latencies.sort_by(f64::total_cmp);
    println!(
        "{backend} n={size}: search right after another writer added a memory: p50 {:.1} ms, p95 {:.1} ms over {WRITES} writes",
        percentile(&latencies, 0.50),
        percentile(&latencies, 0.95),
    );
    Ok(())
}

/// What rebuilding the turn lexicon costs for `size` turns (it is rebuilt at the first search after
/// an import adds a turn): sentences like the memories', twenty turns a conversation.
fn turn_lexicon_build(size: usize, words: &[String]) {
    let mut noise = Noise(0x51_7cc1_b727_220a ^ size as u64);
    let turns: Vec<memsift_store::TurnText> = (0..size)
        .map(|index| memsift_store::TurnText {
            id: memsift_core::MessageId::from_u128(index as u128),
            segment_id: memsift_core::SegmentId::from_u128((index / 20) as u128),
            speaker: Some("Noor".to_owned()),
            text: {
                let n_words = 6 + noise.below(10);
                sentence(&mut noise, words, n_words)
            },
        })
        .collect();
    let started = Instant::now();
    let lexicon = memsift_engine::lexicon::Lexicon::of_turns(1, &turns);
    let built = started.elapsed();
    let started = Instant::now();
    let reference = memsift_engine::lexicon::Lexicon::build(1, memsift_engine::lexicon::turn_documents(&turns));
    println!(
        "turn lexicon n={size}: built in {:.1} ms, {} turns (from the documents, each turn stemmed three times: {:.1} ms, {} turns)",
        built.as_secs_f64() * 1000.0,
        lexicon.len(),
        started.elapsed().as_secs_f64() * 1000.0,
        reference.len(),
    );
    // Live ingest: one more turn in the last conversation, so its segment is read again whole.
    let mut segment: Vec<memsift_store::TurnText> = turns
        .iter()
        .filter(|turn| turn.segment_id == turns[size - 1].segment_id)
        .cloned()
        .collect();
    segment.push(memsift_store::TurnText {
        id: memsift_core::MessageId::from_u128(size as u128),
        ..segment[0].clone()
    });
    let started = Instant::now();
    let forward = lexicon.merged(2, memsift_engine::lexicon::Lexicon::of_turns(2, &segment), &[]);
    let lexicon_forward = started.elapsed();
    let dimension = 384;
    let rows: Vec<(memsift_core::MessageId, Vec<f32>)> = turns
        .iter()
        .map(|turn| (turn.id, (0..dimension).map(|_| noise.unit()).collect()))
        .collect();
    let mut index_forward = memsift_engine::held::ExactIndex::new(dimension);
    for (id, vector) in rows {
        index_forward
            .insert(id, &vector)
            .expect("random vectors have the index's dimension");
    }
    let started = Instant::now();
    index_forward
        .insert(memsift_core::MessageId::from_u128(size as u128), &vec![0.5; dimension])
        .expect("the vector has the index's dimension");
    println!(
        "turn indexes n={size}, one turn added: lexicon brought forward in {:.1} ms ({} turns), vectors in {:.1} ms ({} rows)",
        lexicon_forward.as_secs_f64() * 1000.0,
        forward.len(),
        started.elapsed().as_secs_f64() * 1000.0,
        index_forward.len(),
    );
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let postgres = args.iter().any(|arg| arg == "--postgres");
    let timings = args.iter().any(|arg| arg == "--timings");
    if timings {
        memsift_engine::timings::enable();
    }
    let sizes: Vec<usize> = args
        .iter()
        .find(|arg| !arg.starts_with("--"))
        .map_or("1000,10000,100000", String::as_str)
        .split(',')
        .map(|size| size.trim().parse())
        .collect::<Result<_, _>>()?;
    let words = Arc::new(vocabulary());
    for size in sizes {
        let db = if postgres {
            TestDb::postgres().await
        } else {
            TestDb::sqlite().await
        };
        bench(&db, if postgres { "postgres" } else { "sqlite" }, size, &words, timings).await?;
        db.finish().await;
        turn_lexicon_build(size, &words);
    }
    Ok(())
}
