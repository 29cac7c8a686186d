//! Where a command's database, configuration and erasure key come from: the operator's flags,
//! environment and files, resolved before an [`crate::app::App`] is opened; and the one check of
//! the configuration that needs the prompts (the chunk budget holds the extraction prompt).

use std::path::{Path, PathBuf};

use anyhow::Context;
use memsift_core::config::{Config, ConfigError, default_data_dir};
use memsift_core::prompt::PromptRegistry;

/// The variable naming the database (clap reads it into `--database`).
pub const DATABASE_URL_ENV: &str = "MEMSIFT_DATABASE_URL";

/// Where the database is, as the operator asked for it. A blank `--database` or
/// `MEMSIFT_DATABASE_URL` is an error: it once meant the default file, silently, so a variable
/// meant to name a PostgreSQL database that came out empty wrote to a local file instead.
pub fn database_url(config: &Config, flag: Option<&str>) -> anyhow::Result<String> {
    let from_env = std::env::var_os(DATABASE_URL_ENV);
    if flag.is_some_and(|url| url.trim().is_empty()) || (flag.is_none() && from_env.is_some_and(|url| url.is_empty())) {
        anyhow::bail!(
            "the database URL (--database or {DATABASE_URL_ENV}) is empty; name sqlite://PATH or postgres://USER@HOST/DB, or unset it for the default file"
        );
    }
    if let Some(url) = flag {
        return Ok(url.to_owned());
    }
    if let Some(url) = config.database.url.as_deref() {
        return Ok(url.to_owned());
    }
    let dir = default_data_dir();
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create the data directory {}", dir.display()))?;
    Ok(sqlite_url(&dir.join("memsift.db")))
}

/// The query parameters sqlx's PostgreSQL driver reads. It logs the name and value of any other
/// (which may be a `sslpassword`, or the tail of a password holding a raw `&`), so the others
/// are dropped before it sees them; it would ignore them anyway.
const POSTGRES_DRIVER_PARAMETERS: [&str; 18] = [
    "sslmode",
    "ssl-mode",
    "sslrootcert",
    "ssl-root-cert",
    "ssl-ca",
    "sslcert",
    "ssl-cert",
    "sslkey",
    "ssl-key",
    "statement-cache-capacity",
    "host",
    "hostaddr",
    "port",
    "dbname",
    "user",
    "password",
    "application_name",
    "options",
];

/// The database URL as the driver gets it. A URL that reads two ways is refused in one line (the
/// driver could name part of the password in an error), and parameters the PostgreSQL driver
/// does not read are dropped with a warning that counts them and names the known ones.
pub fn connectable_url(url: &str) -> anyhow::Result<String> {
    memsift_core::redact::check_unambiguous(url).map_err(|unclear| anyhow::anyhow!("database {unclear}"))?;
    if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) {
        return Ok(url.to_owned());
    }
    let mut parsed = url::Url::parse(url).context("database URL")?;
    let (kept, dropped): (Vec<_>, Vec<_>) = parsed
        .query_pairs()
        .into_owned()
        .partition(|(name, _)| POSTGRES_DRIVER_PARAMETERS.contains(&name.as_str()) || name.starts_with("options["));
    if dropped.is_empty() {
        return Ok(url.to_owned());
    }
    let names: Vec<&str> = dropped
        .iter()
        .map(|(name, _)| memsift_core::redact::shown_parameter_name(name))
        .collect();
    tracing::warn!(
        parameters = names.join(", "),
        "The PostgreSQL driver does not read these database URL parameters; they were ignored (`***`: an unknown name, perhaps the tail of a password holding a raw `&`; percent-encode it as %26)."
    );
    if kept.is_empty() {
        parsed.set_query(None);
    } else {
        parsed.query_pairs_mut().clear().extend_pairs(kept);
    }
    Ok(parsed.to_string())
}

/// The `sqlite://` URL of a file.
pub fn sqlite_url(path: &Path) -> String {
    format!("sqlite://{}", path.display())
}

