//! `check-config` on a PostgreSQL URL's TLS settings: the mode in force shown, and each bad
//! setting refused in one line naming it, without connecting.

use std::process::{Command, Output};

fn check_config(database: &str, env: &[(&str, &str)]) -> Output {
    let home = tempfile::tempdir().unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_memsift"));
    command
        .env_clear()
        .env("HOME", home.path())
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .args(["--database", database, "check-config"]);
    for (name, value) in env {
        command.env(name, value);
    }
    command.output().unwrap()
}

fn stdout(output: &Output) -> String {
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// The one line of a refusal.
fn refusal(output: &Output) -> String {
    assert!(!output.status.success(), "{}", String::from_utf8_lossy(&output.stdout));
    let stderr = String::from_utf8_lossy(&output.stderr).trim().to_owned();
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    stderr
}

#[test]
fn check_config_shows_the_tls_mode_in_force_and_where_it_came_from() {
    let default = stdout(&check_config("postgres://memsift@db.example/memsift", &[]));
    assert!(
        default.contains("TLS sslmode=prefer (the default): TLS when the server offers it"),
        "{default}"
    );
    let from_env = stdout(&check_config(
        "postgres://memsift@db.example/memsift",
        &[("PGSSLMODE", "require")],
    ));
    assert!(from_env.contains("TLS sslmode=require (from PGSSLMODE)"), "{from_env}");
    let ca = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(
        ca.path(),
        "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n",
    )
    .unwrap();
    let url = format!(
        "postgres://memsift@db.example/memsift?sslmode=verify-full&sslrootcert={}",
        ca.path().display()
    );
    let verify_full = stdout(&check_config(&url, &[]));
    assert!(
        verify_full.contains(&format!(
            "TLS sslmode=verify-full: TLS always, the certificate signed by the CAs in {}",
            ca.path().display()
        )),
        "{verify_full}"
    );
    let sqlite = stdout(&check_config("sqlite:///tmp/never-opened.db", &[]));
    assert!(!sqlite.contains("TLS"), "{sqlite}");
}

#[test]
fn a_bad_tls_setting_is_refused_in_one_line_naming_it() {
    let missing = refusal(&check_config(
        "postgres://memsift@db.example/memsift?sslmode=verify-full&sslrootcert=/nonexistent/ca.pem",
        &[],
    ));
    assert!(
        missing.contains("sslrootcert `/nonexistent/ca.pem` cannot be read"),
        "{missing}"
    );
    let unknown = refusal(&check_config(
        "postgres://memsift@db.example/memsift?sslmode=strict",
        &[],
    ));
    assert!(unknown.contains("sslmode `strict` is not one of"), "{unknown}");
    let system_weak = refusal(&check_config(
        "postgres://memsift@db.example/memsift?sslrootcert=system&sslmode=require",
        &[],
    ));
    assert!(system_weak.contains("needs sslmode=verify-full"), "{system_weak}");
}
