//! Write transactions on either backend, and the statements they run.
//!
//! [`Store::write`] runs a body against a [`WriteTx`] and commits exactly when the body returns
//! `Ok`, early `return Ok(…)` included; an `Err` (or a panic) drops the transaction, which rolls it
//! back. The commit rule is in the types: a body cannot leave without its `Result` reaching
//! `write`, so no path can skip the commit (a macro that ran the body inline once could, and an
//! early `return` rolled back work that was meant to stand).
//!
//! A body is written once for both backends: it builds [`Statement`]s with [`sql!`] and runs them
//! through `WriteTx` methods, which bind the same values to SQLite or PostgreSQL. Every bound text
//! and JSON value passes through [`storable_text`] on the way in, so whatever one backend accepts
//! the other accepts too (PostgreSQL refuses U+0000 in `text` and `jsonb`; SQLite stores it).

use std::borrow::Cow;

use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::postgres::PgRow;
use sqlx::sqlite::SqliteRow;
use sqlx::types::Json;
use sqlx::{FromRow, Postgres, Sqlite, Transaction};

use crate::{Backend, Result, Store};

/// One open write transaction on either backend; `Store::write` owns its end.
pub(crate) struct WriteTx {
    connection: TxConnection,
    /// The store's erasure key, for the fingerprints every memory insert checks.
    pub(crate) erasure: Option<std::sync::Arc<crate::ErasureKey>>,
}

enum TxConnection {
    /// Started with `BEGIN IMMEDIATE`, so two writers queue on `busy_timeout`.
    Sqlite(Transaction<'static, Sqlite>),
    /// A plain `BEGIN`; claims add `FOR UPDATE SKIP LOCKED` themselves.
    Postgres(Transaction<'static, Postgres>),
}

/// Replaces what PostgreSQL cannot store in text (U+0000) with U+FFFD, the replacement character,
/// so the same bytes are accepted by both backends and no answer, message or error is refused for
/// one invisible character.
pub fn storable_text(text: &str) -> Cow<'_, str> {
    if text.contains('\0') {
        Cow::Owned(text.replace('\0', "\u{FFFD}"))
    } else {
        Cow::Borrowed(text)
    }
}

/// [`storable_text`] over every string and key of a JSON value.
pub fn storable_json(value: Value) -> Value {
    match value {
        Value::String(text) if text.contains('\0') => Value::String(storable_text(&text).into_owned()),
        Value::Array(items) => Value::Array(items.into_iter().map(storable_json).collect()),
        Value::Object(map) => Value::Object(
            map.into_iter()
                .map(|(key, value)| (storable_text(&key).into_owned(), storable_json(value)))
                .collect(),
        ),
        other => other,
    }
}

/// One value bound to a statement, typed so that even a NULL reaches PostgreSQL with the column's
/// type.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Arg {
    Text(Option<String>),
    Int(Option<i64>),
    Float(Option<f64>),
    Bool(Option<bool>),
    Time(Option<DateTime<Utc>>),
    Json(Option<Value>),
    Bytes(Option<Vec<u8>>),
}

impl Arg {
    /// A JSON value (stored as `jsonb` on PostgreSQL, text on SQLite).
    pub(crate) fn json(value: &impl serde::Serialize) -> Arg {
        // Serialising our own types cannot fail: they have string keys and no custom impls that error.
        let value = serde_json::to_value(value).unwrap_or(Value::Null);
        Arg::Json(Some(storable_json(value)))
    }
}

impl From<&str> for Arg {
    fn from(text: &str) -> Arg {
        Arg::Text(Some(storable_text(text).into_owned()))
    }
}

impl From<String> for Arg {
    fn from(text: String) -> Arg {
        if text.contains('\0') {
            Arg::from(text.as_str())
        } else {
            Arg::Text(Some(text))
        }
    }
}

impl From<&String> for Arg {
    fn from(text: &String) -> Arg {
        Arg::from(text.as_str())
    }
}

