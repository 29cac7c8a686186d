//! The module graph of one crate, read from its sources: which module refers to which, and the
//! cycles among siblings.
//!
//! Modules of one parent form a graph: `a` → `b` when any code in `a` (or below it) names an
//! item of `b` (or below it) through `crate::`, `super::`, `self::` or a child's name. A parent
//! and its own children may name each other freely (that is how a module re-exports and how a
//! child reads its parent's shared types); siblings may not name each other in a circle.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use syn::visit::Visit;

/// A module path inside its crate: `[]` is the crate root, `["stages", "plan"]` is `stages::plan`.
pub type ModPath = Vec<String>;

/// One module: where it is written and the module paths its code names.
#[derive(Debug)]
pub struct Module {
    /// Its path in the crate.
    pub path: ModPath,
    /// The file it is written in (an inline module shares its parent's).
    pub file: PathBuf,
    /// Every `crate`-relative path its own code names (not its child modules' code).
    pub names: BTreeSet<ModPath>,
}

/// A crate's modules, from its root file (`src/lib.rs` or `src/main.rs`).
pub fn crate_modules(root_file: &Path) -> Result<Vec<Module>, String> {
    let mut modules = Vec::new();
    load_file(root_file, Vec::new(), true, &mut modules)?;
    Ok(modules)
}

fn load_file(file: &Path, path: ModPath, owns_dir: bool, out: &mut Vec<Module>) -> Result<(), String> {
    let text = std::fs::read_to_string(file).map_err(|error| format!("{}: {error}", file.display()))?;
    let parsed = syn::parse_file(&text).map_err(|error| format!("{}: {error}", file.display()))?;
    // Child files of `a.rs` live in `a/`; of `lib.rs`, `main.rs` and `mod.rs` beside them.
    let dir = if owns_dir {
        file.parent().map(Path::to_path_buf).unwrap_or_default()
    } else {
        file.with_extension("")
    };
    load_items(&parsed.items, file, &dir, path, out)
}

fn load_items(
    items: &[syn::Item],
    file: &Path,
    dir: &Path,
    path: ModPath,
    out: &mut Vec<Module>,
) -> Result<(), String> {
    let children: BTreeSet<String> = items
        .iter()
        .filter_map(|item| match item {
            syn::Item::Mod(module) => Some(module.ident.to_string()),
            _ => None,
        })
        .collect();
    let mut collector = Names {
        module: &path,
        children: &children,
        names: BTreeSet::new(),
    };
    for item in items {
        if !matches!(item, syn::Item::Mod(_)) {
            collector.visit_item(item);
        }
    }
    out.push(Module {
        path: path.clone(),
        file: file.to_path_buf(),
        names: collector.names,
    });
    for item in items {
        let syn::Item::Mod(module) = item else { continue };
        let mut child = path.clone();
        child.push(module.ident.to_string());
        match &module.content {
            Some((_, inner)) => load_items(inner, file, &dir.join(module.ident.to_string()), child, out)?,
            None => {
                let name = module.ident.to_string();
                let flat = dir.join(format!("{name}.rs"));
                let nested = dir.join(&name).join("mod.rs");
                if let Some(explicit) = path_attribute(&module.attrs) {
                    load_file(&dir.join(explicit), child, false, out)?;
                } else if flat.exists() {
                    load_file(&flat, child, false, out)?;
                } else if nested.exists() {
                    load_file(&nested, child, true, out)?;
                } else {
                    return Err(format!("{}: module `{name}` has no file", file.display()));
                }
            }
        }
    }
    Ok(())
}

fn path_attribute(attrs: &[syn::Attribute]) -> Option<String> {
    attrs.iter().find_map(|attr| {
        let syn::Meta::NameValue(pair) = &attr.meta else {
            return None;
        };
        if !pair.path.is_ident("path") {
            return None;
        }
        match &pair.value {
            syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Str(text),
                ..
            }) => Some(text.value()),
            _ => None,
        }
    })
}

