//! The application: configuration, store, clock and prompts, built once and shared by every command.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;
use memsift_core::config::{Config, ProviderKind, default_data_dir};
use memsift_core::prompt::PromptRegistry;
use memsift_core::{Clock, SystemClock};
use memsift_store::{Store, StoreOptions, redact};

/// Everything a command needs.
#[derive(Clone)]
pub struct App {
    /// Validated configuration.
    pub config: Config,
    /// The store, migrated.
    pub store: Store,
    /// The clock every time-dependent decision reads.
    pub clock: Arc<dyn Clock>,
    /// Prompts, with their versions.
    pub prompts: PromptRegistry,
    /// This process's name in claims (`host:pid`).
    pub worker_id: String,
}

/// Where the database is, as the operator asked for it.
pub fn database_url(config: &Config, flag: Option<&str>) -> anyhow::Result<String> {
    if let Some(url) = flag.filter(|url| !url.is_empty()) {
        return Ok(url.to_owned());
    }
    if let Some(url) = config.database.url.as_deref() {
        return Ok(url.to_owned());
    }
    let dir = default_data_dir();
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create the data directory {}", dir.display()))?;
    Ok(sqlite_url(&dir.join("memsift.db")))
}

/// The `sqlite://` URL of a file.
pub fn sqlite_url(path: &Path) -> String {
    format!("sqlite://{}", path.display())
}

/// Loads the configuration: built-in defaults overlaid by `path`, then checked.
pub fn load_config(path: Option<&Path>) -> anyhow::Result<Config> {
    let config = match path {
        Some(path) => Config::load(path)?,
        None => Config::defaults(),
    };
    check_lanes(&config)?;
    Ok(config)
}

/// Refuses providers whose lanes this build cannot drive yet, at start-up rather than per segment.
fn check_lanes(config: &Config) -> anyhow::Result<()> {
    for (key, llm) in &config.llm {
        if llm.provider != ProviderKind::Heuristic {
            anyhow::bail!(
                "config: [llm.{key}] uses provider `{}`, whose lanes are not wired into extraction in this build; use provider = \"heuristic\"",
                serde_json::to_value(llm.provider)?.as_str().unwrap_or("?")
            );
        }
    }
    Ok(())
}

impl App {
    /// Opens the store at `url`, migrates it and loads the prompts.
    pub async fn open(config: Config, url: &str, clock: Arc<dyn Clock>) -> anyhow::Result<App> {
        let options = StoreOptions {
            max_connections: config.database.max_connections,
            sqlite_synchronous_full: config.database.sqlite_synchronous == "full",
            ..StoreOptions::default()
        };
        let store = Store::connect(url, &options)
            .await
            .with_context(|| format!("cannot open database {}", redact(url)))?;
        store.migrate().await.context("cannot migrate the database")?;
        let prompts = match &config.prompts.dir {
            Some(dir) => PromptRegistry::with_overrides(dir)?,
            None => PromptRegistry::built_in(),
        };
        let host = std::env::var("HOSTNAME").unwrap_or_else(|_| "localhost".to_owned());
        Ok(App {
            config,
            store,
            clock,
            prompts,
            worker_id: format!("{host}:{}", std::process::id()),
        })
    }

    /// Opens with the wall clock.
    pub async fn open_with_system_clock(config: Config, url: &str) -> anyhow::Result<App> {
        App::open(config, url, Arc::new(SystemClock)).await
    }
}

/// The demo database: `<data dir>/memsift-demo.db`, recreated on every run.
pub fn demo_database_path() -> PathBuf {
    default_data_dir().join("memsift-demo.db")
}
