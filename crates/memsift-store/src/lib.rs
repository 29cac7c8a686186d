//! Storage for memsift on SQLite (the embedded default) and PostgreSQL (shared production store).
//!
//! **Architecture invariant:** every SQL statement of the project lives in this crate. Callers see
//! typed rows and typed ids, never a pool or a query string.
//!
//! One `Store` serves both backends, and the SQL text is shared (`$1` placeholders, `ON CONFLICT`,
//! `RETURNING` work on both); only the few statements that must differ (claims with
//! `FOR UPDATE SKIP LOCKED`) branch on the backend. Every write runs in `Store::write` (module
//! `tx`), which commits exactly when its body returns `Ok`; reads run on the pool through
//! [`on_pool`]. Write transactions on SQLite start with `BEGIN IMMEDIATE`, so two writers queue on
//! `busy_timeout` instead of failing with `SQLITE_BUSY`.

#![deny(missing_docs)]

use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use sqlx::migrate::Migrator;
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{ConnectOptions, Connection};

mod erasure;
mod extraction;
#[cfg(feature = "test-support")]
mod fixtures;
mod health;
mod ingest;
mod journal;
mod lifecycle;
mod listing;
mod memory_insert;
mod schedules;
mod scoring;
mod stage;
#[cfg(feature = "test-support")]
pub mod testing;
mod tx;
mod vectors;
mod work;

pub use erasure::ErasureReceipt;
pub use extraction::{ApplyInput, ApplyOutcome, ClaimedSegment, ItemEmbeddings, NewRequest, SegmentTurn, StoredOutput};
#[cfg(feature = "test-support")]
pub use fixtures::UserRows;
pub use health::{LaneHealthRow, LaneTransition, ReconcileMiss, Reroute, WaitingRequest};
pub use ingest::{ClosedSegment, IngestReport, NewMessage};
pub use lifecycle::{MemoryState, Revised, Revision, Undone};
pub use listing::{CostRow, Counts, MemoryRow, MetricsSnapshot, RequestDetail, RequestRow, SegmentRow, UsageTotals};
pub use schedules::ScheduleRow;
pub use scoring::{ScoringPolicy, ScoringReport, importance};
pub use stage::{
    Covered, EntityDecision, EntityRow, NewLink, ProposalToReview, RefinementRules, Replacement, ReviewMemory, RunCap,
    StageApplied, StageMemory, StageOutcome,
};
pub use tx::{storable_json, storable_text};
pub use vectors::{
    LoadedIndex, MemoryToEmbed, MemoryVector, Neighbour, UserVectors, VectorCache, VectorIndex, VectorIndexError, dot,
    vector_from_le_bytes, vector_to_le_bytes,
};
pub use work::{ApplyFailure, BatchRow, PackPolicy, PackedBatch, ReplanReport, RequestUsage, WorkRequest};

static SQLITE_MIGRATOR: Migrator = sqlx::migrate!("../../migrations/sqlite");
static POSTGRES_MIGRATOR: Migrator = sqlx::migrate!("../../migrations/postgres");

/// A storage failure, split by what the caller can do about it.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The database URL is malformed or names an unsupported backend.
    #[error("database URL `{url}` is not usable: {reason}; use sqlite://PATH or postgres://USER@HOST/DB")]
    BadUrl {
        /// The URL with any password removed.
        url: String,
        /// Why.
        reason: String,
    },
    // The driver's error is part of each message below and deliberately not a `source`: a chain
    // printed with `{:#}` would otherwise repeat it once per layer.
    /// The database could not be reached or opened.
    #[error("cannot open the {backend} database: {cause}")]
    Connect {
        /// `sqlite` or `postgres`.
        backend: &'static str,
        /// The driver's error.
        cause: sqlx::Error,
    },
    /// Applying migrations failed.
    #[error("database migration failed: {0}")]
    Migrate(sqlx::migrate::MigrateError),
    /// A statement failed; transient on PostgreSQL connection loss, a bug otherwise.
    #[error("database error: {0}")]
    Sql(sqlx::Error),
    /// A stored value does not parse (a row written by a newer memsift, or by hand).
    #[error("corrupt row in {table}: {detail}")]
    Corrupt {
        /// The table.
        table: &'static str,
        /// What is wrong.
        detail: String,
    },
    /// Something the caller named does not exist.
    #[error("{0}")]
    NotFound(String),
    /// The caller asked for something the data does not allow; the message says what to do.
    #[error("{0}")]
    Invalid(String),
}

