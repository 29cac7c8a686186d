//! Throughput bench for the processor: parse, repair, validate and fuzzy-dedupe a JSONL corpus of responses.
//!
//! Input lines are `{"session", "response_text", "context": {uuid: text}, "complete_items", "damage"}` as written
//! by `scripts/make-responses.py` (the last two are optional: how many items the text holds whole, and what was
//! done to it). The timed section covers only `process` (file reading and line decoding are done first), and the
//! vector stage is off. The best of `BENCH_PASSES` (default 5) passes is reported, on `BENCH_THREADS` threads
//! (default 1); on one thread, the best pass's CPU time too (from Linux's scheduler accounting), which other work on
//! a shared machine does not inflate the way it inflates wall time. Besides the rate it prints how responses were
//! read, drops by reason, and how many complete items were recovered, overall and per kind of damage; a response
//! lost whole is one that held a complete item and yielded none. Usage: `processor-bench RESPONSES.jsonl`.

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use memsift_core::MemoryId;
use memsift_processor::{DropReason, FieldRepairs, ParsePath, ProcessInput, ProcessOutput, process};
use serde::Deserialize;

/// Short ids in the bench are the first 8 characters of the full id, as the reference shortened them.
const SHORT_ID_CHARS: usize = 8;

#[derive(Deserialize)]
struct ResponseLine {
    #[allow(dead_code)] // Reason: part of the line format; the bench has no use for it.
    session: String,
    response_text: String,
    context: BTreeMap<String, String>,
    /// Items the text holds whole; counted from `"text"` keys when the generator did not say.
    complete_items: Option<usize>,
    #[serde(default)]
    damage: Vec<String>,
}

struct PreparedResponse {
    raw_text: String,
    context: BTreeMap<String, (MemoryId, String)>,
    known_texts: Vec<(MemoryId, String)>,
    complete_items: usize,
    damage: Vec<String>,
}

fn main() -> ExitCode {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: processor-bench RESPONSES.jsonl");
        return ExitCode::from(2);
    };
    let corpus = match std::fs::read_to_string(&path) {
        Ok(corpus) => corpus,
        Err(error) => {
            eprintln!("cannot read {path}: {error}");
            return ExitCode::from(1);
        }
    };
    let mut responses = Vec::new();
    for (line_number, line) in corpus.lines().enumerate().filter(|(_, line)| !line.trim().is_empty()) {
        match serde_json::from_str::<ResponseLine>(line) {
            Ok(parsed) => responses.push(prepare(parsed)),
            Err(error) => {
                eprintln!("{path}:{}: {error}", line_number + 1);
                return ExitCode::from(1);
            }
        }
    }

    let inputs: Vec<ProcessInput<'_>> = responses
        .iter()
        .map(|response| ProcessInput {
            raw_text: &response.raw_text,
            context: response.context.clone(),
            known_texts: response.known_texts.clone(),
            ..ProcessInput::default()
        })
        .collect();

    // The machine is shared, so one pass can be slowed by others' work: the best of several passes is reported,
    // which is the figure closest to what the code itself costs.
    let passes = env_count("BENCH_PASSES", 5);
    // Responses are independent, so a daemon can spread them over cores; one thread is the default so the
    // figure measures the code, not the machine's spare capacity.
    let threads = env_count("BENCH_THREADS", 1);
    let mut seconds = f64::INFINITY;
    let mut cpu_seconds = f64::INFINITY;
    let mut outputs: Vec<ProcessOutput> = Vec::new();
    for _ in 0..passes {
        // Freeing the previous pass's outputs is the caller's cost, not processing: without this, every pass but
        // the first also timed the drop of some twenty thousand items.
        drop(std::mem::take(&mut outputs));
        let started = Instant::now();
        let cpu_started = thread_cpu_time();
        outputs = process_all(&inputs, threads);
        seconds = seconds.min(started.elapsed().as_secs_f64());
        if threads == 1
            && let (Some(before), Some(after)) = (cpu_started, thread_cpu_time())
        {
            cpu_seconds = cpu_seconds.min((after - before).as_secs_f64());
        }
    }
    println!("threads={threads} passes={passes} (best pass reported)");

    report(&outputs, seconds, cpu_seconds);
    report_recovery(&responses, &outputs);
    ExitCode::SUCCESS
}

fn env_count(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(default)
        .max(1)
}

fn process_all(inputs: &[ProcessInput<'_>], threads: usize) -> Vec<ProcessOutput> {
    if threads == 1 {
        return inputs.iter().map(process).collect();
    }
    let chunk = inputs.len().div_ceil(threads).max(1);
    std::thread::scope(|scope| {
        let workers: Vec<_> = inputs
            .chunks(chunk)
            .map(|part| scope.spawn(move || part.iter().map(process).collect::<Vec<_>>()))
            .collect();
        // A worker can only fail by panicking, and `process` does not panic (a property test checks it); if it
        // ever did, re-raising it here is the right outcome for a bench.
        workers
            .into_iter()
            .flat_map(|worker| worker.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)))
            .collect()
    })
}

fn prepare(line: ResponseLine) -> PreparedResponse {
    let complete_items = line
        .complete_items
        .unwrap_or_else(|| line.response_text.matches("\"text\"").count());
    let mut context = BTreeMap::new();
    let mut known_texts = Vec::new();
    for (full_id, text) in line.context {
        // Ids the generator writes are UUIDs; a line with a malformed one just lends that memory no context.
        let Ok(id) = MemoryId::parse(&full_id) else {
            continue;
        };
        let short: String = full_id.chars().take(SHORT_ID_CHARS).collect();
        known_texts.push((id, text.clone()));
        context.insert(short, (id, text));
    }
    PreparedResponse {
        raw_text: line.response_text,
        context,
        known_texts,
        complete_items,
        damage: line.damage,
    }
}

