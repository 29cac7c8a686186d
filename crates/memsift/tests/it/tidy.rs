//! House rules checked as tests: a module doc on every file, and no should-panic or ignore attributes.

use std::path::{Path, PathBuf};

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .expect("crates/memsift sits two levels below the root")
        .to_owned()
}

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
