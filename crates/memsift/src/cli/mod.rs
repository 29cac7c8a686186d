//! The command line: every subcommand, parsed by clap (`args`) and dispatched to the engine, one
//! module per kind of command.

mod args;
mod check;
mod ids;
mod listings;
mod revise;
mod search;
mod tools;
mod work;

use memsift_engine::app::App;
use memsift_engine::setup::{database_url, load_config};

pub use args::{Cli, Command, EvalCommand, MemoryAction, ModelAction, RevisionArgs, StageArg};
pub use work::{import_file, step_summary};

/// Runs one parsed command line.
/// Runs one parsed command line.
pub async fn run(cli: Cli) -> anyhow::Result<()> {
    let config = load_config(cli.config.as_deref())?;
    if let Command::Demo { lane } = cli.command {
        return crate::demo::run(config, lane).await;
    }
    if let Command::Eval { what } = cli.command {
        return search::eval(config, what, cli.json).await;
    }
    if let Command::Sim {
        listen,
        responder,
        faults,
    } = &cli.command
    {
        return tools::run_sim(&config, listen, responder, faults.as_deref()).await;
    }
    if let Command::Distill { out, dims, model_dir } = &cli.command {
        return tools::distill(&config, out, *dims, model_dir.as_deref()).await;
    }
    if let Command::Model {
        action: ModelAction::Install { dir },
    } = &cli.command
    {
        return tools::install_model(&config, dir.as_deref()).await;
    }
    if let Command::CheckConfig { probe } = cli.command {
        return check::check_config(&config, &cli, probe).await;
    }
    // The daemon's API token is checked before anything starts: one that is there but unusable
    // (unreadable, empty, too short) is a mistake to fix, not a wish to run without the API.
    let daemon_token = if matches!(cli.command, Command::Daemon) {
        match crate::api::ApiToken::load(&config.api) {
            Ok(token) => Some(token),
            Err(error @ crate::api::TokenError::Missing) => {
                tracing::warn!(%error, "HTTP API off.");
                None
            }
            Err(error) => return Err(error.into()),
        }
    } else {
        None
    };
    let url = database_url(&config, cli.database.as_deref())?;
    let app = App::open_with_system_clock(config, &url).await?;
    if let Command::Daemon = cli.command {
        return crate::daemon::run(app, daemon_token, crate::signals::Signals::os()?).await;
    }
    let result = dispatch(&app, cli.command, cli.json).await;
    app.store.close().await;
    result
}

async fn dispatch(app: &App, command: Command, json: bool) -> anyhow::Result<()> {
    let embeds = matches!(
        command,
        Command::Extract { .. }
            | Command::Run { .. }
            | Command::Sweep
            | Command::Reembed { .. }
            | Command::Replay { .. }
            | Command::Search { .. }
    );
    if embeds {
        // Report a missing model before any work starts, not halfway through a run.
        app.vectors.check()?;
    }
    match command {
        Command::Demo { .. }
        | Command::CheckConfig { .. }
        | Command::Sim { .. }
        | Command::Distill { .. }
        | Command::Model { .. }
        | Command::Eval { .. }
        | Command::Daemon => {
            unreachable!("handled before the store is opened")
        }
        Command::Migrate => println!("migrate: schema is up to date"),
        Command::Serve { listen } => tools::serve_api(app, listen.as_deref()).await?,
        Command::Import { format, files } => work::import(app, format, files, json).await?,
        Command::Reembed { page } => work::reembed(app, page, json).await?,
        Command::Replay {
            requests,
            user,
            dry_run,
        } => work::replay(app, requests, user, dry_run, json).await?,
        Command::Erase { user, yes } => work::erase(app, &user, yes, json).await?,
        Command::Extract { pending: _, segment } => work::extract(app, segment, json).await?,
        Command::Run {
            until_idle,
            interval_secs,
            timings,
        } => work::run(app, until_idle, interval_secs, timings, json).await?,
        Command::Sweep => {
            let report = memsift_engine::pipeline::sweep(app).await?;
            work::print_step("sweep", &report, json)?;
        }
        Command::Retention => work::retention(app).await?,
        Command::Score => work::score(app, json).await?,
        Command::Postprocess {
            stage,
            user,
            dry_run,
            plan_only,
            yes,
        } => match stage {
            StageArg::ReviewBacklog => work::review_backlog(app, user, plan_only, yes, json).await?,
            _ => work::postprocess(app, stage, user, dry_run, plan_only, json).await?,
        },
        Command::Segments { user, status, limit } => listings::segments(app, user, status, limit, json).await?,
        Command::Memories { user, limit } => listings::memories(app, &user, limit, json).await?,
        Command::Requests { user, status, limit } => listings::requests(app, user, status, limit, json).await?,
        Command::Batches { status, limit } => listings::batches(app, status, limit, json).await?,
        Command::Costs => listings::costs(app, json).await?,
        Command::Show { id } => listings::show(app, &id, json).await?,
        Command::Memory { action } => revise::memory(app, action, json).await?,
        Command::Undo { user, operation } => revise::undo(app, &user, &operation, json).await?,
        Command::Cancel { batch } => revise::cancel(app, &batch).await?,
        Command::Search {
            user,
            query,
            k,
            budget_tokens,
            include_turns,
            since,
            until,
        } => {
            let request = memsift_engine::search::SearchRequest {
                k,
                budget_tokens,
                include_turns,
                since: search::parse_time("--since", since.as_deref())?,
                until: search::parse_time("--until", until.as_deref())?,
                ..memsift_engine::search::SearchRequest::new(user, query)
            };
            search::search(app, &request, json).await?
        }
    }
    Ok(())
}
