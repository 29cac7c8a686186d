//! `memsift search` (a user's memories with their evidence) and `memsift eval retrieval`.

use chrono::{DateTime, Utc};
use memsift_core::config::Config;
use memsift_engine::app::App;
use memsift_engine::search::{Key, SearchRequest};

use super::args::EvalCommand;
use crate::eval::{self, Lanes};
use crate::render;

/// An RFC 3339 time from a flag, or one line naming the flag and the form.
pub(super) fn parse_time(flag: &str, value: Option<&str>) -> anyhow::Result<Option<DateTime<Utc>>> {
    value
        .map(|text| {
            DateTime::parse_from_rfc3339(text.trim())
                .map(|at| at.with_timezone(&Utc))
                .map_err(|_| {
                    anyhow::anyhow!("{flag}: `{text}` is not a time; use RFC 3339 such as 2026-03-01T10:00:00Z")
                })
        })
        .transpose()
}

/// `memsift search`: the results best first, each with its evidence turns.
pub(super) async fn search(app: &App, request: &SearchRequest, json: bool) -> anyhow::Result<()> {
    let answer = memsift_engine::search::search(app, request)
        .await
        .map_err(|error| anyhow::anyhow!("search: {error:#}"))?;
    if json {
        return render::print_json(&answer);
    }
    if answer.results.is_empty() {
        println!("search: nothing found for user `{}`", request.user);
        return Ok(());
    }
    for (rank, hit) in answer.results.iter().enumerate() {
        let kind = match &hit.key {
            Key::Memory(_) => "memory",
            Key::Turn(_) => "turn",
        };
        println!("{:>2}. [{kind} {:.4}] {}", rank + 1, hit.score, hit.text);
        for turn in &hit.evidence {
            let who = turn.speaker.as_deref().unwrap_or(&turn.role);
            let text: String = turn.text.chars().take(160).collect();
            println!(
                "      {} {who} at {}: {text}",
                turn.label,
                turn.at.format("%Y-%m-%d %H:%M")
            );
        }
        if !hit.entities.is_empty() {
            println!("      entities: {}", hit.entities.join(", "));
        }
        for link in &hit.links {
            println!(
                "      via {} link ({:.2}) from {}",
                link.kind, link.confidence, link.from
            );
        }
    }
    println!(
        "search: {} results of {} candidates, {} tokens",
        answer.results.len(),
        answer.n_candidates,
        answer.n_tokens
    );
    Ok(())
}

/// `memsift eval retrieval`.
pub(super) async fn eval(config: Config, what: EvalCommand, json: bool) -> anyhow::Result<()> {
    let EvalCommand::Retrieval {
        file,
        format,
        configured,
        responder,
        store,
        weights,
        only,
        misses,
    } = what;
    // Overrides apply to the configured weights, so a run measures what the daemon would do.
    let weights = match weights {
        Some(list) => config
            .search
            .weights
            .with_overrides(&list)
            .map_err(|problem| anyhow::anyhow!("eval retrieval: --weights: {problem}"))?,
        None => config.search.weights.clone(),
    };
    weights
        .validate()
        .map_err(|problem| anyhow::anyhow!("eval retrieval: --weights: {problem}"))?;
    let lanes = if configured {
        Lanes::Configured
    } else {
        Lanes::Simulator(responder.unwrap_or_else(|| eval::default_responder(&file, format)))
    };
    let report = eval::run(
        config,
        &eval::Target {
            file: &file,
            format,
            store: store.as_deref(),
            only: only.as_deref(),
            misses: misses.as_deref(),
        },
        lanes,
        &weights,
    )
    .await?;
    if json {
        return render::print_json(&report);
    }
    println!("{}", eval::table(&report));
    Ok(())
}
