//! Commands that move work: import, extract, run, sweep, replay, reembed, erase, retention,
//! scoring and the post-processing stages.

use indicatif::{ProgressBar, ProgressStyle};
use memsift_core::SegmentId;
use memsift_engine::app::App;
use memsift_engine::pipeline;
use memsift_store::IdKind;

use super::args::StageArg;
use super::ids::resolve_id;
use crate::import::ImportFormat;
use crate::render;

/// `memsift import`: each file stored whole or not at all, reported as it is stored.
pub(super) async fn import(
    app: &App,
    format: ImportFormat,
    files: Vec<std::path::PathBuf>,
    json: bool,
) -> anyhow::Result<()> {
    for file in files {
        let report = import_file(app, &file, format).await?;
        if json {
            render::print_json(&report)?;
        } else {
            println!(
                "import: {}: {} messages read, {} added, {} already stored; {} segments started, {} closed",
                file.display(),
                report.n_offered,
                report.n_added,
                report.n_already_stored,
                report.n_segments_started,
                report.n_segments_closed
            );
            // What was not stored as sent is said on its own line, never only in the log.
            if report.n_text_replaced > 0 {
                println!(
                    "import: {}: {} messages held U+0000, stored as U+FFFD",
                    file.display(),
                    report.n_text_replaced
                );
            }
            if report.n_conflicting_repeats > 0 {
                println!(
                    "import: {}: {} messages not stored: their id was stored before with another role or content (the stored one is kept): {}",
                    file.display(),
                    report.n_conflicting_repeats,
                    report.conflicting_repeat_ids.join(", ")
                );
            }
        }
    }
    Ok(())
}

/// Imports one file in one transaction, with a progress bar on a terminal.
pub async fn import_file(
    app: &App,
    file: &std::path::Path,
    format: ImportFormat,
) -> anyhow::Result<memsift_store::IngestReport> {
    // indicatif draws only when stderr is a terminal, so scripts and CI see no bar.
    let bar = ProgressBar::new(0);
    bar.set_style(
        ProgressStyle::with_template("{msg} [{bar:30}] {pos}/{len} messages ({per_sec}, eta {eta})")
            .expect("the template is a constant and valid")
            .progress_chars("=> "),
    );
    bar.set_message(format!("import {}", file.display()));
    let report = memsift_engine::ingest::import_file(app, file, format, &|n_done, n_total| {
        bar.set_length(n_total);
        bar.set_position(n_done);
    })
    .await?;
    bar.finish_and_clear();
    Ok(report)
}

/// `memsift reembed`: a vector of the configured embedder for every active memory.
pub(super) async fn reembed(app: &App, page: i64, json: bool) -> anyhow::Result<()> {
    let bar = ProgressBar::new_spinner();
    bar.set_message("reembed");
    let report =
        memsift_engine::embedding::reembed(&app.store, &app.vectors, page, &|n_done| bar.set_position(n_done)).await?;
    bar.finish_and_clear();
    if json {
        render::print_json(&report)?;
    } else {
        println!(
            "reembed: {} memories embedded with {} ({} had a vector of another model), {} users",
            report.n_memories, report.model_id, report.n_replaced, report.n_users
        );
    }
    Ok(())
}

pub(super) async fn replay(
    app: &App,
    requests: Vec<String>,
    user: Option<String>,
    dry_run: bool,
    json: bool,
) -> anyhow::Result<()> {
    let mut ids = Vec::with_capacity(requests.len());
    for id in &requests {
        ids.push(memsift_core::RequestId::parse(
            &resolve_id(app, IdKind::Request, id, None).await?,
        )?);
    }
    if let Some(user) = &user {
        for row in app
            .store
            .listing()
            .list_requests(Some(user), Some("applied"), None)
            .await?
        {
            if row.purpose == "extraction" {
                ids.push(memsift_core::RequestId::parse(&row.id)?);
            }
        }
    }
    let context = app.apply_context();
    let mut reports = Vec::with_capacity(ids.len());
    for id in ids {
        reports.push(memsift_engine::apply::replay_request(&context, id, dry_run).await?);
    }
    if json {
        return render::print_json(&reports);
    }
    let verb = if dry_run { "would write" } else { "wrote" };
    for report in &reports {
        println!(
            "replay: request {}: {verb} {} memories; dropped {:?}{}",
            report.request_id,
            report.new_memories.len(),
            report.dropped_by_reason,
            report
                .operation_id
                .as_ref()
                .map(|id| format!("; journaled as operation {id}"))
                .unwrap_or_default()
        );
        for text in &report.new_memories {
            println!("  + {text}");
        }
    }
    let total: usize = reports.iter().map(|report| report.new_memories.len()).sum();
    println!("replay: {} requests, {total} memories {verb}", reports.len());
    Ok(())
}

/// `memsift erase`: only with `--yes`; prints the receipt.
pub(super) async fn erase(app: &App, user: &str, yes: bool, json: bool) -> anyhow::Result<()> {
    if !yes {
        anyhow::bail!(
            "erase: refusing to erase user `{user}` without --yes; erasure removes their memories and conversations for good"
        );
    }
    let receipt = memsift_engine::erase::erase_user(app, user).await?;
    if json {
        render::print_json(&receipt)?;
    } else {
        println!("{}", render::erasure_receipt(&receipt));
    }
    Ok(())
}

/// `memsift extract`: one segment, or every closed one that is due.
pub(super) async fn extract(app: &App, segment: Option<String>, json: bool) -> anyhow::Result<()> {
    let report = match segment {
        Some(segment) => {
            let segment_id = SegmentId::parse(&resolve_id(app, IdKind::Segment, &segment, None).await?)?;
            pipeline::run_segment_until_done(app, segment_id).await?
        }
        None => pipeline::run_until_idle(app).await?,
    };
    print_step("extract", &report, json)
}