impl From<sqlx::Error> for StoreError {
    fn from(error: sqlx::Error) -> Self {
        StoreError::Sql(error)
    }
}

impl From<sqlx::migrate::MigrateError> for StoreError {
    fn from(error: sqlx::migrate::MigrateError) -> Self {
        StoreError::Migrate(error)
    }
}

impl StoreError {
    /// Whether the database itself was unreachable or busy (a dropped connection, a pool timeout,
    /// a lock wait that ran out), so the same call may succeed later. Such a failure says nothing
    /// about the item being written and must not count against it.
    pub fn is_transient(&self) -> bool {
        match self {
            StoreError::Sql(error) | StoreError::Connect { cause: error, .. } => {
                matches!(
                    error,
                    sqlx::Error::Io(_)
                        | sqlx::Error::PoolTimedOut
                        | sqlx::Error::PoolClosed
                        | sqlx::Error::WorkerCrashed
                        | sqlx::Error::Protocol(_)
                ) || matches!(error, sqlx::Error::Database(db) if is_busy_or_lost(db.as_ref()))
            }
            _ => false,
        }
    }
}

/// SQLite `SQLITE_BUSY`/`SQLITE_LOCKED`, PostgreSQL connection, serialization and deadlock
/// failures, and admin shutdowns: conditions of the database, not of the statement.
fn is_busy_or_lost(error: &dyn sqlx::error::DatabaseError) -> bool {
    let code = error.code();
    let code = code.as_deref().unwrap_or_default();
    matches!(code, "5" | "6" | "261" | "517")
        || code.starts_with("08")
        || matches!(code, "40001" | "40P01" | "57P01" | "57P02" | "57P03")
}

/// A result with [`StoreError`].
pub type Result<T, E = StoreError> = std::result::Result<T, E>;

/// Connection settings that do not belong in the URL.
#[derive(Clone, Debug)]
pub struct StoreOptions {
    /// Pool size.
    pub max_connections: u32,
    /// SQLite: `synchronous=FULL` when true, `NORMAL` otherwise.
    pub sqlite_synchronous_full: bool,
    /// SQLite: how long a writer waits for the lock.
    pub sqlite_busy_timeout: Duration,
}

impl Default for StoreOptions {
    fn default() -> Self {
        Self {
            max_connections: 8,
            sqlite_synchronous_full: true,
            sqlite_busy_timeout: Duration::from_secs(10),
        }
    }
}

/// Which database a store talks to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BackendKind {
    /// The embedded default.
    Sqlite,
    /// The shared production store.
    Postgres,
}

#[derive(Clone, Debug)]
pub(crate) enum Backend {
    Sqlite(SqlitePool),
    Postgres(PgPool),
}

/// The store: a pool on one backend.
#[derive(Clone, Debug)]
pub struct Store {
    pub(crate) backend: Backend,
}

/// Runs `$body` with `$pool` bound to the concrete pool of either backend.
macro_rules! on_pool {
    ($store:expr, |$pool:ident| $body:expr) => {
        match &$store.backend {
            $crate::Backend::Sqlite($pool) => $body,
            $crate::Backend::Postgres($pool) => $body,
        }
    };
}
pub(crate) use on_pool;

