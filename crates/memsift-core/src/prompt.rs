//! The prompt registry: versioned prompt files under `prompts/`, compiled in and overridable.
//!
//! A prompt's version is `<name>@<first 12 hex of SHA-256 of its text>`. It is recorded on every
//! request and every memory, so a prompt change is tracked like a model change.

use std::collections::BTreeMap;
use std::path::Path;

use crate::text::short_hash;

/// The prompts shipped with memsift: (name, text).
const BUILT_IN: &[(&str, &str)] = &[
    ("extraction", include_str!("../../../prompts/extraction.md")),
    ("relationship", include_str!("../../../prompts/relationship.md")),
    ("consolidation", include_str!("../../../prompts/consolidation.md")),
    (
        "consolidation_review",
        include_str!("../../../prompts/consolidation_review.md"),
    ),
    ("refinement", include_str!("../../../prompts/refinement.md")),
    ("entity_gc", include_str!("../../../prompts/entity_gc.md")),
    ("summary", include_str!("../../../prompts/summary.md")),
    (
        "extraction_review",
        include_str!("../../../prompts/extraction_review.md"),
    ),
];

/// One loaded prompt.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Prompt {
    /// The file stem, e.g. `extraction`.
    pub name: String,
    /// `name@hash`.
    pub version: String,
    /// The text.
    pub text: String,
}

impl Prompt {
    /// A prompt with its version computed from its text.
    pub fn new(name: &str, text: &str) -> Prompt {
        Prompt {
            name: name.to_owned(),
            version: format!("{name}@{}", short_hash(text.as_bytes(), 12)),
            text: text.to_owned(),
        }
    }
}

/// The error returned when a prompt directory cannot be read or lacks a prompt.
#[derive(Debug, thiserror::Error)]
pub enum PromptError {
    /// The directory or a file in it could not be read.
    #[error(
        "cannot read prompt file {path}: {source}; fix the path in prompts.dir or remove the key to use the built-in prompts"
    )]
    Read {
        /// The path.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// No prompt of that name exists.
    #[error(
        "no prompt named `{0}`; built-in prompts are: extraction, relationship, consolidation, consolidation_review, refinement, entity_gc, summary, extraction_review"
    )]
    Missing(String),
}

/// All prompts, by name.
#[derive(Clone, Debug)]
pub struct PromptRegistry {
    prompts: BTreeMap<String, Prompt>,
}

impl PromptRegistry {
    /// The built-in prompts only.
    pub fn built_in() -> PromptRegistry {
        let prompts = BUILT_IN
            .iter()
            .map(|(name, text)| ((*name).to_owned(), Prompt::new(name, text)))
            .collect();
        PromptRegistry { prompts }
    }

    /// The built-in prompts, with any `<name>.md` in `dir` replacing its namesake.
    pub fn with_overrides(dir: &Path) -> Result<PromptRegistry, PromptError> {
        let mut registry = PromptRegistry::built_in();
        let entries = std::fs::read_dir(dir).map_err(|source| PromptError::Read {
            path: dir.display().to_string(),
            source,
        })?;
        for entry in entries {
            let entry = entry.map_err(|source| PromptError::Read {
                path: dir.display().to_string(),
                source,
            })?;
            let path = entry.path();
            if path.extension().and_then(|ext| ext.to_str()) != Some("md") {
                continue;
            }
            let Some(name) = path.file_stem().and_then(|stem| stem.to_str()) else {
                continue;
            };
            let text = std::fs::read_to_string(&path).map_err(|source| PromptError::Read {
                path: path.display().to_string(),
                source,
            })?;
            registry.prompts.insert(name.to_owned(), Prompt::new(name, &text));
        }
        Ok(registry)
    }

    /// The prompt called `name`.
    pub fn get(&self, name: &str) -> Result<&Prompt, PromptError> {
        self.prompts
            .get(name)
            .ok_or_else(|| PromptError::Missing(name.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_purpose_has_a_built_in_prompt_of_its_name_and_the_error_lists_them() {
        let registry = PromptRegistry::built_in();
        let error = registry.get("nonexistent").unwrap_err().to_string();
        for purpose in crate::status::Purpose::ALL {
            assert!(
                registry.get(purpose.as_str()).is_ok(),
                "no built-in prompt for {purpose}"
            );
            assert!(error.contains(purpose.as_str()), "{error}");
        }
    }

    #[test]
    fn versions_follow_the_text() {
        let a = Prompt::new("extraction", "one");
        let b = Prompt::new("extraction", "two");
        assert!(a.version.starts_with("extraction@"));
        assert_eq!(a.version.len(), "extraction@".len() + 12);
        assert_ne!(a.version, b.version);
    }

    #[test]
    fn a_file_in_the_override_dir_replaces_the_built_in_prompt() {
        let dir = std::env::temp_dir().join(format!("memsift-prompts-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("extraction.md"), "custom").unwrap();
        let registry = PromptRegistry::with_overrides(&dir).unwrap();
        assert_eq!(registry.get("extraction").unwrap().text, "custom");
        assert_ne!(
            registry.get("extraction").unwrap().version,
            PromptRegistry::built_in().get("extraction").unwrap().version
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
