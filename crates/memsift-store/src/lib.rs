//! Storage for memsift on SQLite (the embedded default) and PostgreSQL (shared production store).
//!
//! **Architecture invariant:** every SQL statement of the project lives in this crate. Callers see
//! typed rows and typed ids, never a pool or a query string.
//!
//! One `Store` serves both backends, and the SQL text is shared (`$1` placeholders, `ON CONFLICT`,
//! `RETURNING` work on both); only the few statements that must differ (claims with
//! `FOR UPDATE SKIP LOCKED`) branch on the backend. Every write runs in `Store::write` (module
//! `tx`), which commits exactly when its body returns `Ok`; reads run on the pool through
//! `Store::read_*` (module `read`), which refuse any statement that is not a read. Write transactions on SQLite start with `BEGIN IMMEDIATE`, so two writers queue on
//! `busy_timeout` instead of failing with `SQLITE_BUSY`.

#![deny(missing_docs)]

use std::str::FromStr;
use std::time::Duration;

use sqlx::migrate::Migrator;
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{ConnectOptions, Connection};

use crate::tx::sql;

mod apply;
mod batches;
mod erasure;
mod erasure_key;
#[cfg(feature = "testing")]
mod fixtures;
mod handles;
mod health;
mod ingest;
#[cfg(feature = "testing")]
mod inspect;
mod journal;
mod listing;
mod memory_insert;
mod plan_writes;
mod read;
mod requests;
mod revisions;
mod schedules;
mod scoring;
mod search;
mod segments;
mod spend;
mod stage;
#[cfg(feature = "testing")]
pub mod testing;
mod tls;
mod turn_vectors;
mod tx;
mod undo;
mod users;
mod vectors;
mod workers;

pub use apply::{
    ApplyInput, ApplyOutcome, ContinuationPlan, DuplicateEvidence, DuplicateOf, ItemEmbeddings, NewMemory,
};
pub use batches::{BatchRow, GivenUp, PackPolicy, PackedBatch, ReconcileMiss};
pub use erasure::{ErasureReceipt, FactKeys};
pub use erasure_key::ErasureKey;
#[cfg(feature = "testing")]
pub use fixtures::UserRows;
pub use handles::{
    Batches, Erasure, Lanes, Listing, Memories, Messages, Requests, Schedules, Search, Segments, Stages, Users,
    Vectors, Workers,
};
pub use health::{LaneHealthRow, LaneTransition, Reroute, WaitingRequest};
pub use ingest::{ClosedSegment, IngestReport, MAX_FUTURE_SKEW, MAX_REPORTED_IDS, NewMessage, stored_message_time};
pub use listing::{
    CostRow, Counts, IdKind, MemoryDetail, MemoryRow, MetricsSnapshot, RequestDetail, RequestRow, SegmentRow,
    UsageTotals,
};
pub use memory_insert::OPERATOR_MODEL;
pub use requests::{ApplyFailure, NewRequest, ReplanReport, RequestUsage, StoredOutput, WorkRequest};
pub use revisions::{MemoryState, Revised, Revision};
pub use schedules::ScheduleRow;
pub use scoring::{ScoringPolicy, ScoringReport, importance};
pub use search::{MemoryCard, MemoryTexts, ReadSnapshot, TurnCard, TurnText};
pub use segments::{ClaimedSegment, SegmentTurn};
pub use spend::{RecentOutput, Spend};
pub use stage::{
    Covered, EntityDecision, EntityRow, LinkEnd, LinkHint, Narrowed, NewLink, ProposalToReview, RefinementRules,
    Replacement, ReviewMemory, RunCap, StageApplied, StageMemory, StageOutcome, share_cap,
};
pub use tls::{SettingSource, TlsMode, TlsSettings, Transport, check_database_tls, plain_text_warning};
pub use turn_vectors::{StampState, TurnToEmbed, UserTurnVectors};
pub use tx::{statements_run, storable_json, storable_text};
pub use undo::Undone;
pub use vectors::{ChangedVectors, MemoryToEmbed, MemoryVector, UserVectors, vector_from_le_bytes, vector_to_le_bytes};
pub use workers::{HeldClaims, WorkerIdentity};

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
    /// PostgreSQL refused or failed the TLS this connection's settings ask for.
    #[error("cannot open the postgres database over TLS: {reason}")]
    Tls {
        /// What was refused, and the fix, in one line.
        reason: String,
    },
    /// The SQLite file, or the directory its journal files go in, cannot be written (SQLite only
    /// says "unable to open database file").
    #[error(
        "the SQLite database cannot be written: {part} is read-only; memsift writes the file and, beside it, its -wal and -shm journal files: make both writable by this user (chmod u+w, or chown), or copy the database somewhere writable"
    )]
    ReadOnly {
        /// The file or directory, and which it is.
        part: String,
    },
    /// Applying migrations failed.
    #[error("database migration failed: {0}")]
    Migrate(sqlx::migrate::MigrateError),
    /// A statement failed; transient on PostgreSQL connection loss or SQLite's lock running out,
    /// a bug otherwise.
    #[error("{}", describe_sql(.0))]
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
    /// A statement that could change data was sent to the read path (a bug in this crate: writes
    /// belong in `Store::write`).
    #[error("refused to run `{statement}` as a read: {why}")]
    NotARead {
        /// The statement, on one line.
        statement: String,
        /// What makes it not a read.
        why: String,
    },
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

