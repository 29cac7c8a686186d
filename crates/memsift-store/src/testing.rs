//! Test support (feature `testing`): a migrated store on a temporary SQLite file or a fresh PostgreSQL database.
//!
//! PostgreSQL is real, never mocked. The admin URL comes from `MEMSIFT_TEST_PG_URL`; without it,
//! the server on 127.0.0.1:5432 is used when one answers, and otherwise the tests start a
//! throwaway cluster of their own (see [`pg_admin_url`]). Each `TestDb` creates its own database
//! and `finish` drops it. Tests that need PostgreSQL never skip: without a server and without
//! PostgreSQL's programs they fail with one line saying how to install it.

use std::str::FromStr;

use sqlx::Connection;
use sqlx::postgres::{PgConnectOptions, PgConnection};

use crate::{Store, StoreOptions};

mod tls_server;
pub use tls_server::TlsServer;

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

/// A fresh erasure key for a test store, adopted once the schema has the tables it needs.
async fn with_test_key(store: Store, version: Option<i64>) -> Store {
    let store = store.with_erasure_key(crate::ErasureKey::generate());
    if version.is_none() {
        store
            .erasure()
            .adopt_erasure_key(chrono::Utc::now())
            .await
            .expect("adopt the test erasure key");
    }
    store
}

/// The server tests use when nothing else is said, as on a machine with PostgreSQL running.
const DEFAULT_PG_URL: &str = "postgres://postgres@127.0.0.1:5432/postgres";

/// The PostgreSQL admin URL tests use: `MEMSIFT_TEST_PG_URL`; else the server on 127.0.0.1:5432
/// when one answers; else a throwaway cluster that the first test process starts with `initdb` and
/// `pg_ctl` in `$TMPDIR/memsift-test-pg-<uid>` on a free port, trust auth, and that later test
/// runs reuse (stop it with `pg_ctl -D $TMPDIR/memsift-test-pg-<uid>/data stop`).
pub fn pg_admin_url() -> String {
    if let Ok(url) = std::env::var("MEMSIFT_TEST_PG_URL") {
        return url;
    }
    static URL: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    URL.get_or_init(|| {
        let default_answers = "127.0.0.1:5432".parse().is_ok_and(|address| {
            std::net::TcpStream::connect_timeout(&address, std::time::Duration::from_secs(1)).is_ok()
        });
        if default_answers {
            DEFAULT_PG_URL.to_owned()
        } else {
            throwaway_cluster().unwrap_or_else(|why| panic!("{why}"))
        }
    })
    .clone()
}

/// Starts (or finds running) the tests' own PostgreSQL cluster; returns its admin URL.
fn throwaway_cluster() -> Result<String, String> {
    let bin = postgres_bin_dir().ok_or(
        "the store tests need PostgreSQL and none answers on 127.0.0.1:5432 nor is installed: install its server \
         (Debian: apt-get install postgresql), or set MEMSIFT_TEST_PG_URL to a server the tests may create databases on",
    )?;
    let programs = Programs::find(bin)?;
    let dir = std::env::temp_dir().join(format!("memsift-test-pg-{}", programs.uid));
    let data = dir.join("data");
    std::fs::create_dir_all(&dir).map_err(|error| format!("cannot create {}: {error}", dir.display()))?;
    // One test process at a time sets the cluster up; the others wait here and then reuse it.
    let lock = std::fs::File::create(dir.join("setup.lock")).map_err(|error| error.to_string())?;
    lock.lock().map_err(|error| error.to_string())?;
    programs.hand_over(&dir)?;
    if !data.join("PG_VERSION").exists() {
        programs.initdb(&data)?;
    }
    let pg = |program: &str| programs.command(program);
    let port_file = dir.join("port");
    let running = pg("pg_ctl")
        .arg("status")
        .arg("-D")
        .arg(&data)
        .output()
        .is_ok_and(|out| out.status.success());
    if !running {
        let port = free_port()?;
        std::fs::write(&port_file, port.to_string()).map_err(|error| error.to_string())?;
        let options = format!(
            "-p {port} -k {} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200",
            dir.display()
        );
        output(
            pg("pg_ctl")
                .args(["-w", "-D"])
                .arg(&data)
                .arg("-l")
                .arg(dir.join("server.log"))
                .args(["-o", &options, "start"]),
        )?;
    }
    let port = std::fs::read_to_string(&port_file).map_err(|error| error.to_string())?;
    Ok(format!("postgres://postgres@127.0.0.1:{}/postgres", port.trim()))
}

