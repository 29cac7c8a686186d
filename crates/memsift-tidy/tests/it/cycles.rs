//! No import cycle between the modules of any crate or between the crates, and the code map in
//! ARCHITECTURE.md as the tree is; the checker is shown to find a cycle it is given.

use std::path::Path;

use memsift_tidy::modules::{crate_modules, cycles, describe_cycle, sibling_graphs};
use memsift_tidy::{crate_roots, crates, map, workspace_root};

fn module_cycles(krate: &str, root_file: &Path) -> Vec<String> {
    let modules = crate_modules(root_file).unwrap();
    sibling_graphs(&modules)
        .into_iter()
        .flat_map(|(parent, edges)| {
            cycles(&edges)
                .into_iter()
                .map(move |cycle| describe_cycle(krate, &parent, &cycle))
                .collect::<Vec<_>>()
        })
        .collect()
}

#[test]
fn no_crate_has_an_import_cycle_between_its_modules() {
    let roots = crate_roots(&workspace_root());
    assert!(
        roots.len() > 12,
        "found only {} crate roots: is the walk rooted right?",
        roots.len()
    );
    let found: Vec<String> = roots
        .iter()
        .flat_map(|(krate, file)| module_cycles(krate, file))
        .collect();
    assert!(
        found.is_empty(),
        "modules must import one way; these import each other in a circle:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_workspace_crates_depend_on_each_other_one_way() {
    let graph = crates::crate_graph(&workspace_root()).unwrap();
    assert!(graph.contains_key("memsift-engine") && graph.contains_key("memsift-store"));
    let found: Vec<String> = cycles(&crates::edges(&graph))
        .iter()
        .map(|cycle| describe_cycle("workspace", &Vec::new(), cycle))
        .collect();
    assert!(found.is_empty(), "crate cycles:\n{}", found.join("\n"));
}

#[test]
fn the_checker_finds_a_cycle_between_siblings_and_allows_a_parent_and_its_children() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path();
    std::fs::create_dir_all(src.join("outer")).unwrap();
    std::fs::write(src.join("lib.rs"), "//! root\nmod a;\nmod b;\nmod outer;\nmod c;\n").unwrap();
    // a → b through a grouped `use`, b → a through a path in an expression: a cycle.
    std::fs::write(
        src.join("a.rs"),
        "//! a\nuse crate::{b::{self, Thing}};\npub fn f() {}\n",
    )
    .unwrap();
    std::fs::write(
        src.join("b.rs"),
        "//! b\npub struct Thing;\npub fn g() { crate::a::f() }\n",
    )
    .unwrap();
    // A parent and its child name each other: allowed. The child names `c`, one way: allowed.
    std::fs::write(
        src.join("outer.rs"),
        "//! outer\nmod inner;\npub use inner::Item;\npub struct Shared;\n",
    )
    .unwrap();
    std::fs::write(
        src.join("outer/inner.rs"),
        "//! inner\npub struct Item(super::Shared);\nfn h() { tracing::info!(x = ?crate::c::K); }\n",
    )
    .unwrap();
    std::fs::write(src.join("c.rs"), "//! c\npub const K: u8 = 1;\n").unwrap();
    let found = module_cycles("toy", &src.join("lib.rs"));
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].starts_with("toy: a → b → a"), "{}", found[0]);

    // Break the cycle: the checker is quiet.
    std::fs::write(src.join("b.rs"), "//! b\npub struct Thing;\n").unwrap();
    assert!(module_cycles("toy", &src.join("lib.rs")).is_empty());

    // A cycle named only inside a macro is still found.
    std::fs::write(
        src.join("c.rs"),
        "//! c\npub const K: u8 = 1;\nfn k() { println!(\"{:?}\", crate::outer::Shared); }\n",
    )
    .unwrap();
    let found = module_cycles("toy", &src.join("lib.rs"));
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].starts_with("toy: c → outer → c"), "{}", found[0]);
}

#[test]
fn architecture_md_carries_the_code_map_of_this_tree() {
    let root = workspace_root();
    let text = std::fs::read_to_string(root.join("ARCHITECTURE.md")).unwrap();
    let block = map::generate(&root).unwrap();
    let updated = map::replace_block(&text, &block).expect("ARCHITECTURE.md has the generated code map block");
    assert!(
        updated == text,
        "ARCHITECTURE.md's code map is out of date; run `cargo run -p memsift-tidy --bin tidy-report -- --write-map`"
    );
}
