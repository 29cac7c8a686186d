//! Planning time for one unbroken long word: chunking a segment whose user turn is a one-word
//! DNA sequence of each size given, which is the CPU work `plan_segment` does for it.
//!
//! Usage: `chunk-bench [KIB ...]` (default `256 1024`). Prints one line per size: the message's
//! bytes, the chunk's tokens, the number of chunks and the seconds `build_extraction_chunks` took.

use std::process::ExitCode;
use std::time::Instant;

use chrono::Utc;
use memsift_core::MessageId;
use memsift_core::contract::Turn;
use memsift_core::prompt::PromptRegistry;
use memsift_core::status::Role;
use memsift_payload::{PayloadOptions, build_extraction_chunks};

/// A DNA sequence of `n_bytes` from a fixed generator, so every run measures the same text.
fn dna(n_bytes: usize) -> String {
    let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
    (0..n_bytes)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            b"ACGT"[(state % 4) as usize] as char
        })
        .collect()
}

fn main() -> ExitCode {
    let sizes: Result<Vec<usize>, _> = std::env::args().skip(1).map(|arg| arg.parse::<usize>()).collect();
    let sizes = match sizes {
        Ok(sizes) if sizes.is_empty() => vec![256, 1024],
        Ok(sizes) => sizes,
        Err(error) => {
            eprintln!("usage: chunk-bench [KIB ...]: {error}");
            return ExitCode::from(2);
        }
    };
    let registry = PromptRegistry::built_in();
    let prompt = match registry.get("extraction") {
        Ok(prompt) => prompt,
        Err(error) => {
            eprintln!("{error}");
            return ExitCode::from(1);
        }
    };
    let now = Utc::now();
    for kib in sizes {
        let turn = |label: &str, role, content: String| {
            (
                MessageId::new_v7(),
                Turn {
                    label: label.to_owned(),
                    role,
                    speaker: None,
                    content,
                    at: now,
                },
            )
        };
        let turns = vec![
            turn("t1", Role::User, format!("Here is the sequence: {}", dna(kib * 1024))),
            turn("t2", Role::Assistant, "Thanks, I will look at it.".to_owned()),
        ];
        let started = Instant::now();
        let chunks = match build_extraction_chunks(prompt, now, &turns, &[], &PayloadOptions::default()) {
            Ok(chunking) => chunking.chunks,
            Err(error) => {
                eprintln!("chunk-bench: {error}");
                return ExitCode::FAILURE;
            }
        };
        let seconds = started.elapsed().as_secs_f64();
        let tokens: usize = chunks.iter().map(|chunk| chunk.n_tokens).sum();
        let largest = chunks.iter().map(|chunk| chunk.n_tokens).max().unwrap_or(0);
        println!(
            "{kib} KiB one-word message: {} chunk(s), {tokens} tokens, largest {largest}, {seconds:.3} s",
            chunks.len()
        );
    }
    ExitCode::SUCCESS
}
