//! House rules of the memsift workspace, read from its own sources: no import cycle between the
//! modules of a crate or between crates, size limits on files and functions, a module doc on
//! every file, and the code map in ARCHITECTURE.md kept as the tree is.
//!
//! The rules are tests (`tests/it`); `tidy-report` prints the graphs and the largest files and
//! functions they are checked on.

pub mod crates;
pub mod map;
pub mod modules;
pub mod sizes;

use std::path::{Path, PathBuf};

/// The largest a source file may be, in lines.
pub const MAX_FILE_LINES: usize = 800;
/// The largest a function may be, in lines, signature to closing brace.
pub const MAX_FUNCTION_LINES: usize = 150;

/// The workspace root (two levels above this crate).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .expect("crates/memsift-tidy sits two levels below the root")
        .to_owned()
}

/// Every `.rs` file under `dir`, skipping `target` and hidden directories.
pub fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    collect(dir, &mut out);
    out.sort();
    out
}

fn collect(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = path.file_name().and_then(|name| name.to_str()).unwrap_or_default();
        if path.is_dir() {
            if name != "target" && !name.starts_with('.') {
                collect(&path, out);
            }
        } else if name.ends_with(".rs") {
            out.push(path);
        }
    }
}

/// Each crate's root files (`src/lib.rs`, `src/main.rs`, `src/bin/*.rs`), by crate folder.
pub fn crate_roots(root: &Path) -> Vec<(String, PathBuf)> {
    let mut roots = Vec::new();
    let Ok(entries) = std::fs::read_dir(root.join("crates")) else {
        return roots;
    };
    let mut dirs: Vec<PathBuf> = entries.flatten().map(|entry| entry.path()).collect();
    dirs.sort();
    for dir in dirs {
        let name = dir
            .file_name()
            .and_then(|name| name.to_str())
            .unwrap_or_default()
            .to_owned();
        for file in ["src/lib.rs", "src/main.rs"] {
            if dir.join(file).exists() {
                roots.push((name.clone(), dir.join(file)));
            }
        }
        for bin in rust_files(&dir.join("src/bin")) {
            roots.push((name.clone(), bin));
        }
    }
    roots
}
