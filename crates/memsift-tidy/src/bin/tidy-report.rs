//! Prints what the house rules are checked on: the crate graph, each crate's module cycles, and
//! the largest files and functions; `--write-map` rewrites ARCHITECTURE.md's generated code map.

use memsift_tidy::{map, modules, sizes};

fn main() -> Result<(), String> {
    let root = memsift_tidy::workspace_root();
    if std::env::args().any(|arg| arg == "--write-map") {
        let path = root.join("ARCHITECTURE.md");
        let text = std::fs::read_to_string(&path).map_err(|error| error.to_string())?;
        let block = map::generate(&root)?;
        let updated = map::replace_block(&text, &block)
            .ok_or_else(|| format!("ARCHITECTURE.md has no block opening with {}", map::BEGIN))?;
        std::fs::write(&path, updated).map_err(|error| error.to_string())?;
        println!("ARCHITECTURE.md: code map rewritten");
        return Ok(());
    }
    print!("{}", map::generate(&root)?);
    println!("\nModule cycles:");
    let mut n_cycles = 0;
    for (krate, file) in memsift_tidy::crate_roots(&root) {
        let crate_modules = modules::crate_modules(&file)?;
        for (parent, edges) in modules::sibling_graphs(&crate_modules) {
            for cycle in modules::cycles(&edges) {
                n_cycles += 1;
                println!("  {}", modules::describe_cycle(&krate, &parent, &cycle));
            }
        }
    }
    println!("  {n_cycles} in all");
    let files = memsift_tidy::rust_files(&root.join("crates"));
    let mut lines: Vec<(usize, String)> = Vec::new();
    let mut functions = Vec::new();
    for file in &files {
        let relative = file.strip_prefix(&root).unwrap_or(file).display().to_string();
        lines.push((sizes::line_count(file)?, relative));
        functions.extend(sizes::function_sizes(file)?);
    }
    lines.sort_by(|a, b| b.cmp(a));
    println!("\nLargest files (lines):");
    for (count, file) in lines.iter().take(10) {
        println!("  {count:5}  {file}");
    }
    functions.sort_by_key(|function| std::cmp::Reverse(function.lines));
    println!("\nLongest functions (lines):");
    for function in functions.iter().take(10) {
        let relative = function.file.strip_prefix(&root).unwrap_or(&function.file);
        println!(
            "  {:5}  {}:{} {}",
            function.lines,
            relative.display(),
            function.line,
            function.name
        );
    }
    Ok(())
}
