//! Sizes the house rules bound: lines per file and lines per function.

use std::path::{Path, PathBuf};

use syn::visit::Visit;

/// A function and how many lines it spans, from its signature to its closing brace.
#[derive(Debug)]
pub struct FunctionSize {
    /// The file.
    pub file: PathBuf,
    /// The function's name, with its `impl` type where it has one.
    pub name: String,
    /// The line its signature starts on.
    pub line: usize,
    /// Lines from the signature to the closing brace.
    pub lines: usize,
}

/// Every function of a file with its length.
pub fn function_sizes(file: &Path) -> Result<Vec<FunctionSize>, String> {
    let text = std::fs::read_to_string(file).map_err(|error| format!("{}: {error}", file.display()))?;
    let parsed = syn::parse_file(&text).map_err(|error| format!("{}: {error}", file.display()))?;
    let mut visitor = Functions {
        file,
        owner: None,
        out: Vec::new(),
    };
    visitor.visit_file(&parsed);
    Ok(visitor.out)
}

struct Functions<'a> {
    file: &'a Path,
    owner: Option<String>,
    out: Vec<FunctionSize>,
}

impl Functions<'_> {
    fn record(&mut self, name: &syn::Ident, signature: &syn::Signature, body: &syn::Block) {
        let start = syn::spanned::Spanned::span(signature).start().line;
        let end = body.brace_token.span.close().end().line;
        let name = match &self.owner {
            Some(owner) => format!("{owner}::{name}"),
            None => name.to_string(),
        };
        self.out.push(FunctionSize {
            file: self.file.to_path_buf(),
            name,
            line: start,
            lines: end + 1 - start,
        });
    }
}

impl<'ast> Visit<'ast> for Functions<'_> {
    fn visit_item_fn(&mut self, item: &'ast syn::ItemFn) {
        self.record(&item.sig.ident, &item.sig, &item.block);
        syn::visit::visit_item_fn(self, item);
    }

    fn visit_item_impl(&mut self, item: &'ast syn::ItemImpl) {
        let owner = match item.self_ty.as_ref() {
            syn::Type::Path(path) => path.path.segments.last().map(|segment| segment.ident.to_string()),
            _ => None,
        };
        let previous = std::mem::replace(&mut self.owner, owner);
        syn::visit::visit_item_impl(self, item);
        self.owner = previous;
    }

    fn visit_impl_item_fn(&mut self, item: &'ast syn::ImplItemFn) {
        self.record(&item.sig.ident, &item.sig, &item.block);
        syn::visit::visit_impl_item_fn(self, item);
    }

    fn visit_trait_item_fn(&mut self, item: &'ast syn::TraitItemFn) {
        if let Some(body) = &item.default {
            self.record(&item.sig.ident, &item.sig, body);
        }
        syn::visit::visit_trait_item_fn(self, item);
    }
}

/// Lines in a file.
pub fn line_count(file: &Path) -> Result<usize, String> {
    Ok(std::fs::read_to_string(file)
        .map_err(|error| format!("{}: {error}", file.display()))?
        .lines()
        .count())
}