impl From<Option<String>> for Arg {
    fn from(text: Option<String>) -> Arg {
        text.map_or(Arg::Text(None), Arg::from)
    }
}

impl From<Option<&str>> for Arg {
    fn from(text: Option<&str>) -> Arg {
        text.map_or(Arg::Text(None), Arg::from)
    }
}

impl From<&Option<String>> for Arg {
    fn from(text: &Option<String>) -> Arg {
        Arg::from(text.as_deref())
    }
}

impl From<i64> for Arg {
    fn from(value: i64) -> Arg {
        Arg::Int(Some(value))
    }
}

impl From<Option<i64>> for Arg {
    fn from(value: Option<i64>) -> Arg {
        Arg::Int(value)
    }
}

impl From<usize> for Arg {
    fn from(value: usize) -> Arg {
        Arg::Int(Some(i64::try_from(value).unwrap_or(i64::MAX)))
    }
}

impl From<u64> for Arg {
    fn from(value: u64) -> Arg {
        Arg::Int(Some(i64::try_from(value).unwrap_or(i64::MAX)))
    }
}

impl From<f64> for Arg {
    fn from(value: f64) -> Arg {
        Arg::Float(Some(value))
    }
}

impl From<Option<f64>> for Arg {
    fn from(value: Option<f64>) -> Arg {
        Arg::Float(value)
    }
}

impl From<bool> for Arg {
    fn from(value: bool) -> Arg {
        Arg::Bool(Some(value))
    }
}

impl From<DateTime<Utc>> for Arg {
    fn from(value: DateTime<Utc>) -> Arg {
        Arg::Time(Some(value))
    }
}

impl From<Option<DateTime<Utc>>> for Arg {
    fn from(value: Option<DateTime<Utc>>) -> Arg {
        Arg::Time(value)
    }
}

/// Borrowed copies of the plain values, so call sites can pass `&row.field` as they read it.
macro_rules! from_borrowed_copy {
    ($($value:ty),+) => {
        $(
            impl From<&$value> for Arg {
                fn from(value: &$value) -> Arg {
                    Arg::from(*value)
                }
            }
        )+
    };
}

from_borrowed_copy!(
    i64,
    f64,
    bool,
    DateTime<Utc>,
    Option<DateTime<Utc>>,
    Option<i64>,
    Option<f64>
);

impl From<Vec<u8>> for Arg {
    fn from(value: Vec<u8>) -> Arg {
        Arg::Bytes(Some(value))
    }
}

impl From<Option<Vec<u8>>> for Arg {
    fn from(value: Option<Vec<u8>>) -> Arg {
        Arg::Bytes(value)
    }
}

impl From<Option<&[u8]>> for Arg {
    fn from(value: Option<&[u8]>) -> Arg {
        Arg::Bytes(value.map(<[u8]>::to_vec))
    }
}

impl<T: serde::Serialize> From<Json<T>> for Arg {
    fn from(Json(value): Json<T>) -> Arg {
        Arg::json(&value)
    }
}

macro_rules! from_display_id {
    ($($id:ty),+) => {
        $(
            impl From<$id> for Arg {
                fn from(id: $id) -> Arg {
                    Arg::Text(Some(id.to_string()))
                }
            }
            impl From<&$id> for Arg {
                fn from(id: &$id) -> Arg {
                    Arg::Text(Some(id.to_string()))
                }
            }
            impl From<Option<$id>> for Arg {
                fn from(id: Option<$id>) -> Arg {
                    Arg::Text(id.map(|id| id.to_string()))
                }
            }
        )+
    };
}

from_display_id!(
    memsift_core::UserId,
    memsift_core::SegmentId,
    memsift_core::MessageId,
    memsift_core::RequestId,
    memsift_core::MemoryId,
    memsift_core::BatchId,
    memsift_core::EntityId,
    memsift_core::OperationId
);

/// SQL text and the values bound to its `$1`, `$2`, … in order.
#[derive(Clone, Debug)]
pub(crate) struct Statement<'q> {
    pub(crate) sql: &'q str,
    pub(crate) args: Vec<Arg>,
}

