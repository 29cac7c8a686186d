//! The `memsift` process as a user runs it: exit codes, one-line errors, the demo.

use std::process::Command;

use crate::helpers::installed_model_dir;

fn memsift(home: &std::path::Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_memsift"));
    // A fresh machine: no configuration, no database, no keys in the environment.
    command
        .env_clear()
        .env("HOME", home)
        .env("PATH", std::env::var_os("PATH").unwrap_or_default());
    command
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

/// `memsift --config FILE check-config` with `toml` as the file.
fn check_config(toml: &str) -> std::process::Output {
    let home = tempfile::tempdir().unwrap();
    let config = home.path().join("memsift.toml");
    std::fs::write(&config, toml).unwrap();
    memsift(home.path())
        .arg("--config")
        .arg(&config)
        .arg("check-config")
        .output()
        .unwrap()
}

#[test]
fn check_config_names_the_missing_key_of_a_tier() {
    let output = check_config("[billing]\ntiers = [\"standard\", \"free\"]\n");
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(
        String::from_utf8(output.stderr).unwrap(),
        "error: config: no [llm.extraction_free] section, but tier `free` reaches purpose `extraction`; add [llm.extraction_free] or remove `free` from billing.tiers\n"
    );
}

#[test]
fn check_config_refuses_a_request_that_could_pass_its_models_window_in_one_line() {
    let route = "[llm.extraction_standard]\nprovider = \"anthropic\"\nmodel = \"claude-haiku-4-5\"\napi_key_env = \"ANTHROPIC_API_KEY\"\n";
    let output = check_config(&format!("{route}max_tokens = 64001\n"));
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(
        String::from_utf8(output.stderr).unwrap(),
        "error: config: llm.extraction_standard.max_tokens = 64001 is invalid: claude-haiku-4-5 writes at most 64000 output tokens (prices.\"claude-haiku-4-5\".max_output_tokens); use at most that\n"
    );
    // A budget that cannot hold the extraction prompt is refused here as at start-up.
    let output = check_config("[batch]\nchunk_budget_tokens = 300\n");
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(
        stderr.starts_with(
            "error: config: batch.chunk_budget_tokens = 300 is invalid: the extraction prompt (extraction@"
        ) && stderr.contains("; use at least ")
            && stderr.lines().count() == 1,
        "{stderr}"
    );
}

#[test]
fn check_config_warns_when_a_marked_prompt_can_never_be_cached() {
    // Without a cache_ttl too: the warning must not claim one was set.
    let output = check_config(
        "[llm.extraction_standard]\nprovider = \"anthropic\"\nmodel = \"claude-haiku-4-5\"\napi_key_env = \"ANTHROPIC_API_KEY\"\n",
    );
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let stdout = String::from_utf8(output.stdout).unwrap();
    let warnings: Vec<&str> = stdout.lines().filter(|line| line.starts_with("warning: ")).collect();
    assert_eq!(warnings.len(), 1, "{stdout}");
    assert!(
        warnings[0].starts_with("warning: llm.extraction_standard: the extraction prompt is ")
            && warnings[0].contains("under the 4096 tokens claude-haiku-4-5 caches at least")
            && warnings[0].ends_with("billed as plain input, whatever cache_ttl says"),
        "{stdout}"
    );
    assert!(stdout.lines().last().unwrap().starts_with("config ok: "), "{stdout}");
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

/// A process's exit code, stdout and stderr.
type Outcome = (i32, String, String);

/// Runs `memsift --config CONFIG --database DB --json ARGS…`.
fn json_run(home: &std::path::Path, config: &std::path::Path, database: &str, args: &[&str]) -> Outcome {
    let output = memsift(home)
        .arg("--config")
        .arg(config)
        .args(["--database", database, "--json"])
        .args(args)
        .output()
        .unwrap();
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8(output.stdout).unwrap(),
        String::from_utf8(output.stderr).unwrap(),
    )
}

#[test]
fn every_user_scoped_cli_command_run_as_another_user_finds_nothing_and_changes_nothing() {
    // Invariant 9 for the CLI: bo's commands never read or change ana's memories, journal,
    // requests or segments, whatever ids they are given.
    let home = tempfile::tempdir().unwrap();
    let config = home.path().join("memsift.toml");
    std::fs::write(&config, "[embeddings]\nbackend = \"hashing\"\n").unwrap();
    let database = format!("sqlite://{}", home.path().join("m.db").display());
    let file = home.path().join("chat.jsonl");
    let line = |user: &str, minute: u32, text: &str| {
        format!(
            "{{\"user\":\"{user}\",\"conversation\":\"{user}-c\",\"role\":\"user\",\"content\":\"{text}\",\"timestamp\":\"2026-03-01T10:{minute:02}:00Z\",\"boundary\":true}}\n"
        )
    };
    std::fs::write(
        &file,
        [
            line("ana", 0, "I live in Lisbon and I have a dog named Rex."),
            line("bo", 1, "I work at Fernwood Labs."),
        ]
        .concat(),
    )
    .unwrap();
    let run = |args: &[&str]| json_run(home.path(), &config, &database, args);
    assert_eq!(run(&["import", "--format", "jsonl", file.to_str().unwrap()]).0, 0);
    assert_eq!(run(&["extract", "--pending"]).0, 0);
    let (_, listing, _) = run(&["memories", "--user", "ana"]);
    let ana_memories: Vec<serde_json::Value> = serde_json::from_str(&listing).unwrap();
    assert!(!ana_memories.is_empty());
    let ana_id = ana_memories[0]["id"].as_str().unwrap().to_owned();
    let (code, confirmed, stderr) = run(&["memory", "confirm", "--user", "ana", &ana_id, "--reason", "she said so"]);
    assert_eq!(code, 0, "{stderr}");
    let ana_operation = serde_json::from_str::<serde_json::Value>(&confirmed).unwrap()["operation_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let ana_rows = |run: &dyn Fn(&[&str]) -> Outcome| {
        let (_, listing, _) = run(&["memories", "--user", "ana"]);
        let rows: Vec<serde_json::Value> = serde_json::from_str(&listing).unwrap();
        rows.into_iter()
            .map(|row| (row["id"].clone(), row["text"].clone(), row["confidence"].clone()))
            .collect::<Vec<_>>()
    };
    let before = ana_rows(&run);

    // Commands naming one of ana's ids as bo fail with one line and change nothing.
    for args in [
        vec!["memory", "confirm", "--user", "bo", &ana_id, "--reason", "x"],
        vec!["memory", "expire", "--user", "bo", &ana_id, "--reason", "x"],
        vec![
            "memory",
            "supersede",
            "--user",
            "bo",
            &ana_id,
            "--content",
            "Ana lives in Porto.",
            "--reason",
            "x",
        ],
        vec!["undo", "--user", "bo", &ana_operation],
    ] {
        let (code, stdout, stderr) = run(&args);
        assert_eq!(code, 1, "{args:?}: {stdout}");
        assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
        assert!(stderr.contains("bo"), "{args:?}: {stderr}");
    }
    // Listings and stages scoped to bo show none of ana's ids or texts.
    for args in [
        vec!["memories", "--user", "bo"],
        vec!["segments", "--user", "bo"],
        vec!["requests", "--user", "bo"],
        vec!["replay", "--user", "bo", "--dry-run"],
        vec!["postprocess", "all", "--user", "bo", "--dry-run"],
    ] {
        let (code, stdout, stderr) = run(&args);
        assert_eq!(code, 0, "{args:?}: {stderr}");
        assert!(
            !stdout.contains(&ana_id) && !stdout.contains("Lisbon"),
            "{args:?}: {stdout}"
        );
    }
    // Erasing bo leaves ana exactly as she was.
    assert_eq!(run(&["erase", "--user", "bo", "--yes"]).0, 0);
    assert_eq!(ana_rows(&run), before);
}

/// A password a URL may hold, with the characters that defeat naive redaction.
const DATABASE_PASSWORD: &str = "Hunter2@Blue:Sky";

#[test]
fn help_and_check_config_never_print_a_database_password() {
    let home = tempfile::tempdir().unwrap();
    let url = "postgres://memsift:Hunter2@Blue:Sky@db.internal:5432/memsift?sslpassword=Hunter2Key&sslmode=require";
    let help = memsift(home.path())
        .env("MEMSIFT_DATABASE_URL", url)
        .arg("--help")
        .output()
        .unwrap();
    assert!(help.status.success());
    let help = String::from_utf8(help.stdout).unwrap();
    assert!(help.contains("[env: MEMSIFT_DATABASE_URL]"), "{help}");
    assert!(!help.contains("Hunter2") && !help.contains("db.internal"), "{help}");

    let from_env = memsift(home.path())
        .env("MEMSIFT_DATABASE_URL", url)
        .arg("check-config")
        .output()
        .unwrap();
    let from_flag = memsift(home.path())
        .args(["--database", url, "check-config"])
        .output()
        .unwrap();
    for output in [from_env, from_flag] {
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        let stdout = String::from_utf8(output.stdout).unwrap();
        assert!(
            stdout.contains(
                "database postgres://memsift:***@db.internal:5432/memsift?sslpassword=***&sslmode=require (TLS sslmode=require: "
            ),
            "{stdout}"
        );
        assert!(!stdout.contains("Hunter2"), "{stdout}");
    }

    // A password holding a `/` reads two ways: check-config refuses it without showing any of it.
    let unclear = format!(
        "postgres://memsift:{}/x@db.internal/memsift",
        DATABASE_PASSWORD.replace('@', "%40")
    );
    let refused = memsift(home.path())
        .args(["--database", &unclear, "check-config"])
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(1));
    let stderr = String::from_utf8(refused.stderr).unwrap();
    assert!(!stderr.contains("Hunter2") && stderr.contains("%40"), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
}

/// A copy of the installed model with one pinned file changed by one byte.
fn tampered_model(home: &std::path::Path) -> std::path::PathBuf {
    let installed = installed_model_dir();
    let tampered = home.join("tampered-model");
    std::fs::create_dir_all(&tampered).unwrap();
    for file in memsift_embed::model::pinned_files() {
        std::fs::copy(installed.join(file.name), tampered.join(file.name)).unwrap();
    }
    let config = tampered.join("config.json");
    let mut bytes = std::fs::read(&config).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0x20;
    std::fs::write(&config, bytes).unwrap();
    tampered
}

#[test]
fn a_tampered_model_file_is_refused_in_one_line_naming_the_install_command() {
    let home = tempfile::tempdir().unwrap();
    let tampered = tampered_model(home.path());
    let database = format!("sqlite://{}", home.path().join("m.db").display());
    let output = memsift(home.path())
        .env("MEMSIFT_MODEL_DIR", &tampered)
        .args(["--database", &database, "run", "--until-idle"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(
        String::from_utf8(output.stderr).unwrap(),
        format!(
            "error: the MiniLM model file {} does not match its pinned SHA-256 (altered, corrupted or another version); run `memsift model install` to replace it\n",
            tampered.join("config.json").display()
        )
    );
    // Nothing repaired it behind the operator's back: the file is still the altered one.
    assert!(matches!(
        memsift_embed::model::verify(&tampered),
        Err(memsift_embed::model::ModelError::Altered { .. })
    ));
}

#[test]
fn run_and_extract_never_install_a_missing_model() {
    let home = tempfile::tempdir().unwrap();
    let missing = home.path().join("no-model");
    let database = format!("sqlite://{}", home.path().join("m.db").display());
    for command in [&["run", "--until-idle"][..], &["extract", "--pending"][..]] {
        let output = memsift(home.path())
            .env("MEMSIFT_MODEL_DIR", &missing)
            .args(["--database", &database])
            .args(command)
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(1), "{command:?}");
        let stderr = String::from_utf8(output.stderr).unwrap();
        assert_eq!(
            stderr,
            format!(
                "error: the MiniLM model is not installed in {} (no config.json); run `memsift model install`, or point MEMSIFT_MODEL_DIR or [embeddings] model_dir at an installed copy\n",
                missing.display()
            ),
            "{command:?}"
        );
        assert!(!missing.exists(), "nothing was fetched at run time");
    }
}

/// A home with a hashing-embedder config and a SQLite database: the `memsift` runs of one test.
struct Workspace {
    home: tempfile::TempDir,
    config: std::path::PathBuf,
    database: String,
}

impl Workspace {
    fn new() -> Workspace {
        let home = tempfile::tempdir().unwrap();
        let config = home.path().join("memsift.toml");
        std::fs::write(&config, "[embeddings]\nbackend = \"hashing\"\n").unwrap();
        let database = format!("sqlite://{}", home.path().join("m.db").display());
        Workspace { home, config, database }
    }

    /// `memsift --config … --database … ARGS…` (plain output).
    fn run(&self, args: &[&str]) -> Outcome {
        let output = memsift(self.home.path())
            .arg("--config")
            .arg(&self.config)
            .args(["--database", &self.database])
            .args(args)
            .output()
            .unwrap();
        (
            output.status.code().unwrap_or(-1),
            String::from_utf8(output.stdout).unwrap(),
            String::from_utf8(output.stderr).unwrap(),
        )
    }

    /// The same with `--json`.
    fn json(&self, args: &[&str]) -> Outcome {
        json_run(self.home.path(), &self.config, &self.database, args)
    }

    /// Imports one closed single-turn segment per `(user, text)`.
    fn import(&self, segments: &[(&str, &str)]) {
        let file = self.home.path().join(format!("chat-{}.jsonl", segments.len()));
        let lines: String = segments
            .iter()
            .enumerate()
            .map(|(minute, (user, text))| {
                format!(
                    "{{\"user\":\"{user}\",\"conversation\":\"{user}-{minute}\",\"role\":\"user\",\"content\":\"{text}\",\"timestamp\":\"2026-03-01T10:{:02}:{:02}Z\",\"boundary\":true}}\n",
                    minute / 60 % 60,
                    minute % 60
                )
            })
            .collect();
        std::fs::write(&file, lines).unwrap();
        let (code, _, stderr) = self.run(&["import", "--format", "jsonl", file.to_str().unwrap()]);
        assert_eq!(code, 0, "{stderr}");
    }
}

/// The first column of every data row of a printed table: the ids as a person reads them.
fn first_column(table: &str) -> Vec<String> {
    table
        .lines()
        .filter_map(|line| line.strip_prefix('│'))
        .filter_map(|row| row.split(['┆', '│']).next())
        .map(|cell| cell.trim().to_owned())
        .filter(|cell| !cell.is_empty() && cell.chars().all(|c| c.is_ascii_hexdigit()))
        .collect()
}

fn json_rows(stdout: &str) -> Vec<serde_json::Value> {
    serde_json::from_str(stdout).unwrap_or_else(|error| panic!("not JSON ({error}): {stdout}"))
}

#[test]
fn the_twelve_character_ids_tables_print_are_accepted_wherever_an_id_is_asked_for() {
    let ws = Workspace::new();
    ws.import(&[
        ("ana", "I live in Lisbon and I have a dog named Rex."),
        ("ana", "I work at Fernwood Labs as a nurse."),
    ]);
    let (_, segments, _) = ws.run(&["segments"]);
    let segment_ids = first_column(&segments);
    assert_eq!(segment_ids.len(), 2, "{segments}");
    assert!(segment_ids.iter().all(|id| id.len() == 12), "{segment_ids:?}");
    // extract --segment takes the segment as the table printed it.
    let (code, _, stderr) = ws.run(&["extract", "--segment", &segment_ids[0]]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(ws.json(&["extract", "--pending"]).0, 0);

    let (_, requests, _) = ws.run(&["requests"]);
    let request_ids = first_column(&requests);
    assert_eq!(request_ids.len(), 2, "{requests}");
    let (code, detail, stderr) = ws.json(&["show", &request_ids[0]]);
    assert_eq!(code, 0, "{stderr}");
    let detail: serde_json::Value = serde_json::from_str(&detail).unwrap();
    assert!(detail["id"].as_str().unwrap().ends_with(&request_ids[0]), "{detail}");
    let (code, _, stderr) = ws.json(&["replay", "--request", &request_ids[1], "--dry-run"]);
    assert_eq!(code, 0, "{stderr}");

    let (_, memories, _) = ws.run(&["memories", "--user", "ana"]);
    let memory_ids = first_column(&memories);
    assert!(!memory_ids.is_empty(), "{memories}");
    // `show` takes a memory as the table printed it, and says which model wrote it.
    let (code, shown, stderr) = ws.json(&["show", &memory_ids[0]]);
    assert_eq!(code, 0, "{stderr}");
    let shown: serde_json::Value = serde_json::from_str(&shown).unwrap();
    assert!(shown["id"].as_str().unwrap().ends_with(&memory_ids[0]), "{shown}");
    assert_eq!(shown["model"], "heuristic", "{shown}");
    let (code, confirmed, stderr) = ws.json(&[
        "memory",
        "confirm",
        "--user",
        "ana",
        &memory_ids[0],
        "--reason",
        "she said so",
    ]);
    assert_eq!(code, 0, "{stderr}");
    let operation = serde_json::from_str::<serde_json::Value>(&confirmed).unwrap()["operation_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let (code, _, stderr) = ws.json(&["undo", "--user", "ana", &operation[operation.len() - 12..]]);
    assert_eq!(code, 0, "{stderr}");

    // Four characters both requests begin with (UUIDv7s of the same minute) are ambiguous: one
    // line naming the input and both full ids, and nothing shown.
    let full_ids: Vec<String> = json_rows(&ws.json(&["requests"]).1)
        .iter()
        .map(|row| row["id"].as_str().unwrap().to_owned())
        .collect();
    let prefix = &full_ids[0][..4];
    assert!(full_ids.iter().all(|id| id.starts_with(prefix)));
    let (code, stdout, stderr) = ws.run(&["show", prefix]);
    assert_eq!((code, stdout.as_str()), (1, ""));
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains(&format!("`{prefix}` names more than one request, batch or memory")),
        "{stderr}"
    );
    assert!(full_ids.iter().all(|id| stderr.contains(id.as_str())), "{stderr}");
    // No match, and too little to go on, are one line each too.
    for (input, says) in [
        (
            "0000000000ff",
            "no request, batch or memory id begins or ends with `0000000000ff`",
        ),
        ("abc", "`abc` is too short to name a request, batch or memory"),
    ] {
        let (code, _, stderr) = ws.run(&["show", input]);
        assert_eq!(code, 1);
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(stderr.contains(says), "{stderr}");
    }
}

#[test]
fn extract_segment_extracts_that_segment_and_no_other_due_one() {
    let ws = Workspace::new();
    ws.import(&[
        ("ana", "I live in Lisbon and I have a dog named Rex."),
        ("bo", "I work at Fernwood Labs as a nurse."),
    ]);
    let segments = json_rows(&ws.json(&["segments"]).1);
    assert!(
        segments.iter().all(|segment| segment["status"] == "closed"),
        "{segments:?}"
    );
    let ana = segments.iter().find(|segment| segment["user"] == "ana").unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let (code, report, stderr) = ws.json(&["extract", "--segment", &ana]);
    assert_eq!(code, 0, "{stderr}");
    let report: serde_json::Value = serde_json::from_str(&report).unwrap();
    assert_eq!(report["n_segments_extracted"], 1, "{report}");
    assert_eq!(report["n_segments_planned"], 1, "{report}");
    let statuses: Vec<(String, String)> = json_rows(&ws.json(&["segments"]).1)
        .iter()
        .map(|row| {
            (
                row["user"].as_str().unwrap().to_owned(),
                row["status"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        statuses,
        [
            ("ana".to_owned(), "extracted".to_owned()),
            ("bo".to_owned(), "closed".to_owned())
        ]
    );
    assert!(json_rows(&ws.json(&["requests", "--user", "bo"]).1).is_empty());
}

#[test]
fn a_listing_piped_into_a_closed_reader_ends_quietly_with_exit_0() {
    use std::io::BufRead;

    let ws = Workspace::new();
    // Far more than a pipe holds, so the listing is still writing when its reader goes.
    let texts: Vec<String> = (0..1500).map(|n| format!("I have {n} plants.")).collect();
    let segments: Vec<(&str, &str)> = texts.iter().map(|text| ("ana", text.as_str())).collect();
    ws.import(&segments);
    let mut child = memsift(ws.home.path())
        .arg("--config")
        .arg(&ws.config)
        .args(["--database", &ws.database, "segments"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut reader = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut first = String::new();
    reader.read_line(&mut first).unwrap();
    assert!(first.starts_with('┌'), "{first}");
    drop(reader);
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert_eq!(stderr, "", "no panic message, no backtrace");
}

/// Every subcommand's path, from `memsift --help` down (`["memory", "confirm"]`, …).
fn subcommands(home: &std::path::Path, path: &[String]) -> Vec<Vec<String>> {
    let output = memsift(home).args(path).arg("--help").output().unwrap();
    let help = String::from_utf8(output.stdout).unwrap();
    let mut found = vec![path.to_vec()];
    let commands = help
        .split("Commands:\n")
        .nth(1)
        .map(|rest| rest.split("\n\n").next().unwrap_or_default())
        .unwrap_or_default();
    for line in commands.lines() {
        let Some(name) = line.split_whitespace().next() else {
            continue;
        };
        // An entry is indented by two spaces; its wrapped description, by more.
        if name == "help" || !line.starts_with("  ") || line.starts_with("   ") {
            continue;
        }
        let mut child = path.to_vec();
        child.push(name.to_owned());
        found.extend(subcommands(home, &child));
    }
    found
}

#[test]
fn every_file_a_help_text_names_exists() {
    let home = tempfile::tempdir().unwrap();
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut named = Vec::new();
    let commands = subcommands(home.path(), &[]);
    assert!(commands.len() > 20, "{commands:?}");
    for command in &commands {
        let output = memsift(home.path()).args(command).arg("--help").output().unwrap();
        assert!(output.status.success(), "{command:?}");
        let help = String::from_utf8(output.stdout).unwrap();
        for word in help.split_whitespace() {
            let word = word.trim_matches(|c: char| "()[]{},;:.`'\"".contains(c));
            let is_file = [".rs", ".md", ".toml", ".json", ".sh", ".sql"]
                .iter()
                .any(|extension| word.ends_with(extension));
            if is_file && word.contains('/') {
                named.push((command.join(" "), word.to_owned()));
            }
        }
    }
    assert!(
        named.iter().any(|(_, file)| file == "config/memsift.toml"),
        "the scan finds the paths help names: {named:?}"
    );
    let missing: Vec<_> = named.iter().filter(|(_, file)| !root.join(file).exists()).collect();
    assert!(missing.is_empty(), "help names files that do not exist: {missing:?}");
}

#[test]
fn check_config_refuses_an_llm_section_no_route_reaches() {
    let output = check_config("[llm.extraction_premum]\nprovider = \"heuristic\"\n");
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with("error: config: no route reaches [llm.extraction_premum]: ")
            && stderr.contains("billing.tiers [\"standard\"]")
            && stderr.contains("the sections routes reach are consolidation_review_standard, consolidation_standard, entity_gc_standard, extraction_review_standard, extraction_standard, "),
        "{stderr}"
    );
    // A section a route reaches only as a fallback is reached.
    let output = check_config(
        "[llm.extraction_standard]\nprovider = \"heuristic\"\nfallback = [\"extraction_spare\"]\n\n[llm.extraction_spare]\nprovider = \"heuristic\"\n",
    );
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    // So is one of a tier that is listed.
    let output = check_config(
        "[billing]\ntiers = [\"standard\", \"premium\"]\n\n[postprocess]\nenabled = false\n\n[llm.extraction_premium]\nprovider = \"heuristic\"\n",
    );
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
}

#[tokio::test]
async fn a_run_with_failed_attempts_says_how_many_as_the_store_counts() {
    // Every batch request ends errored: each attempt fails, until the request is out of them.
    let always_errored = memsift_sim::FaultConfig {
        request_errored_share: 1.0,
        ..memsift_sim::FaultConfig::default()
    };
    let test =
        crate::helpers::TestApp::with_batch_sim(memsift_store::testing::TestDb::sqlite().await, always_errored).await;
    test.import(
        "chat.jsonl",
        &crate::helpers::line("ana", "c1", 0, "user", "I live in Lisbon.", true),
    )
    .await
    .unwrap();
    let total = memsift_engine::pipeline::run_until_idle(&test.app).await.unwrap();
    let failed_in_store = test
        .app
        .store
        .listing()
        .list_requests(None, None, None)
        .await
        .unwrap()
        .iter()
        .filter(|row| {
            matches!(
                row.status.as_str(),
                "errored" | "expired" | "canceled" | "dead" | "failed"
            )
        })
        .count() as u64;
    assert_eq!(failed_in_store, u64::from(test.app.config.extraction.max_attempts));
    assert_eq!(total.n_failed_attempts(), failed_in_store);
    let summary = memsift::cli::step_summary("run", &total);
    assert!(
        summary.contains(&format!(
            ", {failed_in_store} attempts failed (1 requests out of attempts), "
        )),
        "{summary}"
    );
    test.finish().await;
}
