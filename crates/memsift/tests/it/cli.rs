//! The `memsift` process as a user runs it: exit codes, one-line errors, the demo.

use std::process::Command;

fn memsift(home: &std::path::Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_memsift"));
    // A fresh machine: no configuration, no database, no keys in the environment.
    command
        .env_clear()
        .env("HOME", home)
        .env("PATH", std::env::var_os("PATH").unwrap_or_default());
    command
}

/// The MiniLM directory every test shares (installed once per machine, as `.ci/run` does), so a
/// fresh HOME does not download 90 MB per test.
fn installed_model_dir() -> std::path::PathBuf {
    let dir = memsift_embed::model::default_model_dir();
    memsift_embed::model::locate_or_install(&dir)
        .unwrap_or_else(|error| panic!("the MiniLM model is needed at {}: {error}", dir.display()))
        .dir
}

#[test]
fn the_demo_runs_twice_on_a_fresh_home_and_ends_with_its_summary() {
    let home = tempfile::tempdir().unwrap();
    let model_dir = installed_model_dir();
    for _ in 0..2 {
        let output = memsift(home.path())
            .env("MEMSIFT_MODEL_DIR", &model_dir)
            .arg("demo")
            .output()
            .unwrap();
        let stdout = String::from_utf8(output.stdout).unwrap();
        assert!(
            output.status.success(),
            "stderr: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        // The sample holds five conversations; the summary must agree with the tables printed above it.
        let last = stdout.lines().last().unwrap();
        let n_memory_rows = stdout.lines().filter(|row| row.contains("┆ The user")).count();
        assert!(n_memory_rows > 0, "{stdout}");
        assert_eq!(last, format!("demo: 5 segments, {n_memory_rows} memories"));
        assert!(
            stdout.contains("demo: embeddings: all-MiniLM-L6-v2 (384 dimensions)"),
            "{stdout}"
        );
    }
    assert!(home.path().join(".local/share/memsift/memsift-demo.db").exists());
}

#[test]
fn without_the_model_or_pip_the_demo_says_so_once_and_runs_on_the_labelled_double() {
    let home = tempfile::tempdir().unwrap();
    let no_tools = home.path().join("empty-bin");
    std::fs::create_dir_all(&no_tools).unwrap();
    let output = memsift(home.path())
        .env("PATH", &no_tools)
        .env("MEMSIFT_MODEL_DIR", home.path().join("no-model"))
        .args(["demo", "--lane", "heuristic"])
        .output()
        .unwrap();
    let stdout = String::from_utf8(output.stdout).unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let said: Vec<&str> = stdout
        .lines()
        .filter(|line| line.contains("could not be installed"))
        .collect();
    assert_eq!(said.len(), 1, "{stdout}");
    assert!(
        said[0].contains("python3"),
        "the line names what was missing: {}",
        said[0]
    );
    assert!(
        stdout.contains("demo: embeddings: hashing-384-v1 (TEST DOUBLE"),
        "{stdout}"
    );
    assert!(
        stdout.lines().last().unwrap().starts_with("demo: 5 segments, "),
        "{stdout}"
    );
}

#[test]
fn a_bad_import_line_prints_one_error_line_and_exits_nonzero() {
    let home = tempfile::tempdir().unwrap();
    let file = home.path().join("chat.jsonl");
    std::fs::write(&file, "{\"user\":\"a\",\"conversation\":\"c\",\"role\":\"robot\",\"content\":\"hi\",\"timestamp\":\"2026-03-01T10:00:00Z\"}\n").unwrap();
    let database = format!("sqlite://{}", home.path().join("m.db").display());
    let output = memsift(home.path())
        .args(["--database", &database, "import", "--format", "jsonl"])
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert_eq!(
        stderr,
        format!(
            "error: import: {}:1: field `role`: `robot` is not a valid role: expected one of user assistant tool system; nothing from this file was stored\n",
            file.display()
        )
    );
}

#[test]
fn check_config_names_the_missing_key_of_a_tier() {
    let home = tempfile::tempdir().unwrap();
    let config = home.path().join("memsift.toml");
    std::fs::write(&config, "[billing]\ntiers = [\"standard\", \"free\"]\n").unwrap();
    let output = memsift(home.path())
        .arg("--config")
        .arg(&config)
        .arg("check-config")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(
        String::from_utf8(output.stderr).unwrap(),
        "error: config: no [llm.extraction_free] section, but tier `free` reaches purpose `extraction`; add [llm.extraction_free] or remove `free` from billing.tiers\n"
    );
}

#[test]
fn erase_without_yes_refuses_in_one_line_and_keeps_everything() {
    let home = tempfile::tempdir().unwrap();
    let file = home.path().join("chat.jsonl");
    std::fs::write(&file, "{\"user\":\"ana\",\"conversation\":\"c\",\"role\":\"user\",\"content\":\"I live in Lisbon.\",\"timestamp\":\"2026-03-01T10:00:00Z\"}\n").unwrap();
    let database = format!("sqlite://{}", home.path().join("m.db").display());
    let import = memsift(home.path())
        .args(["--database", &database, "import", "--format", "jsonl"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(import.status.success());
    let refused = memsift(home.path())
        .args(["--database", &database, "erase", "--user", "ana"])
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(1));
    assert_eq!(
        String::from_utf8(refused.stderr).unwrap(),
        "error: erase: refusing to erase user `ana` without --yes; erasure removes their memories and conversations for good\n"
    );
    let segments = memsift(home.path())
        .args(["--database", &database, "--json", "segments"])
        .output()
        .unwrap();
    let rows: serde_json::Value = serde_json::from_slice(&segments.stdout).unwrap();
    assert_eq!(rows.as_array().unwrap().len(), 1, "nothing was erased");
    let erased = memsift(home.path())
        .args(["--database", &database, "--json", "erase", "--user", "ana", "--yes"])
        .output()
        .unwrap();
    assert!(erased.status.success(), "{}", String::from_utf8_lossy(&erased.stderr));
    let receipt: serde_json::Value = serde_json::from_slice(&erased.stdout).unwrap();
    assert_eq!(
        (receipt["n_segments"].as_i64(), receipt["n_messages"].as_i64()),
        (Some(1), Some(1))
    );
}