/// Builds a [`Statement`]: `sql!("UPDATE … WHERE id = $1", id)`; each value goes through
/// `Arg::from`.
macro_rules! sql {
    ($sql:expr $(, $arg:expr)* $(,)?) => {
        $crate::tx::Statement {
            sql: $sql,
            args: vec![$($crate::tx::Arg::from($arg)),*],
        }
    };
}
pub(crate) use sql;

/// Binds a statement's values to a sqlx query of either backend (the same code for each).
macro_rules! bind_args {
    ($query:expr, $args:expr) => {{
        let mut query = $query;
        for arg in $args {
            query = match arg {
                Arg::Text(value) => query.bind(value),
                Arg::Int(value) => query.bind(value),
                Arg::Float(value) => query.bind(value),
                Arg::Bool(value) => query.bind(value),
                Arg::Time(value) => query.bind(value),
                Arg::Json(value) => query.bind(value.map(sqlx::types::Json)),
                Arg::Bytes(value) => query.bind(value),
            };
        }
        query
    }};
}
pub(crate) use bind_args;

/// Runs `$body` with `$conn` bound to the open transaction's connection, whichever backend.
macro_rules! on_tx {
    ($tx:expr, |$conn:ident| $body:expr) => {{
        crate::tx::count_statement();
        match &mut $tx.connection {
            TxConnection::Sqlite(transaction) => {
                let $conn = &mut **transaction;
                $body
            }
            TxConnection::Postgres(transaction) => {
                let $conn = &mut **transaction;
                $body
            }
        }
    }};
}

/// Statements this process ran, reads and writes (`memsift_store_statements_total`): what a
/// search or an apply costs the database, counted rather than guessed.
static STATEMENTS_RUN: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

pub(crate) fn count_statement() {
    STATEMENTS_RUN.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
}

/// How many statements this process has run on any store.
pub fn statements_run() -> u64 {
    STATEMENTS_RUN.load(std::sync::atomic::Ordering::Relaxed)
}

/// A row type both backends can decode.
pub(crate) trait EitherRow: Send + Unpin + for<'r> FromRow<'r, SqliteRow> + for<'r> FromRow<'r, PgRow> {}

impl<T> EitherRow for T where T: Send + Unpin + for<'r> FromRow<'r, SqliteRow> + for<'r> FromRow<'r, PgRow> {}

impl WriteTx {
    /// Runs a statement; returns the rows it changed.
    pub(crate) async fn execute(&mut self, statement: Statement<'_>) -> Result<u64> {
        Ok(on_tx!(self, |conn| bind_args!(
            sqlx::query(statement.sql),
            statement.args
        )
        .execute(conn)
        .await?
        .rows_affected()))
    }

    /// The first row, if any.
    pub(crate) async fn fetch_optional<T: EitherRow>(&mut self, statement: Statement<'_>) -> Result<Option<T>> {
        Ok(on_tx!(self, |conn| bind_args!(
            sqlx::query_as::<_, T>(statement.sql),
            statement.args
        )
        .fetch_optional(conn)
        .await?))
    }

    /// Exactly one row.
    pub(crate) async fn fetch_one<T: EitherRow>(&mut self, statement: Statement<'_>) -> Result<T> {
        Ok(on_tx!(self, |conn| bind_args!(
            sqlx::query_as::<_, T>(statement.sql),
            statement.args
        )
        .fetch_one(conn)
        .await?))
    }

    /// Every row.
    pub(crate) async fn fetch_all<T: EitherRow>(&mut self, statement: Statement<'_>) -> Result<Vec<T>> {
        Ok(on_tx!(self, |conn| bind_args!(
            sqlx::query_as::<_, T>(statement.sql),
            statement.args
        )
        .fetch_all(conn)
        .await?))
    }

