//! Reads on the pool, through the same typed statements as writes.
//!
//! A read is built with [`sql!`](crate::tx::sql) like a write and its values pass through the same
//! `Arg` conversion, so one statement binds the same way on SQLite and PostgreSQL whichever path
//! runs it. What keeps the two paths apart is [`read_only`]: a statement sent here that could
//! change data is refused in every build, because a write outside [`Store::write`] skips its
//! transaction (SQLite's `BEGIN IMMEDIATE` queueing, the all-or-nothing commit).

use crate::tx::{Arg, EitherRow, Statement, bind_args};
use crate::{Backend, Result, Store, StoreError};

/// Words that make a statement a write (or a schema change) wherever they stand as a keyword.
const WRITE_KEYWORDS: &[&str] = &[
    "INSERT", "UPDATE", "DELETE", "UPSERT", "MERGE", "DROP", "ALTER", "CREATE", "TRUNCATE", "VACUUM", "PRAGMA",
    "ATTACH", "DETACH", "REINDEX", "GRANT", "REVOKE", "COPY", "CALL", "LOCK",
];

/// Checks that `sql` is one read: its first keyword is `SELECT` (or `WITH`, `VALUES`), it is a
/// single statement, and no write keyword appears outside string literals, quoted names and
/// comments (so `WITH … INSERT` and `SELECT … FOR UPDATE` are refused too).
pub(crate) fn read_only(sql: &str) -> Result<()> {
    let refuse = |why: &str| {
        Err(StoreError::NotARead {
            statement: sql.split_whitespace().collect::<Vec<_>>().join(" "),
            why: why.to_owned(),
        })
    };
    let words = keywords(sql);
    match words.first().map(String::as_str) {
        Some("SELECT" | "WITH" | "VALUES") => {}
        Some(first) => return refuse(&format!("it starts with `{first}`")),
        None => return refuse("it is empty"),
    }
    if let Some(write) = words.iter().find(|word| WRITE_KEYWORDS.contains(&word.as_str())) {
        return refuse(&format!("it contains `{write}`"));
    }
    if words.iter().any(|word| word == ";") {
        return refuse("it holds more than one statement");
    }
    Ok(())
}

/// The upper-cased words of `sql` outside literals, quoted names and comments, with each `;`
/// that is followed by more text kept as a word of its own.
fn keywords(sql: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut chars = sql.chars().peekable();
    let mut pending_semicolon = false;
    while let Some(c) = chars.next() {
        let mut boundary = true;
        match c {
            '\'' | '"' => skip_until(&mut chars, c),
            '-' if chars.peek() == Some(&'-') => skip_until(&mut chars, '\n'),
            '/' if chars.peek() == Some(&'*') => {
                chars.next();
                while let Some(c) = chars.next() {
                    if c == '*' && chars.peek() == Some(&'/') {
                        chars.next();
                        break;
                    }
                }
            }
            ';' => pending_semicolon = true,
            c if c.is_alphanumeric() || c == '_' || c == '$' => {
                boundary = false;
                if pending_semicolon {
                    words.push(";".to_owned());
                    pending_semicolon = false;
                }
                word.extend(c.to_uppercase());
            }
            _ => {}
        }
        if boundary && !word.is_empty() {
            words.push(std::mem::take(&mut word));
        }
    }
    if !word.is_empty() {
        words.push(word);
    }
    words
}

/// Skips to just past the next `end` (a doubled quote simply closes and reopens the literal).
fn skip_until(chars: &mut std::iter::Peekable<std::str::Chars<'_>>, end: char) {
    for c in chars.by_ref() {
        if c == end {
            return;
        }
    }
}

/// Runs a checked read on whichever pool the store has.
macro_rules! on_read_pool {
    ($store:expr, $statement:expr, $query:expr, $fetch:ident) => {{
        read_only($statement.sql)?;
        crate::tx::count_statement();
        match &$store.backend {
            Backend::Sqlite(pool) => bind_args!($query($statement.sql), $statement.args).$fetch(pool).await?,
            Backend::Postgres(pool) => bind_args!($query($statement.sql), $statement.args).$fetch(pool).await?,
        }
    }};
}

impl Store {
    /// Every row of a read.
    pub(crate) async fn read_all<T: EitherRow>(&self, statement: Statement<'_>) -> Result<Vec<T>> {
        Ok(on_read_pool!(self, statement, sqlx::query_as::<_, T>, fetch_all))
    }

