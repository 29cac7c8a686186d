//! Test databases: a temporary SQLite file, or a fresh PostgreSQL database on the local server.

use std::str::FromStr;

use chrono::{DateTime, Duration, Utc};
use memsift_core::status::Role;
use memsift_store::{NewMessage, Store, StoreOptions};
use sqlx::Connection;
use sqlx::postgres::{PgConnectOptions, PgConnection};

pub struct TestDb {
    pub store: Store,
    cleanup: Cleanup,
}

enum Cleanup {
    Sqlite(#[allow(dead_code)] tempfile::TempDir),
    Postgres { admin: PgConnectOptions, database: String },
}

pub fn pg_admin_url() -> String {
    std::env::var("MEMSIFT_TEST_PG_URL").unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".to_owned())
}

impl TestDb {
    pub async fn sqlite() -> TestDb {
        let dir = tempfile::tempdir().expect("temporary directory");
        let store = Store::open_sqlite_file(&dir.path().join("test.db"), &StoreOptions::default()).await.expect("open sqlite");
        store.migrate().await.expect("migrate sqlite");
        TestDb { store, cleanup: Cleanup::Sqlite(dir) }
    }

    pub async fn postgres() -> TestDb {
        let admin = PgConnectOptions::from_str(&pg_admin_url()).expect("MEMSIFT_TEST_PG_URL is a postgres URL");
        let database = format!("memsift_test_{}", uuid::Uuid::now_v7().simple());
        let mut connection = PgConnection::connect_with(&admin).await.unwrap_or_else(|error| {
            panic!("PostgreSQL at {} is required for the store suite (start it: pg_ctlcluster 15 main start): {error}", pg_admin_url())
        });
        sqlx::query(&format!("CREATE DATABASE {database}"))
            .execute(&mut connection)
            .await
            .expect("create test database");
        connection.close().await.ok();
        let url = format!("{}/{}", pg_admin_url().rsplit_once('/').expect("URL has a path").0, database);
        let store = Store::connect(&url, &StoreOptions { max_connections: 4, ..StoreOptions::default() })
            .await
            .expect("connect to test database");
        store.migrate().await.expect("migrate postgres");
        TestDb { store, cleanup: Cleanup::Postgres { admin, database } }
    }

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

pub fn t0() -> DateTime<Utc> {
    DateTime::parse_from_rfc3339("2026-03-01T10:00:00Z").unwrap().with_timezone(&Utc)
}

pub fn message(user: &str, conversation: &str, minute: i64, role: Role, content: &str) -> NewMessage {
    NewMessage {
        user_external_id: user.to_owned(),
        conversation_key: conversation.to_owned(),
        segment_name: None,
        role,
        speaker: None,
        content: content.to_owned(),
        at: t0() + Duration::minutes(minute),
        external_id: None,
        boundary_after: false,
    }
}

pub fn idle() -> Duration {
    Duration::minutes(60)
}

pub fn no_progress(_: u64) {}
