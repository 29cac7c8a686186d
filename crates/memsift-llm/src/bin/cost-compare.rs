//! List-price cost per 1,000 segments of memsift's requests as sent, against the reference design's for the same
//! segments, from token counts.
//!
//! Usage:
//!   `cost-compare --reference FILE --run MODEL=REQUESTS.jsonl [--run MODEL=REQUESTS.jsonl …] [--write-ttl 1h|5m]`
//!   `cost-compare --count-tokens FILE…` (how the reference's prompt sizes in FILE were measured)
//!
//! A `REQUESTS.jsonl` line is one LLM request of a run, as `scripts/cost-compare.sh` dumps it from the store:
//! `{purpose, segment_id, batch_id, system, user_message, raw_output, input_tokens, output_tokens,
//! cache_creation_tokens, cache_read_tokens, cost_usd}`, the usage being what the provider reported (the
//! simulator, which counts tokens and cache hits by the model's published rules). Ours is priced from that usage.
//! The reference's requests for the same segments and the same candidate pairs are rebuilt from the parameters in
//! `--reference` and counted here, with the same tokenizer (tiktoken `o200k_base`, not the provider's own).
//!
//! Cost of one request, USD: `(input + w × cache writes + r × cache reads) × input price + output × output price`,
//! per million tokens, times `1 − batch discount` on the batch lane, with `w` and `r` the model's cache multipliers
//! from the built-in price table.

use std::collections::{BTreeMap, BTreeSet};
use std::process::ExitCode;

use memsift_core::config::{Config, ModelPrice, price_for};
use memsift_core::contract::{DEFAULT_CONFIDENCE, ExtractedItem, Turn};
use memsift_core::transcript::parse_turns;
use memsift_llm::{TokenUsage, cost};
use memsift_tokens::{TOKENIZER, count_tokens};
use serde::Deserialize;
use serde_json::{Value, json};

/// One request of a run, as dumped from the store.
#[derive(Debug, Deserialize)]
struct RequestLine {
    purpose: String,
    segment_id: Option<String>,
    batch_id: Option<String>,
    system: String,
    user_message: String,
    raw_output: Option<String>,
    input_tokens: u64,
    output_tokens: u64,
    cache_creation_tokens: u64,
    cache_read_tokens: u64,
    cost_usd: f64,
}