    /// The first row of a read, if any.
    pub(crate) async fn read_optional<T: EitherRow>(&self, statement: Statement<'_>) -> Result<Option<T>> {
        Ok(on_read_pool!(self, statement, sqlx::query_as::<_, T>, fetch_optional))
    }

    /// Exactly one row of a read.
    pub(crate) async fn read_one<T: EitherRow>(&self, statement: Statement<'_>) -> Result<T> {
        Ok(on_read_pool!(self, statement, sqlx::query_as::<_, T>, fetch_one))
    }

    /// The first column of every row of a read.
    pub(crate) async fn read_scalar_all<T>(&self, statement: Statement<'_>) -> Result<Vec<T>>
    where
        (T,): EitherRow,
    {
        Ok(self
            .read_all::<(T,)>(statement)
            .await?
            .into_iter()
            .map(|(value,)| value)
            .collect())
    }

    /// The first column of the first row of a read, if any.
    pub(crate) async fn read_scalar_optional<T>(&self, statement: Statement<'_>) -> Result<Option<T>>
    where
        (T,): EitherRow,
    {
        Ok(self.read_optional::<(T,)>(statement).await?.map(|(value,)| value))
    }

    /// The first column of exactly one row of a read.
    pub(crate) async fn read_scalar_one<T>(&self, statement: Statement<'_>) -> Result<T>
    where
        (T,): EitherRow,
    {
        Ok(self.read_one::<(T,)>(statement).await?.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_pass_and_writes_are_refused() {
        for read in [
            "SELECT id FROM segments WHERE status = $1",
            "  with x AS (SELECT 1) SELECT * FROM x",
            "SELECT updated_at, deleted, 'DELETE me' AS note, \"insert\" FROM t -- UPDATE\n",
            "SELECT 1;",
            "SELECT /* DROP */ 1",
        ] {
            assert!(read_only(read).is_ok(), "{read}");
        }
        for write in [
            "UPDATE segments SET status = 'dead'",
            "INSERT INTO t VALUES (1)",
            "DELETE FROM t",
            "WITH gone AS (DELETE FROM t RETURNING id) SELECT id FROM gone",
            "SELECT 1; DROP TABLE t",
            "SELECT id FROM t FOR UPDATE",
            "PRAGMA wal_checkpoint(TRUNCATE)",
            "",
        ] {
            assert!(matches!(read_only(write), Err(StoreError::NotARead { .. })), "{write}");
        }
    }

    #[tokio::test]
    async fn the_read_path_refuses_a_write_before_it_reaches_the_database() {
        let options = crate::StoreOptions {
            max_connections: 1,
            ..crate::StoreOptions::default()
        };
        let store = Store::connect("sqlite::memory:", &options).await.unwrap();
        store.migrate().await.unwrap();
        let refused = store
            .read_all::<(String,)>(crate::tx::sql!("UPDATE schedules SET name = 'x' RETURNING name"))
            .await;
        assert!(matches!(refused, Err(StoreError::NotARead { .. })), "{refused:?}");
        let refused = store
            .read_scalar_one::<i64>(crate::tx::sql!(
                "WITH gone AS (DELETE FROM schedules RETURNING 1) SELECT COUNT(*) FROM gone"
            ))
            .await;
        assert!(matches!(refused, Err(StoreError::NotARead { .. })), "{refused:?}");
        let counted: i64 = store
            .read_scalar_one(crate::tx::sql!("SELECT COUNT(*) FROM schedules"))
            .await
            .unwrap();
        assert_eq!(counted, 0);
    }

    #[test]
    fn only_the_statement_runners_build_sqlx_queries() {
        // Writes run in `Store::write` (tx.rs), reads in `Store::read_*` (here); the test
        // databases' admin connection (testing.rs) creates and drops whole databases, which no
        // store does. A `sqlx::query` anywhere else is a write that skips its transaction and
        // `storable_text`, or a read that skips the read check.
        let allowed = ["tx.rs", "read.rs", "testing.rs"];
        let mut offenders = Vec::new();
        let mut dirs = vec![std::path::PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/src"))];
        let mut seen = 0;
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    dirs.push(path);
                    continue;
                }
                seen += 1;
                let name = path.file_name().unwrap().to_string_lossy().into_owned();
                let text = std::fs::read_to_string(&path).unwrap();
                if !allowed.contains(&name.as_str()) && text.contains(concat!("sqlx::", "query")) {
                    offenders.push(path.display().to_string());
                }
            }
        }
        assert!(seen > 20, "read only {seen} source files");
        assert!(
            offenders.is_empty(),
            "sqlx queries outside the statement runners: {offenders:?}"
        );
    }
}
