//! The graph of the workspace's own crates, read from each `crates/*/Cargo.toml`.

use std::collections::BTreeMap;
use std::path::Path;

use crate::modules::Edge;

/// Each workspace crate's name and the workspace crates it depends on, development and build
/// dependencies included (a cycle through a dev-dependency builds the crate twice and is as
/// confusing to read as any other).
pub fn crate_graph(root: &Path) -> Result<BTreeMap<String, Vec<String>>, String> {
    let mut graph = BTreeMap::new();
    for entry in std::fs::read_dir(root.join("crates")).map_err(|error| error.to_string())? {
        let manifest = entry.map_err(|error| error.to_string())?.path().join("Cargo.toml");
        if !manifest.exists() {
            continue;
        }
        let text = std::fs::read_to_string(&manifest).map_err(|error| format!("{}: {error}", manifest.display()))?;
        let parsed: toml::Table = text
            .parse()
            .map_err(|error| format!("{}: {error}", manifest.display()))?;
        let name = parsed
            .get("package")
            .and_then(|package| package.get("name"))
            .and_then(toml::Value::as_str)
            .ok_or_else(|| format!("{}: no package name", manifest.display()))?
            .to_owned();
        let mut depends_on: Vec<String> = ["dependencies", "dev-dependencies", "build-dependencies"]
            .iter()
            .filter_map(|table| parsed.get(*table).and_then(toml::Value::as_table))
            .flat_map(|table| table.keys().cloned())
            .filter(|dependency| dependency.starts_with("memsift") && *dependency != name)
            .collect();
        depends_on.sort();
        depends_on.dedup();
        graph.insert(name, depends_on);
    }
    Ok(graph)
}

/// The graph as edges, for [`crate::modules::cycles`].
pub fn edges(graph: &BTreeMap<String, Vec<String>>) -> Vec<Edge> {
    graph
        .iter()
        .flat_map(|(from, targets)| {
            targets.iter().map(move |to| Edge {
                from: from.clone(),
                to: to.clone(),
                example: format!("{from}/Cargo.toml depends on {to}"),
            })
        })
        .collect()
}