/// A failed statement in one line; SQLite's write lock running out says who holds it and what
/// to do, since "database is locked" alone leaves a user guessing.
fn describe_sql(error: &sqlx::Error) -> String {
    if matches!(error, sqlx::Error::Database(db) if is_sqlite_busy(db.as_ref())) {
        return format!(
            "the SQLite database is busy: another process (the daemon, `memsift run` or `import`) held its write lock past \
             the busy timeout; nothing was written, so run this again once it is done, or use PostgreSQL for several \
             writers at once (database error: {error})"
        );
    }
    format!("database error: {error}")
}

/// SQLite `SQLITE_BUSY`/`SQLITE_LOCKED` and their extended codes: another writer held the lock.
fn is_sqlite_busy(error: &dyn sqlx::error::DatabaseError) -> bool {
    matches!(error.code().as_deref(), Some("5" | "6" | "261" | "517"))
}

/// SQLite `SQLITE_BUSY`/`SQLITE_LOCKED`, PostgreSQL connection, serialization and deadlock
/// failures, and admin shutdowns: conditions of the database, not of the statement.
fn is_busy_or_lost(error: &dyn sqlx::error::DatabaseError) -> bool {
    let code = error.code();
    let code = code.as_deref().unwrap_or_default();
    is_sqlite_busy(error) || code.starts_with("08") || matches!(code, "40001" | "40P01" | "57P01" | "57P02" | "57P03")
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
    /// Keys the fingerprints of erased users and facts; see `erasure_key`.
    pub(crate) erasure: Option<std::sync::Arc<ErasureKey>>,
    /// Whether the session is encrypted, and the warning it owes the operator if not.
    pub(crate) link: Link,
}

/// What a store knows of its link to the database.
#[derive(Clone, Debug)]
pub(crate) struct Link {
    transport: Transport,
    plain_text_warning: Option<String>,
}