/// Collects the crate-relative paths one module's code names.
struct Names<'a> {
    module: &'a ModPath,
    children: &'a BTreeSet<String>,
    names: BTreeSet<ModPath>,
}

impl Names<'_> {
    /// Resolves a path as written in this module to a crate-relative one, or `None` for another
    /// crate's item, a local name or a primitive.
    fn resolve(&self, segments: &[String]) -> Option<ModPath> {
        let first = segments.first()?;
        let mut base = match first.as_str() {
            "crate" => return Some(segments[1..].to_vec()),
            "self" => self.module.clone(),
            "super" => {
                let mut base = self.module.clone();
                let mut rest = segments;
                while rest.first().is_some_and(|segment| segment == "super") {
                    base.pop();
                    rest = &rest[1..];
                }
                base.extend(rest.iter().cloned());
                return Some(base);
            }
            name if self.children.contains(name) => {
                let mut base = self.module.clone();
                base.push(name.to_owned());
                base
            }
            _ => return None,
        };
        base.extend(segments[1..].iter().cloned());
        Some(base)
    }

    fn add(&mut self, segments: &[String]) {
        if let Some(resolved) = self.resolve(segments) {
            self.names.insert(resolved);
        }
    }
}

fn use_paths(tree: &syn::UseTree, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    match tree {
        syn::UseTree::Path(path) => {
            prefix.push(path.ident.to_string());
            use_paths(&path.tree, prefix, out);
            prefix.pop();
        }
        syn::UseTree::Name(name) => {
            let mut full = prefix.clone();
            if name.ident != "self" {
                full.push(name.ident.to_string());
            }
            out.push(full);
        }
        syn::UseTree::Rename(rename) => {
            let mut full = prefix.clone();
            full.push(rename.ident.to_string());
            out.push(full);
        }
        syn::UseTree::Glob(_) => out.push(prefix.clone()),
        syn::UseTree::Group(group) => {
            for item in &group.items {
                use_paths(item, prefix, out);
            }
        }
    }
}

impl<'ast> Visit<'ast> for Names<'_> {
    fn visit_item_use(&mut self, item: &'ast syn::ItemUse) {
        let mut paths = Vec::new();
        use_paths(&item.tree, &mut Vec::new(), &mut paths);
        for path in paths {
            self.add(&path);
        }
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        let segments: Vec<String> = path.segments.iter().map(|segment| segment.ident.to_string()).collect();
        self.add(&segments);
        syn::visit::visit_path(self, path);
    }

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        // Macro bodies are tokens, not syntax: read `crate :: a :: b` runs out of them.
        let tokens: Vec<proc_macro2::TokenTree> = flatten(mac.tokens.clone());
        let mut at = 0;
        while at < tokens.len() {
            if let proc_macro2::TokenTree::Ident(ident) = &tokens[at]
                && matches!(ident.to_string().as_str(), "crate" | "super")
            {
                let mut segments = vec![ident.to_string()];
                let mut next = at + 1;
                while let (Some(proc_macro2::TokenTree::Punct(a)), Some(proc_macro2::TokenTree::Punct(b))) =
                    (tokens.get(next), tokens.get(next + 1))
                {
                    if a.as_char() != ':' || b.as_char() != ':' {
                        break;
                    }
                    let Some(proc_macro2::TokenTree::Ident(segment)) = tokens.get(next + 2) else {
                        break;
                    };
                    segments.push(segment.to_string());
                    next += 3;
                }
                self.add(&segments);
                at = next;
            } else {
                at += 1;
            }
        }
        syn::visit::visit_macro(self, mac);
    }
}

fn flatten(stream: proc_macro2::TokenStream) -> Vec<proc_macro2::TokenTree> {
    let mut out = Vec::new();
    for tree in stream {
        match tree {
            proc_macro2::TokenTree::Group(group) => out.extend(flatten(group.stream())),
            other => out.push(other),
        }
    }
    out
}