/// Loads the configuration: built-in defaults overlaid by `path` (read at most
/// `MAX_CONFIG_BYTES`), then checked with the same rules `check-config` applies.
pub fn load_config(path: Option<&Path>) -> anyhow::Result<Config> {
    Ok(match path {
        Some(path) => Config::load(path)?,
        None => Config::defaults(),
    })
}

/// The chunk budget holds the extraction prompt, a chunk's fixed text and room for turns: below
/// it no chunk could be cut under the budget. The same rule for `check-config` and start-up.
pub fn check_chunk_budget(
    config: &Config,
    prompts: &PromptRegistry,
    today: chrono::DateTime<chrono::Utc>,
) -> anyhow::Result<()> {
    let prompt = prompts.get("extraction")?;
    let budget = config.batch.chunk_budget_tokens;
    if let Err(needed) = memsift_payload::check_chunk_budget(prompt, today, budget as usize) {
        return Err(ConfigError::Invalid {
            key: "batch.chunk_budget_tokens".to_owned(),
            value: budget.to_string(),
            fix: format!(
                "the extraction prompt ({}) and a chunk's date line and closing instruction leave under {} tokens for turns; use at least {needed}",
                prompt.version,
                memsift_payload::MIN_TURN_ROOM_TOKENS
            ),
        }
        .into());
    }
    Ok(())
}

/// The erasure key: `MEMSIFT_ERASURE_KEY` (64 hex digits), else `[erasure] key_file`, else
/// `<data dir>/erasure.key`; a key file that does not exist yet is created (mode 0600) with a new
/// random key, so a new install needs nothing set up.
pub fn load_erasure_key(config: &Config) -> anyhow::Result<memsift_store::ErasureKey> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;

    if let Ok(hex) = std::env::var("MEMSIFT_ERASURE_KEY") {
        return memsift_store::ErasureKey::from_hex(&hex).context("MEMSIFT_ERASURE_KEY");
    }
    let path = config
        .erasure
        .key_file
        .clone()
        .unwrap_or_else(|| default_data_dir().join("erasure.key"));
    match std::fs::read_to_string(&path) {
        Ok(text) => {
            memsift_store::ErasureKey::from_hex(&text).with_context(|| format!("erasure key {}", path.display()))
        }
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            if let Some(dir) = path.parent() {
                std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
            }
            // Written whole under a temporary name, then linked into place, which fails if another
            // process starting at the same moment got there first: then its key is the key.
            let key = memsift_store::ErasureKey::generate();
            let temporary = path.with_extension(format!("tmp-{}", std::process::id()));
            let mut file = std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .mode(0o600)
                .open(&temporary)
                .with_context(|| format!("cannot create the erasure key file {}", temporary.display()))?;
            writeln!(file, "{}", key.to_hex())
                .and_then(|()| file.sync_all())
                .with_context(|| format!("cannot write the erasure key file {}", temporary.display()))?;
            let linked = std::fs::hard_link(&temporary, &path);
            let _ = std::fs::remove_file(&temporary);
            match linked {
                Ok(()) => {}
                Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => {
                    let text = std::fs::read_to_string(&path)
                        .with_context(|| format!("cannot read the erasure key file {}", path.display()))?;
                    return memsift_store::ErasureKey::from_hex(&text)
                        .with_context(|| format!("erasure key {}", path.display()));
                }
                Err(error) => {
                    return Err(error)
                        .with_context(|| format!("cannot create the erasure key file {}", path.display()));
                }
            }
            tracing::info!(path = %path.display(), "Created the erasure key; back it up with the database.");
            Ok(key)
        }
        Err(error) => Err(error).with_context(|| format!("cannot read the erasure key file {}", path.display())),
    }
}

/// The demo database: `<data dir>/memsift-demo.db`, recreated on every run.
pub fn demo_database_path() -> PathBuf {
    default_data_dir().join("memsift-demo.db")
}
