//! The heuristic lane's throughput bench: messages extracted per CPU-second over a LoCoMo file,
//! each session one chunk, read through the importer so the turns are exactly what the pipeline
//! hands the lane (photo captions included). `--dump FILE` also writes the memories as JSON
//! lines, one per memory with its user and session, for `scripts/locomo-quality.py --memories`.
//!
//! Usage: cargo bench -p memsift-heuristic --bench throughput -- LOCOMO.json [--rounds N] [--dump FILE]
//!
//! CPU time is this thread's, read from /proc/thread-self/schedstat (nanoseconds), so other
//! processes on a shared machine do not count against the lane; where that file is missing
//! (not Linux), wall time on this single thread stands in and the output says so.

use std::io::Write;
use std::process::ExitCode;
use std::time::Instant;

use memsift_core::contract::Turn;
use memsift_core::message::NewMessage;

/// One session's turns, with the user and session they belong to.
struct Chunk {
    user: String,
    segment: String,
    turns: Vec<Turn>,
}

#[derive(Debug)]
enum BenchError {
    Usage(String),
    Read(String, std::io::Error),
    Import(memsift_import::ImportError),
    Write(String, std::io::Error),
}

impl std::fmt::Display for BenchError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BenchError::Usage(problem) => write!(
                f,
                "{problem}\nusage: cargo bench -p memsift-heuristic --bench throughput -- LOCOMO.json [--rounds N] [--dump FILE]"
            ),
            BenchError::Read(path, error) => write!(f, "cannot read {path}: {error}"),
            BenchError::Import(error) => write!(f, "{error}"),
            BenchError::Write(path, error) => write!(f, "cannot write {path}: {error}"),
        }
    }
}

struct Args {
    locomo: String,
    rounds: u32,
    dump: Option<String>,
}

fn parse_args() -> Result<Args, BenchError> {
    let mut locomo = None;
    let mut rounds = 5;
    let mut dump = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            // cargo bench passes --bench to every bench target.
            "--bench" => {}
            "--rounds" => {
                let value = args
                    .next()
                    .ok_or_else(|| BenchError::Usage("--rounds needs a number".into()))?;
                rounds = value
                    .parse()
                    .map_err(|_| BenchError::Usage(format!("--rounds: `{value}` is not a number")))?;
            }
            "--dump" => {
                dump = Some(
                    args.next()
                        .ok_or_else(|| BenchError::Usage("--dump needs a file".into()))?,
                )
            }
            other if other.starts_with("--") => return Err(BenchError::Usage(format!("unknown option {other}"))),
            path => locomo = Some(path.to_owned()),
        }
    }
    let locomo = locomo.ok_or_else(|| BenchError::Usage("name the LoCoMo JSON file".into()))?;
    Ok(Args {
        locomo,
        rounds: rounds.max(1),
        dump,
    })
}

/// Groups imported messages into one chunk per session, as the pipeline's segments are.
fn chunks(messages: Vec<NewMessage>) -> Vec<Chunk> {
    let mut chunks: Vec<Chunk> = Vec::new();
    for (sequence, message) in messages.into_iter().enumerate() {
        let segment = message.segment_name.clone().unwrap_or_default();
        let starts_new = chunks
            .last()
            .is_none_or(|chunk| chunk.user != message.user_external_id || chunk.segment != segment);
        if starts_new {
            chunks.push(Chunk {
                user: message.user_external_id.clone(),
                segment,
                turns: Vec::new(),
            });
        }
        let turn = Turn {
            label: message.external_id.clone().unwrap_or_else(|| format!("t{sequence}")),
            role: message.role,
            speaker: message.speaker,
            content: message.content,
            at: message.at,
        };
        if let Some(chunk) = chunks.last_mut() {
            chunk.turns.push(turn);
        }
    }
    chunks
}

/// Nanoseconds of CPU this thread has used, when the kernel says.
fn thread_cpu_nanos() -> Option<u64> {
    let schedstat = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    schedstat.split_whitespace().next()?.parse().ok()
}

fn run() -> Result<(), BenchError> {
    let args = parse_args()?;
    let text = std::fs::read_to_string(&args.locomo).map_err(|error| BenchError::Read(args.locomo.clone(), error))?;
    let messages = memsift_import::parse_locomo(&args.locomo, &text, usize::MAX).map_err(BenchError::Import)?;
    let chunks = chunks(messages);
    let n_messages: usize = chunks.iter().map(|chunk| chunk.turns.len()).sum();
    // A warm-up round compiles the rule table, which is done once per process.
    let n_memories: usize = chunks
        .iter()
        .map(|chunk| memsift_heuristic::extract(&chunk.turns).len())
        .sum();
    let cpu_before = thread_cpu_nanos();
    let wall = Instant::now();
    for _ in 0..args.rounds {
        for chunk in &chunks {
            std::hint::black_box(memsift_heuristic::extract_json(std::hint::black_box(&chunk.turns)));
        }
    }
    let wall_secs = wall.elapsed().as_secs_f64();
    let (secs, clock) = match (cpu_before, thread_cpu_nanos()) {
        (Some(before), Some(after)) => ((after - before) as f64 / 1e9, "CPU-second (this thread)"),
        _ => (
            wall_secs,
            "second (wall time, single thread: no per-thread CPU clock here)",
        ),
    };
    let processed = n_messages as f64 * f64::from(args.rounds);
    println!(
        "{} sessions, {n_messages} messages, {n_memories} memories; {} rounds in {secs:.3} s CPU ({wall_secs:.3} s wall)",
        chunks.len(),
        args.rounds
    );
    println!("{:.0} messages per {clock}", processed / secs.max(1e-9));
    if let Some(path) = &args.dump {
        dump(path, &chunks).map_err(|error| BenchError::Write(path.clone(), error))?;
        println!("memories written to {path}");
    }
    Ok(())
}

fn dump(path: &str, chunks: &[Chunk]) -> std::io::Result<()> {
    let mut out = std::io::BufWriter::new(std::fs::File::create(path)?);
    for chunk in chunks {
        for item in memsift_heuristic::extract(&chunk.turns) {
            let line = serde_json::json!({"user": chunk.user, "segment": chunk.segment, "memory": item});
            writeln!(out, "{line}")?;
        }
    }
    out.flush()
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("heuristic bench: {error}");
            ExitCode::FAILURE
        }
    }
}
