//! Commands that serve or build rather than read the store: the provider simulator, the HTTP
//! API, the embedding model's install and the static embedder's distillation.

use anyhow::Context;
use memsift_engine::app::App;

/// `memsift sim`: the provider simulator until Ctrl-C, with the configuration's `[prices]`: each
/// model's cache rules, context window and output cap are the ones memsift plans with.
pub(super) async fn run_sim(
    memsift_config: &memsift_core::config::Config,
    listen: &str,
    responder: &str,
    faults: Option<&std::path::Path>,
) -> anyhow::Result<()> {
    use std::io::Write;

    let config = memsift_sim::SimConfig::from_cli(responder, faults)?.with_prices(memsift_config.prices.clone());
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .with_context(|| format!("sim: cannot listen on {listen}"))?;
    println!("listening on http://{}", listener.local_addr()?);
    std::io::stdout().flush()?;
    memsift_sim::serve(listener, config, async {
        let _ = tokio::signal::ctrl_c().await;
    })
    .await?;
    Ok(())
}

/// `memsift distill`: the static embedder, distilled from MiniLM.
pub(super) async fn distill(
    config: &memsift_core::config::Config,
    out: &std::path::Path,
    dims: usize,
    model_dir: Option<&std::path::Path>,
) -> anyhow::Result<()> {
    let dir = model_dir
        .map(std::path::Path::to_path_buf)
        .unwrap_or_else(|| memsift_engine::embedding::minilm_dir(&config.embeddings));
    memsift_embed::model::verify(&dir).context("distill: the MiniLM model is needed")?;
    let out = out.to_owned();
    let report = tokio::task::spawn_blocking(move || -> anyhow::Result<memsift_embed::DistillReport> {
        let model = memsift_embed::MiniLmEmbedder::load(&dir)?;
        Ok(memsift_embed::distill_static(&model, &out, dims)?)
    })
    .await??;
    println!(
        "distill: wrote {} ({} rows x {} dims, model id {}); use it with [embeddings] backend = \"static\", model_dir = \"{}\"",
        report.dir.display(),
        report.rows,
        report.dimension,
        report.model_id,
        report.dir.display()
    );
    Ok(())
}

/// `memsift model install`: the pinned files, verified, in the configured model directory.
pub(super) async fn install_model(
    config: &memsift_core::config::Config,
    dir: Option<&std::path::Path>,
) -> anyhow::Result<()> {
    let dir = dir
        .map(std::path::Path::to_path_buf)
        .unwrap_or_else(|| memsift_engine::embedding::minilm_dir(&config.embeddings));
    let n_files = memsift_embed::model::pinned_files().len();
    let installed = tokio::task::spawn_blocking(move || memsift_embed::model::install(&dir))
        .await
        .context("model: the install task ended abnormally")?
        .context("model install")?;
    if installed.fetched {
        println!(
            "model: installed the pinned all-MiniLM-L6-v2 in {} ({n_files} files, each matching its SHA-256 pin)",
            installed.dir.display()
        );
    } else {
        println!(
            "model: {} already holds the pinned all-MiniLM-L6-v2 ({n_files} files, each matching its SHA-256 pin)",
            installed.dir.display()
        );
    }
    Ok(())
}

/// `memsift serve`: the HTTP API until Ctrl-C.
pub(super) async fn serve_api(app: &App, listen: Option<&str>) -> anyhow::Result<()> {
    use std::io::Write;

    let token = crate::api::ApiToken::load(&app.config.api)?;
    let listen = listen.unwrap_or(&app.config.api.listen);
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .with_context(|| format!("serve: cannot listen on {listen}; pass --listen or set [api] listen"))?;
    println!("listening on http://{}", listener.local_addr()?);
    std::io::stdout().flush()?;
    let mut signals = crate::signals::Signals::os()?;
    crate::api::serve(app.clone(), token, listener, async move {
        let signal = signals.next().await;
        tracing::info!(
            signal,
            "Stopping: no new connections; finishing the requests in flight."
        );
    })
    .await
    .context("serve: the HTTP server failed")
}