/// The reference design's parameters (see the file's comments for their source).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Reference {
    name: String,
    extraction: ReferenceExtraction,
    relationship: ReferenceRelationship,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ReferenceExtraction {
    system_prompt_tokens: u64,
    /// `"5m"`, `"1h"` or `"off"`: the marker on the system prompt.
    cache_ttl: String,
    thinking_budget_tokens: u64,
    /// Thinking tokens one request is assumed to spend (billed as output).
    thinking_tokens_used: u64,
    chunk_messages: usize,
    instruction_turn: String,
    output_fields: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ReferenceRelationship {
    system_prompt_tokens: u64,
    /// The per-pair user turn; `{new}` and `{existing}` are replaced by the two memories' texts.
    user_template: String,
    output_fields: Vec<String>,
    null_kind: String,
}

fn tokens(text: &str) -> u64 {
    count_tokens(text) as u64
}

/// What a set of requests used and cost.
#[derive(Debug, Default, Clone, Copy)]
struct Tally {
    requests: u64,
    usage: TokenUsage,
    batch_usd: f64,
    immediate_usd: f64,
}

impl Tally {
    fn add(&mut self, usage: TokenUsage, price: &ModelPrice) {
        self.requests += 1;
        self.usage += usage;
        self.batch_usd += cost(&usage, price, true);
        self.immediate_usd += cost(&usage, price, false);
    }

    fn prompt_tokens(&self) -> u64 {
        self.usage.total_input_tokens()
    }
}

/// The usage a request reported, with cache writes put under the TTL memsift marked them with.
fn reported_usage(line: &RequestLine, write_hour: bool) -> TokenUsage {
    TokenUsage {
        input_tokens: line.input_tokens,
        output_tokens: line.output_tokens,
        cache_creation_5m_tokens: if write_hour { 0 } else { line.cache_creation_tokens },
        cache_creation_1h_tokens: if write_hour { line.cache_creation_tokens } else { 0 },
        cache_read_tokens: line.cache_read_tokens,
    }
}

/// An item as the reference asks for it: every one of its fields, each always present.
fn reference_item(item: &ExtractedItem, fields: &[String]) -> Value {
    let mut object = serde_json::Map::new();
    for field in fields {
        let value = match field.as_str() {
            "text" => json!(item.text),
            "confidence" => json!(item.confidence),
            "expires_at" => json!(item.expires_at),
            "happens_at" => json!(item.happens_at),
            "relationship_type" => json!(item.relationship_type),
            "related_memory_ids" => json!(item.related_memory_ids),
            "consolidates_memory_ids" => json!(item.consolidates_memory_ids),
            "linking_hints" => json!(item.linking_hints),
            _ => Value::Null,
        };
        object.insert(field.clone(), value);
    }
    Value::Object(object)
}

fn items_of(raw: Option<&str>) -> Vec<ExtractedItem> {
    raw.and_then(|raw| serde_json::from_str(raw).ok()).unwrap_or_default()
}

/// One relationship request of ours: the memory, its candidates, and our verdict per candidate label.
struct Classification {
    memory: String,
    candidates: Vec<(String, String)>,
    verdicts: BTreeMap<String, Value>,
}

fn classification(line: &RequestLine) -> Option<Classification> {
    let task: Value = serde_json::from_str(&line.user_message).ok()?;
    let memory = task.get("memory")?.as_str()?.to_owned();
    let candidates = task
        .get("candidates")?
        .as_array()?
        .iter()
        .filter_map(|candidate| {
            Some((
                candidate.get("id")?.as_str()?.to_owned(),
                candidate.get("text")?.as_str()?.to_owned(),
            ))
        })
        .collect();
    let answer: Vec<Value> = line
        .raw_output
        .as_deref()
        .and_then(|raw| serde_json::from_str(raw).ok())
        .unwrap_or_default();
    let verdicts = answer
        .into_iter()
        .filter_map(|verdict| Some((verdict.get("candidate")?.as_str()?.to_owned(), verdict)))
        .collect();
    Some(Classification {
        memory,
        candidates,
        verdicts,
    })
}

/// Everything measured for one model's run.
#[derive(Default)]
struct Comparison {
    segments: u64,
    pairs: u64,
    ours_extraction: Tally,
    ours_relationship: Tally,
    reference_extraction: Tally,
    reference_relationship: Tally,
    /// The reference's extraction without any thinking, for the sensitivity line.
    reference_extraction_unthinking: Tally,
    ours_output_full_form: u64,
    reference_output_items: u64,
    /// Our relationship instructions sent with one pair per request, nothing cached: the earlier baseline.
    one_pair_per_request_prompt: u64,
    worst_recorded_deviation: f64,
    recorded_usd: f64,
}

fn compare(
    lines: &[RequestLine],
    price: &ModelPrice,
    reference: &Reference,
    write_hour: bool,
) -> Result<Comparison, String> {
    let mut out = Comparison::default();
    let ref_cache = reference_cache_marker(&reference.extraction)?;
    tally_ours(&mut out, lines, price, write_hour);
    tally_reference_extraction(&mut out, lines, price, &reference.extraction, ref_cache);
    tally_reference_relationships(&mut out, lines, price, &reference.relationship);
    Ok(out)
}

/// The reference's system-prompt cache marker: `None` when off, else whether it is the 1-hour TTL.
fn reference_cache_marker(ref_extraction: &ReferenceExtraction) -> Result<Option<bool>, String> {
    match ref_extraction.cache_ttl.as_str() {
        "off" => Ok(None),
        "5m" => Ok(Some(false)),
        "1h" => Ok(Some(true)),
        other => Err(format!(
            "extraction.cache_ttl = {other:?}; use \"5m\", \"1h\" or \"off\""
        )),
    }
}

/// Our requests, priced from what the provider reported, with the recorded cost checked against it.
fn tally_ours(out: &mut Comparison, lines: &[RequestLine], price: &ModelPrice, write_hour: bool) {
    for line in lines {
        let usage = reported_usage(line, write_hour);
        let recomputed = cost(&usage, price, true);
        out.recorded_usd += line.cost_usd;
        if recomputed > 0.0 {
            let deviation = (line.cost_usd - recomputed).abs() / recomputed;
            out.worst_recorded_deviation = out.worst_recorded_deviation.max(deviation);
        }
        match line.purpose.as_str() {
            "extraction" => {
                out.ours_extraction.add(usage, price);
                let full: Vec<Value> = items_of(line.raw_output.as_deref())
                    .iter()
                    .map(ExtractedItem::spelled_out)
                    .collect();
                out.ours_output_full_form += tokens(&Value::Array(full).to_string());
            }
            "relationship" => out.ours_relationship.add(usage, price),
            _ => {}
        }
    }
}

/// The reference's extraction: per segment, the same turns in 40-message chunks, each with the whole
/// system prompt, the closing instruction turn, thinking, and the same memories in its output format.
fn tally_reference_extraction(
    out: &mut Comparison,
    lines: &[RequestLine],
    price: &ModelPrice,
    ref_extraction: &ReferenceExtraction,
    ref_cache: Option<bool>,
) {
    let instruction_tokens = tokens(&ref_extraction.instruction_turn);
    let mut by_segment: BTreeMap<&str, Vec<&RequestLine>> = BTreeMap::new();
    for line in lines.iter().filter(|line| line.purpose == "extraction") {
        by_segment
            .entry(line.segment_id.as_deref().unwrap_or_default())
            .or_default()
            .push(line);
    }
    out.segments = by_segment.len() as u64;
    // Cache entries the reference's marked system prompt has, by our batch: it is written once per batch and
    // read by every other request of it (every hit landing is the best case for the reference).
    let mut written_in_batch: BTreeSet<String> = BTreeSet::new();
    let cacheable = price.cacheable_tokens(ref_extraction.system_prompt_tokens);
    for chunks in by_segment.values() {
        let (turns, items) = segment_turns_and_items(chunks);
        let batch = chunks[0].batch_id.clone().unwrap_or_default();
        for (chunk_index, chunk) in turns.chunks(ref_extraction.chunk_messages.max(1)).enumerate() {
            let labels: BTreeSet<&str> = chunk.iter().map(|turn| turn.label.as_str()).collect();
            // Each memory goes to the chunk holding its first evidence turn (the first chunk when it cites none).
            let output: Vec<Value> = items
                .iter()
                .filter(|item| match item.evidence_turns.first() {
                    Some(label) => labels.contains(label.as_str()),
                    None => chunk_index == 0,
                })
                .map(|item| reference_item(item, &ref_extraction.output_fields))
                .collect();
            out.reference_output_items += output.len() as u64;
            let answer = tokens(&Value::Array(output).to_string());
            let conversation: u64 = chunk.iter().map(|turn| tokens(&turn.content)).sum();
            let mut usage = TokenUsage {
                input_tokens: conversation + instruction_tokens,
                output_tokens: answer + ref_extraction.thinking_tokens_used,
                ..TokenUsage::default()
            };
            match ref_cache {
                Some(hour) if cacheable > 0 => {
                    usage.input_tokens += ref_extraction.system_prompt_tokens - cacheable;
                    if written_in_batch.insert(batch.clone()) {
                        if hour {
                            usage.cache_creation_1h_tokens = cacheable;
                        } else {
                            usage.cache_creation_5m_tokens = cacheable;
                        }
                    } else {
                        usage.cache_read_tokens = cacheable;
                    }
                }
                _ => usage.input_tokens += ref_extraction.system_prompt_tokens,
            }
            out.reference_extraction.add(usage, price);
            let unthinking = TokenUsage {
                output_tokens: answer,
                ..usage
            };
            out.reference_extraction_unthinking.add(unthinking, price);
        }
    }
}

/// A segment's turns, each once and in order, and every memory we extracted from its chunks.
fn segment_turns_and_items(chunks: &[&RequestLine]) -> (Vec<Turn>, Vec<ExtractedItem>) {
    let mut seen = BTreeSet::new();
    let mut turns = Vec::new();
    let mut items = Vec::new();
    for line in chunks {
        for turn in parse_turns(&line.user_message) {
            if seen.insert(turn.label.clone()) {
                turns.push(turn);
            }
        }
        items.extend(items_of(line.raw_output.as_deref()));
    }
    (turns, items)
}

/// The reference's relationship classification: one uncached request per pair we classified, answered with
/// our verdict in its output format.
fn tally_reference_relationships(
    out: &mut Comparison,
    lines: &[RequestLine],
    price: &ModelPrice,
    ref_relationship: &ReferenceRelationship,
) {
    for line in lines.iter().filter(|line| line.purpose == "relationship") {
        let Some(classified) = classification(line) else {
            continue;
        };
        for (label, text) in &classified.candidates {
            out.pairs += 1;
            let pair_message = json!({
                "task": "relationship",
                "memory": classified.memory,
                "candidates": [{"id": "c1", "text": text}],
            });
            out.one_pair_per_request_prompt += tokens(&line.system) + tokens(&pair_message.to_string());
            let user = ref_relationship
                .user_template
                .replace("{new}", &classified.memory)
                .replace("{existing}", text);
            let answer = reference_verdict(classified.verdicts.get(label), ref_relationship);
            let usage = TokenUsage {
                input_tokens: ref_relationship.system_prompt_tokens + tokens(&user),
                output_tokens: tokens(&answer.to_string()),
                ..TokenUsage::default()
            };
            out.reference_relationship.add(usage, price);
        }
    }
}

/// Our verdict on one pair (none: the reference's null kind) as the reference's answer spells it.
fn reference_verdict(verdict: Option<&Value>, ref_relationship: &ReferenceRelationship) -> Value {
    let kind = verdict
        .and_then(|verdict| verdict.get("kind"))
        .and_then(Value::as_str)
        .filter(|kind| *kind != "none")
        .unwrap_or(&ref_relationship.null_kind);
    let mut answer = serde_json::Map::new();
    for field in &ref_relationship.output_fields {
        let value = match field.as_str() {
            "relationship_type" => json!(kind),
            "confidence" => verdict
                .and_then(|verdict| verdict.get("confidence"))
                .cloned()
                .unwrap_or(json!(DEFAULT_CONFIDENCE)),
            "reasoning" => verdict
                .and_then(|verdict| verdict.get("reasoning"))
                .cloned()
                .unwrap_or(json!("")),
            _ => Value::Null,
        };
        answer.insert(field.clone(), value);
    }
    Value::Object(answer)
}

fn per_thousand(usd: f64, segments: u64) -> f64 {
    usd * 1000.0 / segments.max(1) as f64
}

fn per(value: u64, count: u64) -> f64 {
    value as f64 / count.max(1) as f64
}

fn report(model: &str, result: &Comparison) {
    let n = result.segments;
    println!("### {model}");
    println!();
    println!(
        "{n} segments; ours: {} extraction and {} relationship requests; {} classified pairs; reference: {} extraction requests, {} relationship requests",
        result.ours_extraction.requests,
        result.ours_relationship.requests,
        result.pairs,
        result.reference_extraction.requests,
        result.reference_relationship.requests,
    );
    println!();
    println!(
        "| lane | memsift extraction | memsift relationships | memsift total | reference extraction | reference relationships | reference total | memsift / reference |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for (lane, pick) in [
        ("batch", (|tally: &Tally| tally.batch_usd) as fn(&Tally) -> f64),
        ("immediate", |tally: &Tally| tally.immediate_usd),
    ] {
        let ours = pick(&result.ours_extraction) + pick(&result.ours_relationship);
        let theirs = pick(&result.reference_extraction) + pick(&result.reference_relationship);
        println!(
            "| {lane} | ${:.3} | ${:.3} | **${:.3}** | ${:.3} | ${:.3} | **${:.3}** | **{:.2}×** |",
            per_thousand(pick(&result.ours_extraction), n),
            per_thousand(pick(&result.ours_relationship), n),
            per_thousand(ours, n),
            per_thousand(pick(&result.reference_extraction), n),
            per_thousand(pick(&result.reference_relationship), n),
            per_thousand(theirs, n),
            ours / theirs.max(f64::MIN_POSITIVE),
        );
    }
    println!();
    let ours = &result.ours_extraction;
    let theirs = &result.reference_extraction;
    println!(
        "- extraction tokens per segment: ours {:.0} prompt + {:.0} output; reference {:.0} prompt + {:.0} output (thinking included)",
        per(ours.prompt_tokens(), n),
        per(ours.usage.output_tokens, n),
        per(theirs.prompt_tokens(), n),
        per(theirs.usage.output_tokens, n),
    );
    println!(
        "- our output tokens per segment: {:.1} as answered (compact contract); the same items with every field spelled out: {:.1}",
        per(ours.usage.output_tokens, n),
        per(result.ours_output_full_form, n),
    );
    let all_ours = {
        let mut usage = result.ours_extraction.usage;
        usage += result.ours_relationship.usage;
        usage
    };
    println!(
        "- our prompt tokens served from cache: {:.1} % ({} of {}; cache writes {})",
        100.0 * per(all_ours.cache_read_tokens, all_ours.total_input_tokens()),
        all_ours.cache_read_tokens,
        all_ours.total_input_tokens(),
        all_ours.cache_creation_5m_tokens + all_ours.cache_creation_1h_tokens,
    );
    let ours_pair = per(result.ours_relationship.prompt_tokens(), result.pairs);
    let theirs_pair = per(result.reference_relationship.prompt_tokens(), result.pairs);
    let one_pair = per(result.one_pair_per_request_prompt, result.pairs);
    println!(
        "- prompt tokens per classified pair: ours {ours_pair:.1}; reference {theirs_pair:.1} ({:.3}×); our own instructions sent one pair per request, uncached: {one_pair:.1} ({:.3}×)",
        ours_pair / theirs_pair.max(f64::MIN_POSITIVE),
        ours_pair / one_pair.max(f64::MIN_POSITIVE),
    );
    let unthinking = per_thousand(
        result.reference_extraction_unthinking.batch_usd + result.reference_relationship.batch_usd,
        n,
    );
    println!(
        "- sensitivity: the reference with no thinking tokens at all costs ${unthinking:.3} per 1,000 segments on the batch lane ({:.2}× for ours)",
        per_thousand(result.ours_extraction.batch_usd + result.ours_relationship.batch_usd, n)
            / unthinking.max(f64::MIN_POSITIVE),
    );
    println!(
        "- recorded cost_usd of our requests: ${:.4} in all; the largest deviation of one request from the formula is {:.4} %",
        result.recorded_usd,
        100.0 * result.worst_recorded_deviation,
    );
    println!();
}

fn read_lines(path: &str) -> Result<Vec<RequestLine>, String> {
    let text = std::fs::read_to_string(path).map_err(|error| format!("cannot read {path}: {error}"))?;
    text.lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .map(|(number, line)| serde_json::from_str(line).map_err(|error| format!("{path}:{}: {error}", number + 1)))
        .collect()
}

fn run(args: &[String]) -> Result<(), String> {
    if args.first().map(String::as_str) == Some("--count-tokens") {
        for path in &args[1..] {
            let text = std::fs::read_to_string(path).map_err(|error| format!("cannot read {path}: {error}"))?;
            println!(
                "{path}: {} bytes, {} characters, {} tokens ({TOKENIZER})",
                text.len(),
                text.chars().count(),
                tokens(&text)
            );
        }
        return Ok(());
    }
    let mut reference_path = None;
    let mut runs = Vec::new();
    let mut write_hour = true;
    let mut rest = args.iter();
    while let Some(flag) = rest.next() {
        let value = rest.next().ok_or_else(|| format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--reference" => reference_path = Some(value.clone()),
            "--run" => {
                let (model, path) = value
                    .split_once('=')
                    .ok_or_else(|| format!("--run {value}: use MODEL=REQUESTS.jsonl"))?;
                runs.push((model.to_owned(), path.to_owned()));
            }
            "--write-ttl" => {
                write_hour = match value.as_str() {
                    "1h" => true,
                    "5m" => false,
                    other => return Err(format!("--write-ttl {other}: use 1h or 5m")),
                }
            }
            other => return Err(format!("unknown argument {other}")),
        }
    }
    let reference_path = reference_path.ok_or("--reference FILE is required")?;
    if runs.is_empty() {
        return Err("give at least one --run MODEL=REQUESTS.jsonl".to_owned());
    }
    let reference: Reference = toml::from_str(
        &std::fs::read_to_string(&reference_path).map_err(|error| format!("cannot read {reference_path}: {error}"))?,
    )
    .map_err(|error| format!("{reference_path} is invalid: {error}"))?;
    let prices = Config::defaults().prices;
    println!(
        "List-price cost per 1,000 segments, USD: memsift's requests as sent against {} (tokens: {TOKENIZER}; thinking budget {} with {} thinking tokens assumed per extraction request).",
        reference.name, reference.extraction.thinking_budget_tokens, reference.extraction.thinking_tokens_used,
    );
    println!();
    for (model, path) in runs {
        let price = price_for(&prices, &model).ok_or_else(|| format!("{model} is not in the built-in price table"))?;
        let lines = read_lines(&path)?;
        let result = compare(&lines, price, &reference, write_hour)?;
        report(&model, &result);
    }
    Ok(())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::from(2)
        }
    }
}
