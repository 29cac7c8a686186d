//! Every source file under the line limit and every function under its own.

use memsift_tidy::{MAX_FILE_LINES, MAX_FUNCTION_LINES, rust_files, sizes, workspace_root};

#[test]
fn every_rust_file_is_under_the_line_limit() {
    let root = workspace_root();
    let files = rust_files(&root.join("crates"));
    assert!(files.len() > 100, "found only {} files", files.len());
    let over: Vec<String> = files
        .iter()
        .filter_map(|file| {
            let lines = sizes::line_count(file).unwrap();
            (lines >= MAX_FILE_LINES).then(|| format!("{}: {lines} lines", file.strip_prefix(&root).unwrap().display()))
        })
        .collect();
    assert!(
        over.is_empty(),
        "files must stay under {MAX_FILE_LINES} lines; split these by concern:\n{}",
        over.join("\n")
    );
}

#[test]
fn every_function_is_under_the_line_limit() {
    let root = workspace_root();
    let mut over = Vec::new();
    let mut n_functions = 0;
    for file in rust_files(&root.join("crates")) {
        for function in sizes::function_sizes(&file).unwrap() {
            n_functions += 1;
            if function.lines >= MAX_FUNCTION_LINES {
                over.push(format!(
                    "{}:{} {}: {} lines",
                    file.strip_prefix(&root).unwrap().display(),
                    function.line,
                    function.name,
                    function.lines
                ));
            }
        }
    }
    assert!(n_functions > 1000, "found only {n_functions} functions");
    assert!(
        over.is_empty(),
        "functions must stay under {MAX_FUNCTION_LINES} lines; split these:\n{}",
        over.join("\n")
    );
}

#[test]
fn function_lengths_are_counted_from_signature_to_closing_brace() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("f.rs");
    std::fs::write(
        &file,
        "//! f\n/// doc\nfn one() {}\nstruct S;\nimpl S {\n    fn three(&self)\n    {\n    }\n}\n",
    )
    .unwrap();
    let found: Vec<(String, usize, usize)> = sizes::function_sizes(&file)
        .unwrap()
        .into_iter()
        .map(|function| (function.name, function.line, function.lines))
        .collect();
    assert_eq!(found, vec![("one".to_owned(), 3, 1), ("S::three".to_owned(), 6, 3)]);
}
