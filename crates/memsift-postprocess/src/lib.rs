//! Post-processing stages as pure functions: build each stage's LLM request, read its answer, and answer offline.
//!
//! Every stage (relationship classification, consolidation and its review, refinement, entity GC, segment
//! summaries, the extraction reviewer) has a request builder returning a [`StageRequest`] and a parser turning a
//! model's raw text into typed verdicts. The system part of a request is the stage's versioned prompt, identical for
//! every request of that purpose so providers cache it; the user part is a compact JSON document whose first key
//! names the task, which is also how [`offline::offline_answer`] and the provider simulator recognise it.
//! Nothing here does I/O: the store, the pipeline and the lanes live elsewhere and call these functions.

#![deny(missing_docs)]

mod answer;
pub mod consolidation;
pub mod entity_gc;
pub mod offline;
pub mod refinement;
pub mod relationship;
pub mod reviewer;
mod slots;
pub mod summary;
mod words;

use memsift_core::MemoryId;
use memsift_core::prompt::Prompt;
use memsift_core::status::Purpose;
use serde::{Deserialize, Serialize};

/// One post-processing request, ready for any lane.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StageRequest {
    /// The versioned prompt's text: the same for every request of a purpose, so providers cache it.
    pub system: String,
    /// A compact JSON document whose first key is `"task"`, naming the purpose.
    pub user_message: String,
}

impl StageRequest {
    /// A request with the prompt as system part and `document` serialised as the user message.
    ///
    /// Documents are structs whose first field is `task`, so the key order (and the first key) is fixed by the
    /// type rather than by whichever map serde_json happens to be compiled with.
    pub(crate) fn new(prompt: &Prompt, document: &impl Serialize) -> StageRequest {
        StageRequest {
            system: prompt.text.clone(),
            user_message: serde_json::to_string(document)
                .expect("request documents are plain strings, numbers and lists, which always serialise"),
        }
    }
}

/// A memory as a post-processing stage sees it: its id (kept by the caller to map labels back) and its text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemoryText {
    /// The stored memory's id; never shown to the model, which sees short labels instead.
    pub id: MemoryId,
    /// The memory's text.
    pub text: String,
}

/// Why a model's answer could not be used. The caller records the Display text and, where the stage counts
/// rejections (refinement), counts one.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AnswerError {
    /// No JSON could be read from the answer, even after stripping wrappers and repairing it.
    #[error("the answer holds no readable JSON (it starts with `{excerpt}`)")]
    Unparseable {
        /// The first characters of the answer.
        excerpt: String,
    },
    /// The JSON stopped before its brackets closed, so a text in it may be cut short.
    #[error("the answer was cut off before its JSON closed; a cut text could lose facts, so it is not used")]
    Truncated,
    /// A field the stage needs is absent or null.
    #[error("the answer has no `{field}` field")]
    MissingField {
        /// The field's name.
        field: &'static str,
    },
    /// The answer is well-formed but breaks a rule of the stage.
    #[error("the answer is not acceptable: {0}")]
    Invalid(String),
}

/// The purpose a user message was built for, read from its `"task"` key.
///
/// `None` for anything that is not such a document, e.g. an extraction transcript, so a responder can tell
/// post-processing requests apart from extraction ones.
pub fn task_of(user_message: &str) -> Option<Purpose> {
    #[derive(Deserialize)]
    struct TaskOnly {
        task: String,
    }
    let trimmed = user_message.trim_start();
    // Cheap refusal of transcripts and other prose before a full JSON read.
    if !trimmed.starts_with('{') {
        return None;
    }
    let document: TaskOnly = serde_json::from_str(trimmed).ok()?;
    let purpose = Purpose::parse(&document.task).ok()?;
    (purpose != Purpose::Extraction).then_some(purpose)
}

/// The short label shown for the item at `item_idx`: `c1`, `c2`… for relationship candidates, `m1`… for
/// cluster members. Labels are short so the model copies them reliably and they cost few tokens.
pub(crate) fn label(prefix: char, item_idx: usize) -> String {
    format!("{prefix}{}", item_idx + 1)
}

/// The index a label such as `c3` stands for, if it has the prefix and is within `n_items`.
pub(crate) fn index_of_label(label: &str, prefix: char, n_items: usize) -> Option<usize> {
    let trimmed = label.trim();
    let rest = trimmed
        .strip_prefix(prefix)
        .or_else(|| trimmed.strip_prefix(prefix.to_ascii_uppercase()))?;
    let number: usize = rest.parse().ok()?;
    (1..=n_items).contains(&number).then(|| number - 1)
}

/// One labelled text of a request document.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct LabelledText {
    pub(crate) id: String,
    pub(crate) text: String,
}

/// The texts of `memories` labelled `<prefix>1`, `<prefix>2`…
pub(crate) fn labelled(prefix: char, memories: &[MemoryText]) -> Vec<LabelledText> {
    memories
        .iter()
        .enumerate()
        .map(|(memory_idx, memory)| LabelledText {
            id: label(prefix, memory_idx),
            text: memory.text.clone(),
        })
        .collect()
}

#[cfg(test)]
pub(crate) mod testing {
    //! Helpers shared by the unit tests of every stage.

    use memsift_core::MemoryId;
    use memsift_core::prompt::{Prompt, PromptRegistry};

    use crate::MemoryText;

    /// The built-in prompt of a stage, as callers will pass it.
    pub(crate) fn prompt(name: &str) -> Prompt {
        PromptRegistry::built_in().get(name).unwrap().clone()
    }

    /// Memories with fresh ids and the given texts.
    pub(crate) fn memories(texts: &[&str]) -> Vec<MemoryText> {
        texts
            .iter()
            .map(|text| MemoryText {
                id: MemoryId::new_v7(),
                text: (*text).to_owned(),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_task_key_names_the_purpose_and_anything_else_is_none() {
        assert_eq!(
            task_of(r#"{"task":"relationship","memory":"x"}"#),
            Some(Purpose::Relationship)
        );
        assert_eq!(task_of(r#" {"task":"entity_gc"}"#), Some(Purpose::EntityGc));
        assert_eq!(
            task_of(r#"{"task":"extraction_review"}"#),
            Some(Purpose::ExtractionReview)
        );
        assert_eq!(task_of(r#"{"task":"extraction"}"#), None);
        assert_eq!(task_of(r#"{"task":"poetry"}"#), None);
        assert_eq!(task_of("Today is 2024-05-01.\n<turn label=\"t1\">hi</turn>"), None);
        assert_eq!(task_of(r#"{"memory":"x"}"#), None);
    }

    #[test]
    fn labels_map_back_to_indices_within_range_only() {
        assert_eq!(index_of_label(&label('c', 0), 'c', 3), Some(0));
        assert_eq!(index_of_label(" C3 ", 'c', 3), Some(2));
        assert_eq!(index_of_label("c4", 'c', 3), None);
        assert_eq!(index_of_label("c0", 'c', 3), None);
        assert_eq!(index_of_label("m1", 'c', 3), None);
        assert_eq!(index_of_label("c-1", 'c', 3), None);
    }
}