/// The CPU time this thread has run, from the scheduler's own accounting (Linux): on a shared machine a pass
/// that other work preempted is charged its wall time but not this. `None` where the file does not exist.
fn thread_cpu_time() -> Option<Duration> {
    let schedstat = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let nanoseconds = schedstat.split_whitespace().next()?.parse().ok()?;
    Some(Duration::from_nanos(nanoseconds))
}

fn report(outputs: &[ProcessOutput], seconds: f64, cpu_seconds: f64) {
    let memories: usize = outputs.iter().map(|output| output.elements_parsed).sum();
    let rate = |seconds: f64| memories as f64 / seconds.max(f64::MIN_POSITIVE);
    let cpu = if cpu_seconds.is_finite() {
        format!(
            " cpu_seconds={cpu_seconds:.4} memories_per_cpu_s={:.0}",
            rate(cpu_seconds)
        )
    } else {
        String::new()
    };
    println!(
        "responses={} memories={memories} seconds={seconds:.4} memories_per_s={:.0}{cpu}",
        outputs.len(),
        rate(seconds)
    );
    let mut paths: BTreeMap<&str, usize> = BTreeMap::new();
    for output in outputs {
        *paths.entry(output.parse_path.as_str()).or_default() += 1;
    }
    let cut_off = outputs.iter().filter(|output| output.cut_off).count();
    let path_line: Vec<String> = ParsePath::ALL
        .iter()
        .map(|path| format!("{}={}", path.as_str(), paths.get(path.as_str()).copied().unwrap_or(0)))
        .collect();
    println!("parse_paths: {} cut_off={cut_off}", path_line.join(" "));
    let drop_line: Vec<String> = DropReason::ALL
        .iter()
        .map(|reason| {
            let count: usize = outputs.iter().map(|output| output.count_dropped(*reason)).sum();
            format!("{}={count}", reason.as_str())
        })
        .collect();
    println!("dropped: {}", drop_line.join(" "));
    let repairs = outputs
        .iter()
        .fold(FieldRepairs::default(), |total, output| add(total, output.repairs));
    println!(
        "repairs: unknown_ids={} evidence_outside_chunk={} bad_dates={} bad_confidence={} bad_linking_hints={} \
         sensitive_by_phrase={} bad_entities={}",
        repairs.unknown_ids,
        repairs.evidence_outside_chunk,
        repairs.bad_dates,
        repairs.bad_confidence,
        repairs.bad_linking_hints,
        repairs.sensitive_by_phrase,
        repairs.bad_entities
    );
}

/// Complete items present and recovered, and responses lost whole, for a group of responses.
#[derive(Default)]
struct Recovery {
    responses: usize,
    present: usize,
    recovered: usize,
    kept: usize,
    lost_whole: usize,
}

impl Recovery {
    fn add(&mut self, response: &PreparedResponse, output: &ProcessOutput) {
        // Every element read but a cut one: kept, or dropped for a reason of its own.
        let recovered = output.elements_parsed - output.count_dropped(DropReason::Truncated);
        self.responses += 1;
        self.present += response.complete_items;
        self.recovered += recovered;
        self.kept += output.items.len();
        if response.complete_items > 0 && recovered == 0 {
            self.lost_whole += 1;
        }
    }

    fn line(&self) -> String {
        format!(
            "responses={} items_present={} recovered={} kept={} lost_whole={}",
            self.responses, self.present, self.recovered, self.kept, self.lost_whole
        )
    }
}

fn report_recovery(responses: &[PreparedResponse], outputs: &[ProcessOutput]) {
    let mut total = Recovery::default();
    let mut by_damage: BTreeMap<&str, Recovery> = BTreeMap::new();
    for (response, output) in responses.iter().zip(outputs) {
        total.add(response, output);
        if response.damage.is_empty() {
            by_damage.entry("none").or_default().add(response, output);
        }
        for damage in &response.damage {
            by_damage.entry(damage).or_default().add(response, output);
        }
    }
    println!("recovery: {}", total.line());
    // One group means the corpus says nothing about damage, and the total has said it all.
    if by_damage.len() > 1 {
        for (damage, recovery) in &by_damage {
            println!("  damage={damage}: {}", recovery.line());
        }
    }
}

fn add(total: FieldRepairs, more: FieldRepairs) -> FieldRepairs {
    FieldRepairs {
        unknown_ids: total.unknown_ids + more.unknown_ids,
        evidence_outside_chunk: total.evidence_outside_chunk + more.evidence_outside_chunk,
        bad_dates: total.bad_dates + more.bad_dates,
        bad_confidence: total.bad_confidence + more.bad_confidence,
        bad_sensitive: total.bad_sensitive + more.bad_sensitive,
        sensitive_by_phrase: total.sensitive_by_phrase + more.sensitive_by_phrase,
        bad_temporal: total.bad_temporal + more.bad_temporal,
        bad_relationship_type: total.bad_relationship_type + more.bad_relationship_type,
        bad_linking_hints: total.bad_linking_hints + more.bad_linking_hints,
        bad_entities: total.bad_entities + more.bad_entities,
        control_characters: total.control_characters + more.control_characters,
    }
}
