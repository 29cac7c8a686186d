//! Secrets in database URLs: never in the redacted form, an error message, a log line or `--help`.

use std::io::Write;
use std::sync::{Arc, Mutex};

use memsift_core::config::Config;
use proptest::prelude::*;
use proptest::test_runner::{Config as RunnerConfig, TestCaseError, TestRunner};

/// A password or a secret parameter value as an operator might write it: distinctive chunks
/// (a `Q`, then upper-case letters and digits: no other part of these URLs and no message has
/// such a run) joined by the characters that trip naive URL parsing, raw or percent-escaped.
#[derive(Clone, Debug)]
struct Secret {
    chunks: Vec<String>,
    text: String,
}

fn secret() -> impl Strategy<Value = Secret> {
    let separator = prop::sample::select(vec![
        "", "@", "@@", ":", "/", "://", "%", "?", "#", "&", "=", "+", " ", "%40", "%2F", "%3A", "%25", "%4", "é",
    ]);
    (
        prop::collection::vec((separator.clone(), "Q[A-Z0-9]{7,10}"), 1..4),
        separator,
    )
        .prop_map(|(parts, tail)| {
            let mut text = String::new();
            let mut chunks = Vec::new();
            for (separator, chunk) in parts {
                text.push_str(separator);
                text.push_str(&chunk);
                chunks.push(chunk);
            }
            text.push_str(tail);
            Secret { chunks, text }
        })
}

/// A secret as written into the URL: as typed, or percent-encoded the way the docs ask.
fn written(secret: &Secret, encoded: bool) -> String {
    if encoded {
        url::form_urlencoded::byte_serialize(secret.text.as_bytes()).collect()
    } else {
        secret.text.clone()
    }
}

#[derive(Clone, Debug)]
struct SecretUrl {
    url: String,
    secrets: Vec<Secret>,
}

/// Query-parameter names that hold secrets, as libpq, sqlx and proxies spell them.
const SECRET_NAMES: [&str; 8] = [
    "password",
    "sslpassword",
    "token",
    "key",
    "api_key",
    "access_token",
    "secret",
    "sslkey",
];

/// A PostgreSQL URL at `host_port` (a reachable server, a database that does not exist) with an
/// optional password and secret parameters, or a SQLite URL in `sqlite_dir` with secret parameters.
fn secret_url(host_port: String, sqlite_dir: String) -> impl Strategy<Value = SecretUrl> {
    let query = prop::collection::vec(
        (prop::sample::select(SECRET_NAMES.to_vec()), secret(), any::<bool>()),
        0..3,
    );
    let plain = prop::sample::select(vec!["", "sslmode=disable", "application_name=memsift"]);
    (
        prop::sample::select(vec!["postgres", "postgresql", "sqlite"]),
        "[a-z]{1,8}",
        prop::option::of((secret(), any::<bool>())),
        query,
        plain,
    )
        .prop_map(move |(scheme, user, password, query, plain)| {
            let mut secrets = Vec::new();
            let mut parameters: Vec<String> = query
                .into_iter()
                .map(|(name, secret, encoded)| {
                    let parameter = format!("{name}={}", written(&secret, encoded));
                    secrets.push(secret);
                    parameter
                })
                .collect();
            if !plain.is_empty() && scheme != "sqlite" {
                parameters.push(plain.to_owned());
            }
            let query = if parameters.is_empty() {
                String::new()
            } else {
                format!("?{}", parameters.join("&"))
            };
            let url = if scheme == "sqlite" {
                format!("sqlite://{sqlite_dir}/m.db{query}")
            } else {
                let credentials = match password {
                    Some((secret, encoded)) => {
                        let credentials = format!("{user}:{}", written(&secret, encoded));
                        secrets.push(secret);
                        credentials
                    }
                    None => user,
                };
                format!("{scheme}://{credentials}@{host_port}/memsift_no_such_db{query}")
            };
            SecretUrl { url, secrets }
        })
}

