//! A module doc on every file, no should-panic or ignore attributes, and every path ARCHITECTURE.md
//! names exists.

use std::path::{Path, PathBuf};

use memsift_tidy::workspace_root;

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().and_then(|name| name.to_str()).unwrap_or_default();
        if path.is_dir() {
            if name != "target" && !name.starts_with('.') {
                rust_files(&path, out);
            }
        } else if name.ends_with(".rs") {
            out.push(path);
        }
    }
}

#[test]
fn every_rust_file_opens_with_a_module_doc_and_uses_no_banned_attributes() {
    let mut files = Vec::new();
    rust_files(&workspace_root().join("crates"), &mut files);
    assert!(
        files.len() > 20,
        "found only {} files: is the walk rooted right?",
        files.len()
    );
    let mut problems = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        let relative = file.strip_prefix(workspace_root()).unwrap().display().to_string();
        if !text.starts_with("//!") {
            problems.push(format!(
                "{relative}: first line must be a `//!` doc saying what the file is for"
            ));
        }
        // Assembled so this file does not flag itself.
        for banned in [concat!("#[should", "_panic"), concat!("#[", "ignore")] {
            if text.contains(banned) {
                problems.push(format!(
                    "{relative}: `{banned}]` is not allowed; assert today's behaviour instead"
                ));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// Every file under `dir` (skipping `target` and hidden directories), relative names included.
fn all_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().and_then(|name| name.to_str()).unwrap_or_default();
        if path.is_dir() {
            if name != "target" && !name.starts_with('.') {
                all_files(&path, out);
            }
        } else {
            out.push(path);
        }
    }
}

#[test]
fn every_path_architecture_md_names_exists() {
    let root = workspace_root();
    let text = std::fs::read_to_string(root.join("ARCHITECTURE.md")).unwrap();
    let mut files = Vec::new();
    all_files(&root, &mut files);
    let file_names: Vec<String> = files
        .iter()
        .filter_map(|path| path.file_name()?.to_str().map(str::to_owned))
        .collect();
    let mut problems = Vec::new();
    let mut n_checked = 0;
    for quoted in text.split('`').skip(1).step_by(2) {
        let looks_like_path = !quoted.contains(' ')
            && !quoted.starts_with('/')
            && (quoted.contains('/')
                || [".rs", ".md", ".toml", ".sql", ".sh", ".json", ".py"]
                    .iter()
                    .any(|suffix| quoted.ends_with(suffix) && quoted.len() > suffix.len()));
        if !looks_like_path {
            continue;
        }
        n_checked += 1;
        let found = if quoted.contains('/') {
            // A glob names a directory that must exist; a path such as `tests/it/main.rs` or
            // `stage/plan.rs` may be relative to a crate or its `src`.
            let path = quoted.split('*').next().unwrap_or(quoted);
            root.join(path).exists()
                || std::fs::read_dir(root.join("crates"))
                    .unwrap()
                    .flatten()
                    .any(|krate| krate.path().join(path).exists() || krate.path().join("src").join(path).exists())
        } else {
            file_names.iter().any(|name| name == quoted)
        };
        if !found {
            problems.push(format!("ARCHITECTURE.md names `{quoted}`, which does not exist"));
        }
    }
    assert!(n_checked > 15, "only {n_checked} paths found: is the scan right?");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