/// One sibling edge with an example of the code behind it.
#[derive(Clone, Debug)]
pub struct Edge {
    /// The module whose code names the other.
    pub from: String,
    /// The module named.
    pub to: String,
    /// Where: the file and the path named.
    pub example: String,
}

/// The sibling graphs of a crate: for each parent module, the edges among its children.
pub fn sibling_graphs(modules: &[Module]) -> BTreeMap<ModPath, Vec<Edge>> {
    let known: BTreeSet<&ModPath> = modules.iter().map(|module| &module.path).collect();
    let mut graphs: BTreeMap<ModPath, BTreeMap<(String, String), String>> = BTreeMap::new();
    for module in modules {
        for name in &module.names {
            // The module an item path points into: its longest prefix that is a module.
            let target = (0..=name.len())
                .rev()
                .map(|len| name[..len].to_vec())
                .find(|prefix| known.contains(prefix))
                .unwrap_or_default();
            let common = module.path.iter().zip(&target).take_while(|(a, b)| a == b).count();
            if common == module.path.len() || common == target.len() {
                continue; // a module and its ancestor or descendant
            }
            let edge = (module.path[common].clone(), target[common].clone());
            graphs
                .entry(module.path[..common].to_vec())
                .or_default()
                .entry(edge)
                .or_insert_with(|| format!("{} names {}", module.file.display(), name.join("::")));
        }
    }
    graphs
        .into_iter()
        .map(|(parent, edges)| {
            let edges = edges
                .into_iter()
                .map(|((from, to), example)| Edge { from, to, example })
                .collect();
            (parent, edges)
        })
        .collect()
}

/// The cycles of a graph given as edges, each as the edges around it; empty when it has none.
pub fn cycles(edges: &[Edge]) -> Vec<Vec<Edge>> {
    let nodes: BTreeSet<&str> = edges
        .iter()
        .flat_map(|edge| [edge.from.as_str(), edge.to.as_str()])
        .collect();
    let mut found: Vec<Vec<Edge>> = Vec::new();
    let mut seen_sets: BTreeSet<BTreeSet<String>> = BTreeSet::new();
    for start in nodes {
        // Breadth-first from each node back to itself finds its shortest cycle, if any.
        let mut previous: BTreeMap<&str, &Edge> = BTreeMap::new();
        let mut queue = std::collections::VecDeque::from([start]);
        let mut closing: Option<&Edge> = None;
        while let Some(node) = queue.pop_front() {
            for edge in edges.iter().filter(|edge| edge.from == node) {
                if edge.to == start {
                    closing = Some(edge);
                    break;
                }
                if !previous.contains_key(edge.to.as_str()) {
                    previous.insert(edge.to.as_str(), edge);
                    queue.push_back(edge.to.as_str());
                }
            }
            if closing.is_some() {
                break;
            }
        }
        let Some(last) = closing else { continue };
        let mut path = vec![last.clone()];
        let mut node = last.from.as_str();
        while node != start {
            let edge = previous[node];
            path.push(edge.clone());
            node = edge.from.as_str();
        }
        path.reverse();
        let members: BTreeSet<String> = path.iter().map(|edge| edge.from.clone()).collect();
        if seen_sets.insert(members) {
            found.push(path);
        }
    }
    found
}

/// One line per cycle: `parent: a → b → a (a names …; b names …)`.
pub fn describe_cycle(krate: &str, parent: &ModPath, cycle: &[Edge]) -> String {
    let mut names: Vec<&str> = cycle.iter().map(|edge| edge.from.as_str()).collect();
    names.push(cycle[0].from.as_str());
    let scope = if parent.is_empty() {
        krate.to_owned()
    } else {
        format!("{krate}::{}", parent.join("::"))
    };
    let examples: Vec<&str> = cycle.iter().map(|edge| edge.example.as_str()).collect();
    format!("{scope}: {} ({})", names.join(" → "), examples.join("; "))
}
