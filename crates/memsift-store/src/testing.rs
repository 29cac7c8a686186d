//! Test support (feature `test-support`): a migrated store on a temporary SQLite file or a fresh PostgreSQL database.
//!
//! PostgreSQL is real, never mocked. The admin URL comes from `MEMSIFT_TEST_PG_URL`, default
//! `postgres://postgres@127.0.0.1:5432/postgres`; each `TestDb` creates its own database and
//! `finish` drops it. An unreachable server fails the test: tests that need PostgreSQL never skip.

use std::str::FromStr;

use sqlx::Connection;
use sqlx::postgres::{PgConnectOptions, PgConnection};

use crate::{Store, StoreOptions};

/// A migrated store that cleans up after itself.
pub struct TestDb {
    /// The store.
    pub store: Store,
    cleanup: Cleanup,
}

enum Cleanup {
    Sqlite(#[allow(dead_code, reason = "held so the directory outlives the store")] tempfile::TempDir),
    Postgres {
        admin: Box<PgConnectOptions>,
        database: String,
    },
}

/// The PostgreSQL admin URL tests use.
pub fn pg_admin_url() -> String {
    std::env::var("MEMSIFT_TEST_PG_URL").unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".to_owned())
}

impl TestDb {
    /// A store on a new SQLite file in a temporary directory.
    pub async fn sqlite() -> TestDb {
        TestDb::sqlite_at(None).await
    }

    /// A store on a new PostgreSQL database.
    pub async fn postgres() -> TestDb {
        TestDb::postgres_at(None).await
    }

    /// A store on a new SQLite file, migrated up to `version` (every migration when `None`): for
    /// tests that fill an older schema and then migrate it.
    pub async fn sqlite_at(version: Option<i64>) -> TestDb {
        let dir = tempfile::tempdir().expect("temporary directory");
        let store = Store::open_sqlite_file(&dir.path().join("test.db"), &StoreOptions::default())
            .await
            .expect("open sqlite");
        store.migrate_up_to(version).await.expect("migrate sqlite");
        TestDb {
            store,
            cleanup: Cleanup::Sqlite(dir),
        }
    }

    /// A store on a new PostgreSQL database, migrated up to `version` (every migration when `None`).
    pub async fn postgres_at(version: Option<i64>) -> TestDb {
        let admin = PgConnectOptions::from_str(&pg_admin_url()).expect("MEMSIFT_TEST_PG_URL is a postgres URL");
        let database = format!("memsift_test_{}", uuid::Uuid::now_v7().simple());
        let mut connection = PgConnection::connect_with(&admin).await.unwrap_or_else(|error| {
            panic!(
                "PostgreSQL at {} is required for the store suite (start it: pg_ctlcluster 15 main start): {error}",
                pg_admin_url()
            )
        });
        sqlx::query(&format!("CREATE DATABASE {database}"))
            .execute(&mut connection)
            .await
            .expect("create test database");
        connection.close().await.ok();
        let url = format!(
            "{}/{}",
            pg_admin_url().rsplit_once('/').expect("URL has a path").0,
            database
        );
        let store = Store::connect(
            &url,
            &StoreOptions {
                max_connections: 4,
                ..StoreOptions::default()
            },
        )
        .await
        .expect("connect to test database");
        store.migrate_up_to(version).await.expect("migrate postgres");
        TestDb {
            store,
            cleanup: Cleanup::Postgres {
                admin: Box::new(admin),
                database,
            },
        }
    }

    /// Closes the store and drops its database.
    pub async fn finish(self) {
        self.store.close().await;
        if let Cleanup::Postgres { admin, database } = self.cleanup {
            let mut connection = PgConnection::connect_with(&admin).await.expect("reconnect as admin");
            sqlx::query(&format!("DROP DATABASE IF EXISTS {database} WITH (FORCE)"))
                .execute(&mut connection)
                .await
                .expect("drop test database");
        }
    }
}