/// `memsift run`: until idle (with its phase profile on `--timings`), or step after step until
/// Ctrl-C.
pub(super) async fn run(
    app: &App,
    until_idle: bool,
    interval_secs: u64,
    timings: bool,
    json: bool,
) -> anyhow::Result<()> {
    if !until_idle {
        let mut signals = crate::signals::Signals::os()?;
        loop {
            let mut step = pipeline::run_once(app).await?;
            step.n_turns_embedded = pipeline::index_turns_pass(app).await?;
            if step.progressed() || step.n_turns_embedded > 0 {
                print_step("run", &step, json)?;
            }
            tokio::select! {
                signal = signals.next() => {
                    tracing::info!(signal, "Stopping between steps.");
                    return Ok(());
                }
                _ = tokio::time::sleep(std::time::Duration::from_secs(interval_secs)) => {}
            }
        }
    }
    if timings {
        memsift_engine::timings::enable();
    }
    let report = pipeline::run_until_idle(app).await?;
    print_step("run", &report, json)?;
    if timings {
        let report = format!("{}{}", memsift_engine::timings::report(), texts_embedded(&app.vectors));
        // Beside JSON output the breakdown goes to stderr, so stdout stays one document.
        if json {
            eprint!("{report}");
        } else {
            print!("{report}");
        }
    }
    Ok(())
}

/// `memsift retention`: raw outputs past their days dropped.
pub(super) async fn retention(app: &App) -> anyhow::Result<()> {
    let n_dropped = pipeline::apply_retention(app).await?;
    println!(
        "retention: {n_dropped} raw outputs older than {} days dropped",
        app.config.retention.raw_output_days
    );
    Ok(())
}

/// `memsift score`: importance recalculated, the lowest archived under the floor.
pub(super) async fn score(app: &App, json: bool) -> anyhow::Result<()> {
    let report = pipeline::score(app).await?;
    if json {
        render::print_json(&report)?;
    } else {
        println!(
            "score: {} memories of {} users scored; {} archived under the floor, {} spared by the per-run cap",
            report.n_scored, report.n_users, report.n_archived, report.n_spared_by_cap
        );
    }
    Ok(())
}

/// `memsift postprocess`: each stage planned, run and reported.
pub(super) async fn postprocess(
    app: &App,
    stage: StageArg,
    user: Option<String>,
    dry_run: bool,
    plan_only: bool,
    json: bool,
) -> anyhow::Result<()> {
    for stage in stage.stages() {
        let report = pipeline::run_stage(app, stage, user.as_deref(), dry_run, !plan_only).await?;
        if json {
            render::print_json(&report)?;
        } else {
            print!("{}", report.describe());
        }
    }
    Ok(())
}

/// `memsift postprocess review-backlog`: prints how many review requests the backlog needs and
/// their estimated cost; only `--yes` plans them (and, without `--plan-only`, runs them).
pub(super) async fn review_backlog(
    app: &App,
    user: Option<String>,
    plan_only: bool,
    yes: bool,
    json: bool,
) -> anyhow::Result<()> {
    let plan = memsift_engine::stages::review_backlog(app, user.as_deref(), !yes).await?;
    if json {
        render::print_json(&plan)?;
    } else {
        let estimate = &plan.estimate;
        let priced = if plan.n_requests == 0 || estimate.usd == 0.0 {
            String::new()
        } else if estimate.learned {
            format!(
                " (output priced at {} tokens a review, learned from recent reviews)",
                estimate.output_tokens_each
            )
        } else {
            format!(
                " (output priced at max_tokens = {}: fewer than {} reviews answered to learn from)",
                estimate.output_tokens_each,
                memsift_engine::budget::ALLOWANCE_MIN_SAMPLES
            )
        };
        println!(
            "review backlog: {} memories without a review, {} review request(s), estimated ${:.4}{priced}",
            plan.n_memories, plan.n_requests, estimate.usd
        );
        if !yes {
            println!("nothing planned or spent; run again with --yes to plan them");
        }
    }
    if yes && !plan_only {
        let report = pipeline::run_until_idle(app).await?;
        print_step("review backlog", &report, json)?;
    }
    Ok(())
}

pub(super) fn print_step(verb: &str, report: &pipeline::StepReport, json: bool) -> anyhow::Result<()> {
    if json {
        return render::print_json(report);
    }
    println!("{}", step_summary(verb, report));
    Ok(())
}

/// The one-line summary of a run (or a step) that `extract`, `run` and `sweep` print.
pub fn step_summary(verb: &str, report: &pipeline::StepReport) -> String {
    format!(
        "{verb}: {} segments extracted, {} memories written, {} items dropped, {} attempts failed ({} requests out of attempts), {} idle segments closed, {} turns indexed for search",
        report.n_segments_extracted,
        report.n_memories,
        report.n_items_dropped,
        report.n_failed_attempts(),
        report.n_requests_dead,
        report.n_segments_closed,
        report.n_turns_embedded
    )
}

/// The `run --timings` line that says how many texts were embedded, and why: each turn at most
/// once, each item at most once, and nothing for planning.
fn texts_embedded(vectors: &memsift_engine::embedding::Vectors) -> String {
    use memsift_engine::embedding::EmbedPurpose;
    let counts: Vec<String> = EmbedPurpose::ALL
        .into_iter()
        .map(|purpose| format!("{} {}", purpose.as_str(), vectors.n_embedded(purpose)))
        .collect();
    format!("texts embedded, by purpose: {}\n", counts.join(", "))
}