impl Link {
    const LOCAL_FILE: Link = Link {
        transport: Transport::LocalFile,
        plain_text_warning: None,
    };
}

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
            let tls = TlsSettings::of_url(url)?;
            let connect_options = PgConnectOptions::from_str(url).map_err(|error| StoreError::BadUrl {
                url: redact(url),
                reason: error.to_string(),
            })?;
            Store::open_postgres(tls.apply(connect_options)?, &tls, options).await
        } else {
            Err(StoreError::BadUrl {
                url: redact(url),
                reason: "unknown scheme".to_owned(),
            })
        }
    }

    /// Opens (creating if missing) the SQLite file at `path` (the test databases' way in).
    #[cfg(feature = "testing")]
    pub(crate) async fn open_sqlite_file(path: &std::path::Path, options: &StoreOptions) -> Result<Store> {
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
            // Freed pages are zeroed, so an erased user's deleted rows are not left in the file.
            .pragma("secure_delete", "ON")
            .synchronous(if options.sqlite_synchronous_full {
                SqliteSynchronous::Full
            } else {
                SqliteSynchronous::Normal
            });
        let path = connect_options.get_filename().to_owned();
        let pool = SqlitePoolOptions::new()
            .max_connections(options.max_connections.max(1))
            .connect_with(connect_options)
            .await
            .map_err(|cause| match read_only_part(&path) {
                Some(part) => StoreError::ReadOnly { part },
                None => StoreError::Connect {
                    backend: "sqlite",
                    cause,
                },
            })?;
        Ok(Store {
            backend: Backend::Sqlite(pool),
            erasure: None,
            link: Link::LOCAL_FILE,
        })
    }

    async fn open_postgres(
        connect_options: PgConnectOptions,
        tls: &TlsSettings,
        options: &StoreOptions,
    ) -> Result<Store> {
        let (host, address) = match connect_options.get_socket() {
            Some(socket) => (socket.display().to_string(), socket.display().to_string()),
            None => (
                connect_options.get_host().to_owned(),
                format!("{}:{}", connect_options.get_host(), connect_options.get_port()),
            ),
        };
        let over_socket = connect_options.get_socket().is_some();
        let pool = PgPoolOptions::new()
            .max_connections(options.max_connections.max(1))
            .acquire_timeout(Duration::from_secs(30))
            .connect_with(connect_options)
            .await
            .map_err(|cause| match tls::describe_refusal(&cause, tls, &host) {
                Some(reason) => StoreError::Tls { reason },
                None => StoreError::Connect {
                    backend: "postgres",
                    cause,
                },
            })?;
        let mut store = Store {
            backend: Backend::Postgres(pool),
            erasure: None,
            link: Link::LOCAL_FILE,
        };
        let transport = if over_socket {
            Transport::UnixSocket
        } else {
            // The driver does not say whether `prefer` got TLS; the server does.
            let encrypted: Option<bool> = store
                .read_scalar_optional(sql!("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()"))
                .await
                .ok()
                .flatten();
            match encrypted {
                Some(true) => Transport::Encrypted,
                Some(false) => Transport::PlainText,
                None => Transport::Undetermined,
            }
        };
        store.link = Link {
            transport,
            plain_text_warning: plain_text_warning(tls, transport, &address),
        };
        Ok(store)
    }

    /// Whether the session with the database is encrypted.
    pub fn transport(&self) -> Transport {
        self.link.transport
    }

    /// What the operator should be told once when the session is in plain text over TCP
    /// (`sslmode=prefer` fell back, or plain text was asked for).
    pub fn plain_text_warning(&self) -> Option<&str> {
        self.link.plain_text_warning.as_deref()
    }

    /// Applies every pending migration of this backend. When every migration is already applied
    /// (what nearly every command finds), this only reads: a read-only command behind a long
    /// writer once waited for SQLite's write lock here and failed with "database is locked".
    pub async fn migrate(&self) -> Result<()> {
        if self.migrations_current().await? {
            return Ok(());
        }
        self.migrate_up_to(None)
            .await
            .map_err(|error| self.named_read_only(error))
    }

    /// Whether every migration of this build is recorded as applied with its current checksum,
    /// read without a write transaction.
    pub async fn migrations_current(&self) -> Result<bool> {
        let migrator = match self.kind() {
            BackendKind::Sqlite => &SQLITE_MIGRATOR,
            BackendKind::Postgres => &POSTGRES_MIGRATOR,
        };
        let probe = match self.kind() {
            BackendKind::Sqlite => "SELECT name FROM sqlite_master WHERE type = 'table' AND name = '_sqlx_migrations'",
            BackendKind::Postgres => "SELECT CAST(to_regclass('_sqlx_migrations') AS TEXT)",
        };
        let exists: Option<String> = self
            .read_scalar_optional::<Option<String>>(sql!(probe))
            .await?
            .flatten();
        if exists.is_none() {
            return Ok(false);
        }
        let applied: Vec<(i64, Vec<u8>, bool)> = self
            .read_all(sql!("SELECT version, checksum, success FROM _sqlx_migrations"))
            .await?;
        let applied: std::collections::HashMap<i64, (Vec<u8>, bool)> = applied
            .into_iter()
            .map(|(version, checksum, success)| (version, (checksum, success)))
            .collect();
        Ok(migrator.iter().all(|migration| {
            applied
                .get(&migration.version)
                .is_some_and(|(checksum, success)| *success && checksum.as_slice() == &*migration.checksum)
        }))
    }

    /// Applies the pending migrations up to `version` (all when `None`); tests use a version to
    /// fill an older schema before migrating it.
    ///
    /// On SQLite the migrations run on a connection of their own with foreign keys off: a
    /// migration that rebuilds a table (SQLite's only way to change a constraint) drops the old
    /// one, and with foreign keys on that drop would fire every `ON DELETE` action on the rows
    /// pointing at it. Each such migration checks the foreign keys itself before it commits.
    pub(crate) async fn migrate_up_to(&self, version: Option<i64>) -> Result<()> {
        let up_to = |migrator: &Migrator| Migrator {
            migrations: migrator
                .migrations
                .iter()
                .filter(|migration| version.is_none_or(|version| migration.version <= version))
                .cloned()
                .collect(),
            ..Migrator::DEFAULT
        };
        self.accept_reworded_migrations().await?;
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

    /// Migrations 1 and 2 first shipped with comments that pointed at a document outside the
    /// repository; only those comments were reworded, not one statement. sqlx records a checksum
    /// of each applied migration's whole text and refuses to start when a file changed, so a
    /// database that ran the old text has its recorded checksum moved to the new one, and only
    /// when it is exactly the old text's.
    async fn accept_reworded_migrations(&self) -> Result<()> {
        let (migrator, reworded) = match self.kind() {
            BackendKind::Sqlite => (&SQLITE_MIGRATOR, REWORDED_SQLITE_MIGRATIONS),
            BackendKind::Postgres => (&POSTGRES_MIGRATOR, REWORDED_POSTGRES_MIGRATIONS),
        };
        let exists: Option<String> = {
            let probe = match self.kind() {
                BackendKind::Sqlite => {
                    "SELECT name FROM sqlite_master WHERE type = 'table' AND name = '_sqlx_migrations'"
                }
                BackendKind::Postgres => "SELECT CAST(to_regclass('_sqlx_migrations') AS TEXT)",
            };
            self.read_scalar_optional::<Option<String>>(sql!(probe))
                .await?
                .flatten()
        };
        if exists.is_none() {
            return Ok(());
        }
        for (version, old_checksum) in reworded {
            let Some(migration) = migrator.iter().find(|migration| migration.version == *version) else {
                continue;
            };
            let old = hex_bytes(old_checksum);
            let new = migration.checksum.to_vec();
            self.write(async |tx| {
                tx.execute(sql!(
                    "UPDATE _sqlx_migrations SET checksum = $1 WHERE version = $2 AND checksum = $3",
                    new,
                    version,
                    old
                ))
                .await
            })
            .await?;
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
        match &self.backend {
            Backend::Sqlite(pool) => pool.close().await,
            Backend::Postgres(pool) => pool.close().await,
        }
    }

    /// Closes the pool's idle SQLite connections (the pool opens new ones as needed): each holds
    /// a page cache of its own, which keeps pages as they were before an erasure rewrote them
    /// until that connection next reads. Connections in use stay. Returns how many were closed;
    /// nothing to do on PostgreSQL, whose caches are the server's.
    pub async fn close_idle_connections(&self) -> u64 {
        let Backend::Sqlite(pool) = &self.backend else {
            return 0;
        };
        let mut n_closed = 0;
        while let Some(connection) = pool.try_acquire() {
            // A connection that fails to close cleanly is dropped anyway.
            let _ = connection.close().await;
            n_closed += 1;
        }
        n_closed
    }
}

impl Store {
    /// `error`, or when it is SQLite refusing to write (`SQLITE_READONLY`, or `SQLITE_CANTOPEN`
    /// for a journal file) because this process cannot write the file or its directory,
    /// [`StoreError::ReadOnly`] naming which, with the fix.
    pub(crate) fn named_read_only(&self, error: StoreError) -> StoreError {
        let Backend::Sqlite(pool) = &self.backend else {
            return error;
        };
        let database = match &error {
            StoreError::Sql(sqlx::Error::Database(database))
            | StoreError::Migrate(sqlx::migrate::MigrateError::Execute(sqlx::Error::Database(database))) => database,
            _ => return error,
        };
        let code: i64 = database.code().and_then(|code| code.parse().ok()).unwrap_or(0);
        // The primary result code is the low byte of an extended one.
        if !matches!(code & 0xff, 8 | 14) {
            return error;
        }
        match read_only_part(pool.connect_options().get_filename()) {
            Some(part) => StoreError::ReadOnly { part },
            None => error,
        }
    }
}

/// Which part of a SQLite database at `path` this process cannot write (the file, or its
/// directory), if any: access(2) answers for this user (root may write a 0444 file, another user
/// not a 0644 one of root's) and for a read-only file system; the directory matters because WAL
/// mode creates files beside the database.
pub(crate) fn read_only_part(path: &std::path::Path) -> Option<String> {
    let read_only =
        |path: &std::path::Path| path.exists() && rustix::fs::access(path, rustix::fs::Access::WRITE_OK).is_err();
    if read_only(path) {
        return Some(format!("the file {}", path.display()));
    }
    let dir = path.parent().filter(|dir| !dir.as_os_str().is_empty())?;
    read_only(dir).then(|| format!("the directory {}", dir.display()))
}

/// SHA-384 of the text migrations 1 and 2 first shipped with (see `accept_reworded_migrations`).
pub(crate) const REWORDED_SQLITE_MIGRATIONS: &[(i64, &str)] = &[
    (
        1,
        "b1b6d830dfe61debf81c31826f7116b037996b58c5f8f35b4f2a37a52b66559887531bdf0f99cb0b9fc9dae4e79207b2",
    ),
    (
        2,
        "0160cc8324dff7e5edd044d76074065827388d6eef5fd40cf4b87637908bd6d4a821e4a3a2495e536b5c4b18305c7a7c",
    ),
];
pub(crate) const REWORDED_POSTGRES_MIGRATIONS: &[(i64, &str)] = &[
    (
        1,
        "4c8cec7bdc8cf49d50cc20c3e9ee2ea7f03753e36a87b45829460fa1050001ce541122d644f9487be02b5abb091bf21b",
    ),
    (
        2,
        "d902f4befa70472931e06773e4b903669d80d39d1f7922cb9bade58cf8d96624c4cba5122dba38f6ae3b9a9310b429f8",
    ),
];

pub(crate) fn hex_bytes(hex: &str) -> Vec<u8> {
    (0..hex.len())
        .step_by(2)
        .filter_map(|at| u8::from_str_radix(hex.get(at..at + 2)?, 16).ok())
        .collect()
}

/// The URL with its password and password-like query values replaced by `***`, fit to show.
///
/// The parsing lives in `memsift_core::redact`, shared with the provider clients' endpoints.
pub fn redact(url: &str) -> String {
    memsift_core::redact::redact_url(url)
}

/// Reads a JSON column into the type written there; a value that does not fit is a corrupt row.
pub(crate) fn from_json<T: serde::de::DeserializeOwned>(table: &'static str, value: serde_json::Value) -> Result<T> {
    serde_json::from_value(value).map_err(|error| corrupt(table, error))
}

/// An id read back from `table`; text that is no id of its kind is corruption, named.
pub(crate) fn parse_id<Id: std::str::FromStr>(table: &'static str, text: &str) -> Result<Id>
where
    Id::Err: ToString,
{
    text.parse().map_err(|error| corrupt(table, error))
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

    /// A file or directory is named exactly when this user cannot write it: the oracle is the
    /// OS refusing a write (as root, a 0444 file is writable and is not named).
    #[test]
    fn a_file_or_directory_this_user_cannot_write_is_named() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("memsift-ro-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("memsift.db");
        std::fs::write(&file, b"").unwrap();
        assert_eq!(read_only_part(&file), None);
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o444)).unwrap();
        let file_refused = std::fs::OpenOptions::new().write(true).open(&file).is_err();
        let named_file = read_only_part(&file);
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o555)).unwrap();
        let dir_refused = std::fs::write(dir.join("probe"), b"").is_err();
        let named_dir = read_only_part(&file);
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(named_file, file_refused.then(|| format!("the file {}", file.display())));
        assert_eq!(
            named_dir,
            dir_refused.then(|| format!("the directory {}", dir.display()))
        );
    }

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
