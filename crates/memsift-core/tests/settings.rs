//! The settings generator: every numeric setting of the configuration, given a random value (0,
//! negative, huge, NaN, infinities, fractions), either loads into a `Config` whose durations the
//! code can build and add to any date it meets without panicking, or is refused in one line that
//! names the setting's dotted key.

use chrono::{DateTime, TimeZone, Utc};
use memsift_core::config::{Config, DEFAULT_CONFIG_TOML};
use proptest::prelude::*;

/// Numeric settings that are optional, so the defaults do not carry them.
const OPTIONAL_NUMBERS: &[&[&str]] = &[
    &["embeddings", "dimension"],
    &["llm", "extraction_standard", "temperature"],
    &["llm", "extraction_standard", "max_tokens"],
    &["llm", "extraction_standard", "thinking_budget_tokens"],
    &["quotas", "anthropic/claude-haiku-4-5", "requests_per_minute"],
    &["quotas", "anthropic/claude-haiku-4-5", "tokens_per_minute"],
    &["billing", "daily_budget_usd", "standard"],
];

/// Every integer or float leaf of the built-in defaults, as a path of keys, plus the optional ones.
fn numeric_settings() -> Vec<Vec<String>> {
    fn walk(table: &toml::Table, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
        for (key, value) in table {
            prefix.push(key.clone());
            match value {
                toml::Value::Table(inner) => walk(inner, prefix, out),
                toml::Value::Integer(_) | toml::Value::Float(_) => out.push(prefix.clone()),
                _ => {}
            }
            prefix.pop();
        }
    }
    let defaults: toml::Table = toml::from_str(DEFAULT_CONFIG_TOML).unwrap();
    let mut out = Vec::new();
    walk(&defaults, &mut Vec::new(), &mut out);
    out.extend(
        OPTIONAL_NUMBERS
            .iter()
            .map(|path| path.iter().map(|key| (*key).to_owned()).collect()),
    );
    out
}

/// Values worth trying: the edges, the type confusions and a random spread.
fn value() -> impl Strategy<Value = toml::Value> {
    prop_oneof![
        Just(toml::Value::Integer(0)),
        Just(toml::Value::Integer(1)),
        Just(toml::Value::Integer(-1)),
        Just(toml::Value::Integer(i64::MAX)),
        Just(toml::Value::Integer(i64::MIN)),
        Just(toml::Value::Integer(10_000_000_000_000)),
        Just(toml::Value::Integer(i64::from(u32::MAX) + 1)),
        Just(toml::Value::Float(f64::NAN)),
        Just(toml::Value::Float(f64::INFINITY)),
        Just(toml::Value::Float(f64::NEG_INFINITY)),
        Just(toml::Value::Float(1e13)),
        Just(toml::Value::Float(0.5)),
        Just(toml::Value::Float(-0.0)),
        any::<i64>().prop_map(toml::Value::Integer),
        (0i64..100_000).prop_map(toml::Value::Integer),
        any::<f64>().prop_map(toml::Value::Float),
    ]
}

/// The overlay setting `path` to `value`, as TOML text (quoted keys included).
fn overlay(path: &[String], value: toml::Value) -> String {
    let mut inner = toml::Table::new();
    inner.insert(path.last().unwrap().clone(), value);
    let table = path[..path.len() - 1].iter().rev().fold(inner, |table, key| {
        let mut outer = toml::Table::new();
        outer.insert(key.clone(), toml::Value::Table(table));
        outer
    });
    toml::to_string(&table).unwrap()
}

/// The latest date the code adds a setting's duration to: far in the future, as a clock may be.
fn far_future() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2200, 1, 1, 0, 0, 0).unwrap()
}

