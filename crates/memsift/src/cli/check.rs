//! `memsift check-config`: every problem of a configuration in one answer, and with `--probe`
//! whether each provider section is reachable as configured.

use anyhow::Context;
use memsift_engine::setup::database_url;
use memsift_store::redact;

use super::args::Cli;
use crate::render;

/// Checks `config` (read from `cli.config`, or the built-in defaults) and says what is wrong.
pub(super) async fn check_config(config: &memsift_core::config::Config, cli: &Cli, probe: bool) -> anyhow::Result<()> {
    let mut problems: Vec<String> = config
        .llm
        .iter()
        .flat_map(|(key, llm)| memsift_llm::validate_llm_config(key, llm))
        .map(|problem| problem.to_string())
        .collect();
    // A section no route reaches is a typo or a tier left out: refused here, where an
    // operator asks whether the file means what they think. Only the file's own sections
    // count; the built-in defaults' are there for the default tier.
    if let Some(path) = &cli.config {
        let text = memsift_core::config::read_config_text(path).context("check-config")?;
        let declared = memsift_core::config::declared_llm_sections(&text);
        problems.extend(
            config
                .unreached_llm_sections(&declared)
                .into_iter()
                .map(|problem| problem.to_string()),
        );
    }
    if let Err(error) = crate::daemon::parse_schedules(&config.schedules) {
        problems.push(error.to_string());
    }
    let url = database_url(config, cli.database.as_deref())?;
    let mut database_tls = None;
    if let Err(unclear) = memsift_core::redact::check_unambiguous(&url) {
        problems.push(format!("database {unclear}"));
    } else {
        match memsift_store::check_database_tls(&url) {
            Ok(settings) => database_tls = settings,
            Err(problem) => problems.push(problem.to_string()),
        }
    }
    if !problems.is_empty() {
        anyhow::bail!("{}", problems.join("\n"));
    }
    let prompts = match &config.prompts.dir {
        Some(dir) => memsift_core::prompt::PromptRegistry::with_overrides(dir)?,
        None => memsift_core::prompt::PromptRegistry::built_in(),
    };
    memsift_engine::setup::check_chunk_budget(config, &prompts, chrono::Utc::now())?;
    for warning in memsift_llm::cache_warnings(config, &prompts) {
        println!("warning: {warning}");
    }
    println!(
        "config ok: {}; database {}{}; tiers {:?}; llm keys {:?}",
        cli.config
            .as_ref()
            .map(|path| path.display().to_string())
            .unwrap_or_else(|| "built-in defaults".to_owned()),
        redact(&url),
        database_tls
            .map(|settings| format!(" ({})", settings.describe()))
            .unwrap_or_default(),
        config.billing.tiers,
        config.llm.keys().collect::<Vec<_>>()
    );
    if probe {
        let reports = crate::probe::probe_all(config).await?;
        if cli.json {
            render::print_json(&reports)?;
        } else {
            for report in &reports {
                println!("{}", report.line());
            }
        }
        let unreachable = reports.iter().filter(|report| !report.reachable).count();
        if unreachable > 0 {
            anyhow::bail!(
                "check-config --probe: {unreachable} of {} provider sections are not reachable as configured",
                reports.len()
            );
        }
    }
    Ok(())
}
