//! Storage for memsift on SQLite (the embedded default) and PostgreSQL (shared production store).
//!
//! **Architecture invariant:** every SQL statement of the project lives in this crate. Callers see
//! typed rows and typed ids, never a pool or a query string.
//!
//! One `Store` serves both backends. Each method's body is written once and compiled twice by the
//! [`on_pool`] and [`in_write_tx`] macros, so the SQL text is shared (`$1` placeholders,
//! `ON CONFLICT`, `RETURNING` work on both) and only the few statements that must differ (claims
//! with `FOR UPDATE SKIP LOCKED`) branch on the backend. Write transactions on SQLite start with
//! `BEGIN IMMEDIATE`, so two writers queue on `busy_timeout` instead of failing with `SQLITE_BUSY`.

#![deny(missing_docs)]

use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use sqlx::migrate::Migrator;
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous};

mod erasure;
mod extraction;
mod ingest;
mod lifecycle;
mod listing;
mod postprocess;
mod schedules;
mod scoring;
#[cfg(feature = "test-support")]
pub mod testing;
mod vectors;
mod work;

pub use erasure::ErasureReceipt;
pub use extraction::{ApplyInput, ApplyOutcome, ClaimedSegment, ItemEmbeddings, NewRequest, SegmentTurn, StoredOutput};
pub use ingest::{ClosedSegment, IngestReport, NewMessage};
pub use lifecycle::{MemoryState, Revised, Revision, Undone};
pub use listing::{CostRow, Counts, MemoryRow, MetricsSnapshot, RequestDetail, RequestRow, SegmentRow, UsageTotals};
#[cfg(feature = "test-support")]
pub use postprocess::UserRows;
pub use postprocess::{
    Covered, EntityDecision, EntityRow, NewLink, ProposalToReview, RefinementRules, Replacement, ReviewMemory, RunCap,
    StageApplied, StageMemory, StageOutcome,
};
pub use schedules::ScheduleRow;
pub use scoring::{ScoringPolicy, ScoringReport, importance};
pub use vectors::{
    LoadedIndex, MemoryToEmbed, MemoryVector, Neighbour, UserVectors, VectorCache, VectorIndex, VectorIndexError, dot,
    vector_from_le_bytes, vector_to_le_bytes,
};
pub use work::{BatchRow, PackPolicy, PackedBatch, ReplanReport, RequestUsage, WorkRequest};

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
    /// The database could not be reached or opened.
    #[error("cannot open the {backend} database: {source}")]
    Connect {
        /// `sqlite` or `postgres`.
        backend: &'static str,
        /// The driver's error.
        source: sqlx::Error,
    },
    /// Applying migrations failed.
    #[error("database migration failed: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    /// A statement failed; transient on PostgreSQL connection loss, a bug otherwise.
    #[error("database error: {0}")]
    Sql(#[from] sqlx::Error),
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

/// Runs `$body` inside a write transaction `$tx` and commits it; an early `?` rolls back.
///
/// The body must not `return`: leave it with its value so the commit runs.
macro_rules! in_write_tx {
    ($store:expr, |$tx:ident| $body:expr) => {
        match &$store.backend {
            $crate::Backend::Sqlite(pool) => {
                let mut $tx = pool.begin_with("BEGIN IMMEDIATE").await?;
                let value = $body;
                $tx.commit().await?;
                value
            }
            $crate::Backend::Postgres(pool) => {
                let mut $tx = pool.begin().await?;
                let value = $body;
                $tx.commit().await?;
                value
            }
        }
    };
}
pub(crate) use in_write_tx;

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
            .map_err(|source| StoreError::Connect {
                backend: "sqlite",
                source,
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
            .map_err(|source| StoreError::Connect {
                backend: "postgres",
                source,
            })?;
        Ok(Store {
            backend: Backend::Postgres(pool),
        })
    }

    /// Applies every pending migration of this backend.
    pub async fn migrate(&self) -> Result<()> {
        match &self.backend {
            Backend::Sqlite(pool) => SQLITE_MIGRATOR.run(pool).await?,
            Backend::Postgres(pool) => POSTGRES_MIGRATOR.run(pool).await?,
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

/// The URL with its password and password-like query values replaced by `***`, fit to show.
///
/// The parsing lives in `memsift_core::redact`, shared with the provider clients' endpoints.
pub fn redact(url: &str) -> String {
    memsift_core::redact::redact_url(url)
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