/// Everything written to the log while the test runs, at every level.
#[derive(Clone, Default)]
struct CapturedLogs(Arc<Mutex<Vec<u8>>>);

impl Write for CapturedLogs {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn shows_no_secret(what: &str, text: &str, case: &SecretUrl) -> Result<(), TestCaseError> {
    for secret in &case.secrets {
        for chunk in &secret.chunks {
            prop_assert!(
                !text.contains(chunk.as_str()),
                "{what} shows `{chunk}` of {:?}: {text}",
                case.url
            );
        }
    }
    Ok(())
}

#[test]
fn no_part_of_a_database_secret_reaches_the_redacted_url_an_error_or_the_log() {
    let admin = url::Url::parse(&memsift_store::testing::pg_admin_url()).unwrap();
    let host_port = format!(
        "{}:{}",
        admin.host_str().unwrap_or("127.0.0.1"),
        admin.port().unwrap_or(5432)
    );
    // A refused connection would be retried for 30 s per case: fail at once if the server is down.
    std::net::TcpStream::connect(&host_port)
        .unwrap_or_else(|error| panic!("PostgreSQL at {host_port} is required for this test: {error}"));
    let sqlite_dir = tempfile::tempdir().unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let logs = CapturedLogs::default();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_writer({
            let logs = logs.clone();
            move || logs.clone()
        })
        .finish();
    let _logging = tracing::subscriber::set_default(subscriber);
    let mut runner = TestRunner::new(RunnerConfig::with_cases(256));
    let n_refused_as_unclear = std::cell::Cell::new(0);
    runner
        .run(
            &secret_url(host_port, sqlite_dir.path().display().to_string()),
            |case| {
                shows_no_secret("the redacted URL", &memsift_store::redact(&case.url), &case)?;
                if let Err(unclear) = memsift_core::redact::check_unambiguous(&case.url) {
                    n_refused_as_unclear.set(n_refused_as_unclear.get() + 1);
                    shows_no_secret("the refusal", &unclear.to_string(), &case)?;
                }
                logs.0.lock().unwrap().clear();
                let opened = runtime.block_on(memsift_engine::app::App::open_with_system_clock(
                    Config::defaults(),
                    &case.url,
                ));
                let error = match opened {
                    // Only a SQLite URL with no parameter opens: the PostgreSQL database does not
                    // exist, and SQLite refuses every secret parameter.
                    Ok(_) if case.secrets.is_empty() && case.url.starts_with("sqlite:") => return Ok(()),
                    Ok(_) => return Err(TestCaseError::fail(format!("{} opened a database", case.url))),
                    Err(error) => format!("{error:#}"),
                };
                shows_no_secret("the connection error", &error, &case)?;
                let logged = String::from_utf8_lossy(&logs.0.lock().unwrap()).into_owned();
                shows_no_secret("the log", &logged, &case)?;
                Ok(())
            },
        )
        .unwrap();
    // The generator reaches both kinds of URL: ones read one way, and ones refused as unclear.
    assert!(n_refused_as_unclear.get() > 0);
}

#[test]
fn every_option_read_from_the_environment_hides_its_value_in_help() {
    use clap::CommandFactory;

    fn check(command: &clap::Command, n_checked: &mut usize) {
        for argument in command.get_arguments() {
            if argument.get_env().is_some() {
                assert!(
                    argument.is_hide_env_values_set(),
                    "--{} reads {:?} but `--help` would print its value",
                    argument.get_id(),
                    argument.get_env()
                );
                *n_checked += 1;
            }
        }
        for subcommand in command.get_subcommands() {
            check(subcommand, n_checked);
        }
    }
    let mut n_checked = 0;
    check(&memsift::cli::Cli::command(), &mut n_checked);
    assert!(n_checked >= 1, "MEMSIFT_DATABASE_URL is read through clap");
}
