//! `memsift eval retrieval`: how well search finds what was said, measured on annotated
//! conversations in a throwaway store.
//!
//! The conversations are imported into a fresh SQLite file in a temporary directory, extracted
//! through the lanes (by default the batch lane of an in-process simulator whose LoCoMo responder
//! answers with the benchmark's own observations, so extraction is not what is measured; with
//! `--configured`, the lanes of the configuration), and every question is asked under each
//! configuration of signals: each signal alone, the fusion, and the fusion with turns.

pub mod questions;
pub mod score;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::Context;
use memsift_core::config::Config;
use memsift_engine::app::App;
use memsift_engine::search::{STAGES, SearchRequest, Signals, Stages, Weights, search};
use memsift_engine::setup::sqlite_url;
use memsift_sim::{Sim, SimConfig};
use serde::Serialize;

pub use questions::{EvalFormat, Question};
use score::{BUDGETS, Row, Tally};

/// How an evaluation extracts.
#[derive(Clone, Debug)]
pub enum Lanes {
    /// The batch lane of an in-process simulator with this responder (`heuristic` or `locomo:PATH`).
    Simulator(String),
    /// The lanes of the loaded configuration, as `memsift run` would use them.
    Configured,
}

/// What an evaluation measured.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// The file.
    pub file: String,
    /// Messages imported.
    pub n_messages: u64,
    /// Memories extracted.
    pub n_memories: u64,
    /// Questions asked per configuration.
    pub n_questions: usize,
    /// Seconds spent importing and extracting.
    pub extract_secs: f64,
    /// One row per configuration.
    pub rows: Vec<Row>,
}

/// The configurations every evaluation reports: each list alone, then the fusion without and
/// with turns. With `ablations`, before the last two, the fusion with turns without each stage
/// that can be turned off (what each stage is worth; `--only without` runs just these).
fn configurations(ablations: bool) -> Vec<(String, Signals, bool)> {
    let alone = |set: fn(&mut Signals)| {
        let mut signals = Signals::none();
        set(&mut signals);
        signals
    };
    let mut chosen: Vec<(String, Signals, bool)> = vec![
        ("vector".into(), alone(|s| s.vector = true), false),
        ("lexical (BM25)".into(), alone(|s| s.lexical = true), false),
        ("evidence turns (BM25)".into(), alone(|s| s.evidence = true), false),
        (
            "evidence turns (vector)".into(),
            alone(|s| s.turn_vectors = true),
            false,
        ),
        ("entities".into(), alone(|s| s.entities = true), false),
        ("dates".into(), alone(|s| s.dates = true), false),
        ("turns alone (lexical)".into(), Signals::none(), true),
        (
            "fusion of memory lists, no stages".into(),
            alone(|s| {
                s.vector = true;
                s.lexical = true;
                s.entities = true;
                s.dates = true;
            }),
            false,
        ),
    ];
    if ablations {
        for stage in STAGES.into_iter().filter(|stage| stage.can_be_off()) {
            let signals = Signals {
                stages: Stages::all().without(stage),
                ..Signals::default()
            };
            chosen.push((format!("fusion + turns without {}", stage.name()), signals, true));
        }
    }
    chosen.push(("fusion (memories)".into(), Signals::default(), false));
    chosen.push(("fusion + turns".into(), Signals::default(), true));
    chosen
}

/// What to evaluate, and where its store lives.
pub struct Target<'a> {
    /// The annotated conversations.
    pub file: &'a Path,
    /// Their format.
    pub format: EvalFormat,
    /// A directory to keep the store in (and reuse when it has one), instead of a throwaway one.
    pub store: Option<&'a Path>,
    /// Only the configurations whose name contains this.
    pub only: Option<&'a str>,
    /// Where to write the questions the last configuration does not fully cover within k = 10.
    pub misses: Option<&'a Path>,
}