/// PostgreSQL's server programs, run as a user they accept.
pub(crate) struct Programs {
    bin: std::path::PathBuf,
    uid: String,
}

impl Programs {
    fn find(bin: std::path::PathBuf) -> Result<Programs, String> {
        let uid = output(std::process::Command::new("id").arg("-u"))?;
        Ok(Programs { bin, uid })
    }

    /// PostgreSQL refuses to run as root; as root, its programs run as the `postgres` user.
    fn as_root(&self) -> bool {
        self.uid == "0"
    }

    fn command(&self, program: &str) -> std::process::Command {
        let path = self.bin.join(program);
        if self.as_root() {
            let mut command = std::process::Command::new(system_program("runuser"));
            command.args(["-u", "postgres", "--"]).arg(path);
            command
        } else {
            std::process::Command::new(path)
        }
    }

    /// Makes `dir` the server's own, as it must be when the programs run as `postgres`.
    fn hand_over(&self, dir: &std::path::Path) -> Result<(), String> {
        if self.as_root() {
            output(
                std::process::Command::new(system_program("chown"))
                    .args(["-R", "postgres"])
                    .arg(dir),
            )?;
        }
        Ok(())
    }

    fn initdb(&self, data: &std::path::Path) -> Result<(), String> {
        output(self.command("initdb").arg("-D").arg(data).args([
            "-U",
            "postgres",
            "--auth=trust",
            "-E",
            "UTF8",
            "--no-sync",
        ]))
        .map(drop)
    }
}

/// A TCP port nothing listens on now.
fn free_port() -> Result<u16, String> {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|address| address.port())
        .map_err(|error| error.to_string())
}

/// A system program by name: from `PATH`, else from the sbin and bin directories, which a
/// minimal `PATH` (cron, `env -i`, some CI runners) leaves out although `runuser` lives there.
fn system_program(name: &str) -> std::path::PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/sbin", "/usr/bin", "/bin"].map(std::path::PathBuf::from))
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
        .unwrap_or_else(|| std::path::PathBuf::from(name))
}

/// Where PostgreSQL's server programs are: `pg_config --bindir`, else the newest
/// `/usr/lib/postgresql/<version>/bin` (Debian keeps them off `PATH`), else `PATH`.
fn postgres_bin_dir() -> Option<std::path::PathBuf> {
    let has_initdb = |dir: &std::path::Path| dir.join("initdb").exists().then(|| dir.to_path_buf());
    if let Ok(bindir) = output(std::process::Command::new("pg_config").arg("--bindir"))
        && let Some(dir) = has_initdb(std::path::Path::new(&bindir))
    {
        return Some(dir);
    }
    let mut versions: Vec<std::path::PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .map(|entry| entry.path().join("bin"))
        .collect();
    versions.sort_by_key(|path| {
        path.parent()
            .and_then(|version| version.file_name())
            .and_then(|name| name.to_str())
            .and_then(|name| name.parse::<u32>().ok())
    });
    if let Some(dir) = versions.iter().rev().find_map(|dir| has_initdb(dir)) {
        return Some(dir);
    }
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .find_map(|dir| has_initdb(&dir))
}

/// Runs a command; its trimmed standard output, or one line saying what failed.
fn output(command: &mut std::process::Command) -> Result<String, String> {
    let out = command
        .output()
        .map_err(|error| format!("cannot run {command:?}: {error}"))?;
    if !out.status.success() {
        return Err(format!(
            "{command:?} failed: {}",
            String::from_utf8_lossy(&out.stderr).trim().replace('\n', " ")
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
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
        let store = with_test_key(store, version).await;
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
                "PostgreSQL at {} is required for the store suite; start it, or unset MEMSIFT_TEST_PG_URL to let the tests start their own: {error}",
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
        let store = with_test_key(store, version).await;
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