    /// The first column of the first row, if any.
    pub(crate) async fn scalar_optional<T>(&mut self, statement: Statement<'_>) -> Result<Option<T>>
    where
        (T,): EitherRow,
    {
        Ok(self.fetch_optional::<(T,)>(statement).await?.map(|(value,)| value))
    }

    /// The first column of exactly one row.
    pub(crate) async fn scalar_one<T>(&mut self, statement: Statement<'_>) -> Result<T>
    where
        (T,): EitherRow,
    {
        Ok(self.fetch_one::<(T,)>(statement).await?.0)
    }

    /// The first column of every row.
    pub(crate) async fn scalar_all<T>(&mut self, statement: Statement<'_>) -> Result<Vec<T>>
    where
        (T,): EitherRow,
    {
        Ok(self
            .fetch_all::<(T,)>(statement)
            .await?
            .into_iter()
            .map(|(value,)| value)
            .collect())
    }

    async fn commit(self) -> Result<()> {
        match self.connection {
            TxConnection::Sqlite(transaction) => transaction.commit().await?,
            TxConnection::Postgres(transaction) => transaction.commit().await?,
        }
        Ok(())
    }
}

/// Refuses anything but the maintenance statements [`Store::maintain`] exists for.
fn maintenance_only(sql: &str) -> Result<()> {
    let first = sql.split_whitespace().next().unwrap_or_default().to_ascii_uppercase();
    if matches!(first.as_str(), "VACUUM" | "PRAGMA") {
        Ok(())
    } else {
        Err(crate::StoreError::NotARead {
            statement: sql.to_owned(),
            why: "only VACUUM and PRAGMA run outside a transaction".to_owned(),
        })
    }
}

impl Store {
    /// Runs `body` in one write transaction: committed when it returns `Ok`, rolled back when it
    /// returns `Err` or panics.
    pub(crate) async fn write<T>(&self, body: impl AsyncFnOnce(&mut WriteTx) -> Result<T>) -> Result<T> {
        self.write_unnamed(body)
            .await
            .map_err(|error| self.named_read_only(error))
    }

    async fn write_unnamed<T>(&self, body: impl AsyncFnOnce(&mut WriteTx) -> Result<T>) -> Result<T> {
        let connection = match &self.backend {
            Backend::Sqlite(pool) => TxConnection::Sqlite(pool.begin_with("BEGIN IMMEDIATE").await?),
            Backend::Postgres(pool) => TxConnection::Postgres(pool.begin().await?),
        };
        let mut tx = WriteTx {
            connection,
            erasure: self.erasure.clone(),
        };
        let value = body(&mut tx).await?;
        tx.commit().await?;
        Ok(value)
    }

    /// Runs a maintenance statement that cannot run inside a transaction (PostgreSQL's `VACUUM`)
    /// on the pool; returns its first row, if any (SQLite's `PRAGMA wal_checkpoint` reports one).
    pub(crate) async fn maintain<T: EitherRow>(&self, sql: &'static str) -> Result<Option<T>> {
        maintenance_only(sql)?;
        Ok(match &self.backend {
            Backend::Sqlite(pool) => sqlx::query_as::<_, T>(sql).fetch_optional(pool).await?,
            Backend::Postgres(pool) => sqlx::query_as::<_, T>(sql).fetch_optional(pool).await?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nul_becomes_the_replacement_character_in_text_and_json() {
        assert_eq!(storable_text("a\0b"), "a\u{FFFD}b");
        assert!(matches!(storable_text("plain"), Cow::Borrowed("plain")));
        let value = serde_json::json!({ "k\0": ["x\0", { "y": "z\0" }], "n": 1 });
        assert_eq!(
            storable_json(value),
            serde_json::json!({ "k\u{FFFD}": ["x\u{FFFD}"  , { "y": "z\u{FFFD}" }], "n": 1 })
        );
        assert_eq!(Arg::from("a\0"), Arg::Text(Some("a\u{FFFD}".to_owned())));
        assert_eq!(Arg::from(String::from("\0")), Arg::Text(Some("\u{FFFD}".to_owned())));
    }
}