/// Runs the evaluation of `target.file`.
pub async fn run(config: Config, target: &Target<'_>, lanes: Lanes, weights: &Weights) -> anyhow::Result<Report> {
    let file = target.file;
    let questions::EvalFile {
        messages,
        questions,
        refused,
    } = questions::read(file, target.format, config.ingest.max_message_len())
        .map_err(|error| anyhow::anyhow!("eval retrieval: {error}"))?;
    for line in &refused {
        eprintln!("eval retrieval: {line}");
    }
    if questions.is_empty() {
        anyhow::bail!("eval retrieval: {} has no questions with evidence", file.display());
    }
    let throwaway = tempfile::tempdir().context("eval retrieval: cannot create a temporary directory")?;
    let dir = match target.store {
        Some(dir) => {
            std::fs::create_dir_all(dir).with_context(|| format!("eval retrieval: cannot create {}", dir.display()))?;
            dir
        }
        None => throwaway.path(),
    };
    let database = dir.join("eval.db");
    let reuse = database.exists();
    let (config, sim) = if reuse {
        let mut config = config;
        config.erasure.key_file = Some(dir.join("erasure.key"));
        (config, None)
    } else {
        extraction_config(config, dir, lanes).await?
    };
    let app = App::open_with_system_clock(config, &sqlite_url(&database)).await?;
    app.vectors.check()?;
    let started = Instant::now();
    let (n_messages, n_memories) = if reuse {
        let counts = app.store.listing().counts().await?;
        (counts.messages as u64, counts.memories as u64)
    } else {
        extract(&app, &messages).await?
    };
    let extract_secs = started.elapsed().as_secs_f64();
    let mut rows = Vec::new();
    let mut missed = Vec::new();
    // Each ablation costs a full pass over the questions: they run only when asked for by name.
    let ablations = target.only.is_some_and(|only| only.contains("without"));
    let chosen: Vec<_> = configurations(ablations)
        .into_iter()
        .filter(|(name, _, _)| target.only.is_none_or(|only| name.contains(only)))
        .collect();
    let n_chosen = chosen.len();
    for (index, (name, signals, include_turns)) in chosen.into_iter().enumerate() {
        let setup = Setup {
            name: &name,
            signals,
            include_turns,
            with_budgets: signals == Signals::default(),
            // Only the last configuration's misses are written, and finding where each miss sits
            // costs a second, deeper search.
            keep_misses: target.misses.is_some() && index + 1 == n_chosen,
            weights,
        };
        let (row, misses) = measure(&app, &questions, &setup).await?;
        rows.push(row);
        missed = misses;
    }
    if let Some(path) = target.misses {
        let lines: String = missed.iter().map(|miss| format!("{miss}\n")).collect();
        std::fs::write(path, lines).with_context(|| format!("eval retrieval: cannot write {}", path.display()))?;
    }
    app.store.close().await;
    if let Some(sim) = sim {
        sim.shutdown().await?;
    }
    Ok(Report {
        file: file.display().to_string(),
        n_messages,
        n_memories,
        n_questions: questions.len(),
        extract_secs,
        rows,
    })
}

/// Imports the conversations and extracts them; returns the messages added and memories written.
async fn extract(app: &App, messages: &[memsift_core::message::NewMessage]) -> anyhow::Result<(u64, u64)> {
    let ingested = app
        .store
        .messages()
        .ingest(messages, app.config.idle_timeout(), app.clock.now(), &|_| {})
        .await?;
    // Conversations end when the file does: close what is still open, then extract everything.
    app.store
        .messages()
        .close_idle_segments(
            app.clock.now() + chrono::Duration::days(36_500),
            app.config.idle_timeout(),
        )
        .await?;
    let extracted = memsift_engine::pipeline::run_until_idle(app).await?;
    Ok((ingested.n_added, extracted.n_memories))
}

/// The configuration extraction runs on: the loaded one, or its batch lane pointed at an
/// in-process simulator (returned, to be shut down), with the erasure key in the throwaway
/// directory either way.
async fn extraction_config(
    mut config: Config,
    dir: &Path,
    lanes: Lanes,
) -> anyhow::Result<(Config, Option<memsift_sim::SimHandle>)> {
    config.erasure.key_file = Some(dir.join("erasure.key"));
    let Lanes::Simulator(responder) = lanes else {
        return Ok((config, None));
    };
    let key_file = dir.join("sim.key");
    std::fs::write(&key_file, "eval-key-not-a-secret")?;
    let sim = Sim::start(SimConfig::from_cli(&responder, None)?.with_api_key("eval-key-not-a-secret")).await?;
    let overlay = format!(
        "[batch]\npack_max_wait_secs = 0\npoll_initial_secs = 1\n\n\
         [llm.extraction_standard]\nprovider = \"anthropic\"\nendpoint = \"{}\"\nmodel = \"claude-haiku-4-5\"\n\
         api_key_file = \"{}\"\nlane = \"batch\"\nmax_tokens = 4096\n",
        sim.base_url,
        key_file.display()
    );
    let mut merged = Config::from_layers(Some(("eval overlay", &overlay)))?;
    merged.embeddings = config.embeddings;
    merged.erasure = config.erasure;
    Ok((merged, Some(sim)))
}

/// The labels each result cites.
fn cited(results: &[memsift_engine::search::SearchHit]) -> Vec<BTreeSet<String>> {
    results
        .iter()
        .map(|hit| hit.evidence.iter().map(|turn| turn.label.clone()).collect())
        .collect()
}

/// For each evidence label, the rank (from 1) of the first result citing it, if any does: where a
/// miss at k = 10 was, so that a change to the ranking can be aimed.
fn first_ranks(evidence: &BTreeSet<String>, labels: &[BTreeSet<String>]) -> BTreeMap<String, Option<usize>> {
    evidence
        .iter()
        .map(|label| {
            let rank = labels.iter().position(|cited| cited.contains(label)).map(|at| at + 1);
            (label.clone(), rank)
        })
        .collect()
}