impl Store {
    /// Opens the database at `url` (`sqlite://PATH`, `sqlite::memory:` or `postgres://…`).
    pub async fn connect(url: &str, options: &StoreOptions) -> Result<Store> {
        if url.starts_with("sqlite:") {
            let connect_options = SqliteConnectOptions::from_str(url).map_err(|error| StoreError::BadUrl {
                url: redact(url),
                reason: error.to_string(),
            })?;
            Store::open_sqlite(connect_options, options).await
        } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            let connect_options = PgConnectOptions::from_str(url).map_err(|error| StoreError::BadUrl {
                url: redact(url),
                reason: error.to_string(),
            })?;
            Store::open_postgres(connect_options, options).await
        } else {
            Err(StoreError::BadUrl {
                url: redact(url),
                reason: "unknown scheme".to_owned(),
            })
        }
    }

    /// Opens (creating if missing) the SQLite file at `path`.
    pub async fn open_sqlite_file(path: &Path, options: &StoreOptions) -> Result<Store> {
        Store::open_sqlite(SqliteConnectOptions::new().filename(path), options).await
    }

    async fn open_sqlite(connect_options: SqliteConnectOptions, options: &StoreOptions) -> Result<Store> {
        // Settings go through the connect options so every pooled connection has them; a
        // `PRAGMA` sent through the pool would reach only whichever connection ran it.
        let connect_options = connect_options
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .busy_timeout(options.sqlite_busy_timeout)
            .foreign_keys(true)
            .synchronous(if options.sqlite_synchronous_full {
                SqliteSynchronous::Full
            } else {
                SqliteSynchronous::Normal
            });
        let pool = SqlitePoolOptions::new()
            .max_connections(options.max_connections.max(1))
            .connect_with(connect_options)
            .await
            .map_err(|cause| StoreError::Connect {
                backend: "sqlite",
                cause,
            })?;
        Ok(Store {
            backend: Backend::Sqlite(pool),
        })
    }

    async fn open_postgres(connect_options: PgConnectOptions, options: &StoreOptions) -> Result<Store> {
        let pool = PgPoolOptions::new()
            .max_connections(options.max_connections.max(1))
            .acquire_timeout(Duration::from_secs(30))
            .connect_with(connect_options)
            .await
            .map_err(|cause| StoreError::Connect {
                backend: "postgres",
                cause,
            })?;
        Ok(Store {
            backend: Backend::Postgres(pool),
        })
    }

    /// Applies every pending migration of this backend.
    pub async fn migrate(&self) -> Result<()> {
        self.migrate_up_to(None).await
    }

    /// Applies the pending migrations up to `version` (all when `None`); tests use a version to
    /// fill an older schema before migrating it.
    ///
    /// On SQLite the migrations run on a connection of their own with foreign keys off: a
    /// migration that rebuilds a table (SQLite's only way to change a constraint) drops the old
    /// one, and with foreign keys on that drop would fire every `ON DELETE` action on the rows
    /// pointing at it. Each such migration checks the foreign keys itself before it commits.
    pub async fn migrate_up_to(&self, version: Option<i64>) -> Result<()> {
        let up_to = |migrator: &Migrator| Migrator {
            migrations: migrator
                .migrations
                .iter()
                .filter(|migration| version.is_none_or(|version| migration.version <= version))
                .cloned()
                .collect(),
            ..Migrator::DEFAULT
        };
        match &self.backend {
            Backend::Sqlite(pool) => {
                let options = (*pool.connect_options()).clone().foreign_keys(false);
                let mut connection = options.connect().await.map_err(|cause| StoreError::Connect {
                    backend: "sqlite",
                    cause,
                })?;
                up_to(&SQLITE_MIGRATOR).run(&mut connection).await?;
                connection.close().await?;
            }
            Backend::Postgres(pool) => up_to(&POSTGRES_MIGRATOR).run(pool).await?,
        }
        Ok(())
    }

    /// Which backend this store uses.
    pub fn kind(&self) -> BackendKind {
        match &self.backend {
            Backend::Sqlite(_) => BackendKind::Sqlite,
            Backend::Postgres(_) => BackendKind::Postgres,
        }
    }

    /// The row-lock clause of a claim's inner SELECT: PostgreSQL skips rows another daemon is
    /// claiming; SQLite needs none, because its single writer makes the claim atomic.
    pub(crate) fn skip_locked(&self) -> &'static str {
        match self.kind() {
            BackendKind::Postgres => "FOR UPDATE SKIP LOCKED",
            BackendKind::Sqlite => "",
        }
    }

    /// Closes the pool; on SQLite this checkpoints the WAL.
    pub async fn close(&self) {
        on_pool!(self, |pool| pool.close().await)
    }
}

/// Removes a password from a URL before it is shown.
pub fn redact(url: &str) -> String {
    match (url.find("://"), url.find('@')) {
        (Some(scheme_end), Some(at)) if at > scheme_end => {
            let credentials = &url[scheme_end + 3..at];
            match credentials.find(':') {
                Some(colon) => format!("{}{}:***{}", &url[..scheme_end + 3], &credentials[..colon], &url[at..]),
                None => url.to_owned(),
            }
        }
        _ => url.to_owned(),
    }
}

pub(crate) fn corrupt(table: &'static str, detail: impl ToString) -> StoreError {
    StoreError::Corrupt {
        table,
        detail: detail.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_never_reach_an_error_message() {
        assert_eq!(
            redact("postgres://memsift:hunter2@db/memsift"),
            "postgres://memsift:***@db/memsift"
        );
        assert_eq!(redact("postgres://memsift@db/memsift"), "postgres://memsift@db/memsift");
        assert_eq!(
            redact("sqlite:///var/lib/memsift/memsift.db"),
            "sqlite:///var/lib/memsift/memsift.db"
        );
    }
}