/// Builds every duration the code builds from the configuration and adds it to a far date, the
/// way leases, polls and waits are computed; a value past chrono's range panics here.
fn use_every_duration(config: &Config) {
    let (cool_down, max_cool_down) = config.breaker_cool_downs();
    for duration in [
        config.idle_timeout(),
        config.claim_lease(),
        config.pack_max_wait(),
        config.poll_initial(),
        config.poll_max(),
        config.reconcile_grace(),
        config.schedule_lease(),
        cool_down,
        max_cool_down,
        chrono::Duration::days(i64::from(config.retention.raw_output_days)),
        chrono::Duration::days(i64::from(config.scoring.min_age_days)),
        chrono::Duration::seconds(config.embeddings.idle_unload_secs as i64),
    ] {
        let _ = far_future() + duration;
        let _ = far_future() - duration;
    }
    // The poll backoff doubles up to the cap; the cap is never below the first poll.
    assert!(config.poll_initial() > chrono::Duration::zero());
    assert!(config.poll_max() >= config.poll_initial());
    assert!(config.claim_lease() > chrono::Duration::zero());
    let _ = std::time::Instant::now() + config.drain_timeout();
    assert!(config.database.max_connections >= 1);
    assert!(usize::try_from(config.api.max_body_bytes).is_ok());
    for price in config.prices.values() {
        assert!(price.input_per_mtok.is_finite() && price.output_per_mtok.is_finite());
        assert!(price.cache_step_tokens >= 1);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2048, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn every_numeric_setting_loads_usable_or_is_refused_naming_its_key(
        index in any::<prop::sample::Index>(),
        value in value(),
    ) {
        let settings = numeric_settings();
        let path = &settings[index.index(settings.len())];
        let text = overlay(path, value.clone());
        match Config::from_layers(Some(("generated.toml", &text))) {
            Ok(config) => use_every_duration(&config),
            Err(error) => {
                let message = error.to_string();
                prop_assert!(!message.contains('\n'), "not one line: {message}");
                // Quoted keys print with their quotes (`prices."gpt-4o-mini".input_per_mtok`) or
                // without (serde's path); either names every part.
                let unquoted = message.replace('"', "");
                let key = path.join(".");
                prop_assert!(unquoted.contains(&key), "{key} = {value}: the refusal does not name the key: {message}");
            }
        }
    }
}

#[test]
fn every_numeric_setting_of_the_defaults_is_covered() {
    let settings = numeric_settings();
    for key in [
        "extraction.claim_lease_secs",
        "batch.poll_initial_secs",
        "schedules.lease_secs",
    ] {
        assert!(settings.iter().any(|path| path.join(".") == key), "{key}");
    }
    assert!(settings.len() > 40, "{}", settings.len());
}

#[test]
fn a_lease_of_1e13_seconds_is_refused_with_its_range() {
    let err = Config::from_layers(Some(("t.toml", "[extraction]\nclaim_lease_secs = 10000000000000\n")))
        .unwrap_err()
        .to_string();
    assert_eq!(
        err,
        "config: extraction.claim_lease_secs = 10000000000000 is invalid: use 1 to 31622400 seconds (default 900)"
    );
    let err = Config::from_layers(Some(("t.toml", "[extraction]\nclaim_lease_secs = 1e13\n")))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("extraction.claim_lease_secs") && !err.contains('\n'),
        "{err}"
    );
}

#[test]
fn a_zero_first_poll_is_refused() {
    let err = Config::from_layers(Some(("t.toml", "[batch]\npoll_initial_secs = 0\n")))
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("config: batch.poll_initial_secs = 0 is invalid: use 1 to"),
        "{err}"
    );
}

#[test]
fn a_device_or_a_huge_file_is_refused_after_a_bounded_read() {
    let err = Config::load(std::path::Path::new("/dev/zero")).unwrap_err().to_string();
    assert!(
        err.contains("/dev/zero") && err.contains("larger than 1048576 bytes"),
        "{err}"
    );
    let dir = tempfile_dir();
    let huge = dir.join("huge.toml");
    std::fs::write(&huge, "#".repeat(2 << 20)).unwrap();
    let err = Config::load(&huge).unwrap_err().to_string();
    assert!(err.contains("larger than"), "{err}");
}

#[test]
fn a_syntax_error_is_one_line_naming_the_line() {
    let err = Config::from_layers(Some(("t.toml", "[batch]\npoll_initial_secs = = 3\n")))
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("config file t.toml is invalid: line 2, column"),
        "{err}"
    );
    assert!(!err.contains('\n'), "{err}");
}

#[test]
fn an_empty_database_url_is_refused() {
    let err = Config::from_layers(Some(("t.toml", "[database]\nurl = \"\"\n")))
        .unwrap_err()
        .to_string();
    assert!(err.contains("database.url"), "{err}");
}

fn tempfile_dir() -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("memsift-settings-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