/// One configuration to measure.
struct Setup<'a> {
    name: &'a str,
    signals: Signals,
    include_turns: bool,
    with_budgets: bool,
    keep_misses: bool,
    weights: &'a Weights,
}

/// The row of one configuration, and (when `keep_misses`) the questions it does not fully cover
/// within k = 10.
async fn measure(
    app: &App,
    questions: &[Question],
    setup: &Setup<'_>,
) -> anyhow::Result<(Row, Vec<serde_json::Value>)> {
    let mut tally = Tally::default();
    let mut misses = Vec::new();
    for question in questions {
        let request = SearchRequest {
            include_turns: setup.include_turns,
            signals: setup.signals,
            weights: Some(setup.weights.clone()),
            record_access: false,
            ..SearchRequest::new(question.user.clone(), question.text.clone())
        };
        let started = Instant::now();
        let answer = search(app, &request).await?;
        let millis = started.elapsed().as_secs_f64() * 1000.0;
        let labels = cited(&answer.results);
        if setup.keep_misses && score::recall_at(&question.evidence, &labels, 10) < 1.0 {
            let deeper = SearchRequest {
                k: memsift_engine::search::MAX_K,
                ..request.clone()
            };
            let ranks = first_ranks(&question.evidence, &cited(&search(app, &deeper).await?.results));
            misses.push(serde_json::json!({
                "user": question.user,
                "question": question.text,
                "evidence": question.evidence,
                "evidence_ranks": ranks,
                "results": answer.results.iter().map(|hit| serde_json::json!({
                    "text": hit.text,
                    "labels": hit.evidence.iter().map(|turn| turn.label.as_str()).collect::<Vec<_>>(),
                    "parts": hit.parts,
                })).collect::<Vec<_>>(),
            }));
        }
        tally.add(&question.evidence, &labels, millis);
        if setup.with_budgets {
            let mut packed = Vec::new();
            for budget in BUDGETS {
                let request = SearchRequest {
                    k: memsift_engine::search::MAX_K,
                    budget_tokens: Some(budget),
                    ..request.clone()
                };
                packed.push(cited(&search(app, &request).await?.results));
            }
            tally.add_budgeted(&question.evidence, [&packed[0], &packed[1]]);
        }
    }
    Ok((tally.row(setup.name), misses))
}

/// The report as a table.
pub fn table(report: &Report) -> String {
    let mut table = crate::render::Grid::new(&[
        "signals",
        "R@1",
        "R@5",
        "R@10",
        "all@1",
        "all@5",
        "all@10",
        "R≤1k tok",
        "R≤2k tok",
        "p50 ms",
        "p95 ms",
    ]);
    for row in &report.rows {
        let budget = |slot: usize| {
            row.recall_within_tokens
                .map_or("—".to_owned(), |r| format!("{:.3}", r[slot]))
        };
        table.add_row(vec![
            row.name.clone(),
            format!("{:.3}", row.recall[0]),
            format!("{:.3}", row.recall[1]),
            format!("{:.3}", row.recall[2]),
            row.fully_covered[0].to_string(),
            row.fully_covered[1].to_string(),
            row.fully_covered[2].to_string(),
            budget(0),
            budget(1),
            format!("{:.1}", row.latency_ms[0]),
            format!("{:.1}", row.latency_ms[1]),
        ]);
    }
    format!(
        "eval retrieval: {}: {} messages, {} memories, {} questions (extraction {:.1} s)\n{table}",
        report.file, report.n_messages, report.n_memories, report.n_questions, report.extract_secs
    )
}

/// The responder the simulator answers an evaluation of `file` with by default.
pub fn default_responder(file: &Path, format: EvalFormat) -> String {
    match format {
        EvalFormat::Locomo => format!("locomo:{}", PathBuf::from(file).display()),
        EvalFormat::Memsift => "heuristic".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(labels: &[&str]) -> BTreeSet<String> {
        labels.iter().map(|label| (*label).to_owned()).collect()
    }

    #[test]
    fn each_evidence_turn_gets_the_rank_of_the_first_result_citing_it_or_none() {
        let evidence = set(&["D1:1", "D1:2", "D1:3"]);
        let results = [set(&["D1:2"]), set(&[]), set(&["D1:1", "D1:2"])];
        let ranks = first_ranks(&evidence, &results);
        assert_eq!(
            ranks,
            BTreeMap::from([
                ("D1:1".to_owned(), Some(3)),
                ("D1:2".to_owned(), Some(1)),
                ("D1:3".to_owned(), None),
            ])
        );
    }
}
