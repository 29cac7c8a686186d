//! Dropped items: what the response processor or a post-processing stage did not keep, and why.
//!
//! Stored with each request (`llm_requests.drops`, and counted by reason in `request_drops`), so
//! the type is defined here, once, for the crate that decides drops and the store that keeps them.
//! The reason is a closed set: a reason the store does not know is a corrupt row, not a new
//! metrics label.

use serde::{Deserialize, Serialize};

use crate::{MemoryId, MessageId};

/// Why an item was dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DropReason {
    /// The element was not an object.
    WrongType,
    /// No `text`, not a string, or blank.
    MissingText,
    /// Shorter than the processor's minimum length.
    TooShort,
    /// Longer than the processor's maximum length.
    TooLong,
    /// Same normalised text as an earlier item of this response.
    DuplicateInResponse,
    /// Same normalised text as an active memory of the user.
    DuplicateOfExisting,
    /// The element a response's text ended inside (its JSON cut off, whatever the stop reason).
    Truncated,
    /// Fuzzy ratio ≥ the processor's fuzzy threshold with an earlier item of this response.
    NearDuplicateInResponse,
    /// Fuzzy ratio ≥ the processor's fuzzy threshold with a context or known memory.
    NearDuplicateOfKnown,
    /// Cosine ≥ the vector threshold with a known memory or an earlier item.
    DuplicateByVector,
    /// A post-processing answer that changed nothing (its `detail` says why).
    Unchanged,
    /// No valid citation of a non-assistant turn of the chunk: `evidence_turns` empty or missing,
    /// naming only labels the chunk does not have, or only assistant turns (which the prompt
    /// forbids as sources). A memory must rest on something its person said.
    MissingEvidence,
}

impl DropReason {
    /// Every reason, in declaration order (for reports that list zero counts too).
    pub const ALL: [DropReason; 12] = [
        DropReason::WrongType,
        DropReason::MissingText,
        DropReason::TooShort,
        DropReason::TooLong,
        DropReason::DuplicateInResponse,
        DropReason::DuplicateOfExisting,
        DropReason::Truncated,
        DropReason::NearDuplicateInResponse,
        DropReason::NearDuplicateOfKnown,
        DropReason::DuplicateByVector,
        DropReason::Unchanged,
        DropReason::MissingEvidence,
    ];

    /// The reason named `name` (its [`DropReason::as_str`]); `None` for any other text.
    pub fn parse(name: &str) -> Option<DropReason> {
        DropReason::ALL.into_iter().find(|reason| reason.as_str() == name)
    }

    /// The snake_case name used in metrics and reports.
    pub fn as_str(self) -> &'static str {
        match self {
            DropReason::WrongType => "wrong_type",
            DropReason::MissingText => "missing_text",
            DropReason::TooShort => "too_short",
            DropReason::TooLong => "too_long",
            DropReason::DuplicateInResponse => "duplicate_in_response",
            DropReason::DuplicateOfExisting => "duplicate_of_existing",
            DropReason::Truncated => "truncated",
            DropReason::NearDuplicateInResponse => "near_duplicate_in_response",
            DropReason::NearDuplicateOfKnown => "near_duplicate_of_known",
            DropReason::DuplicateByVector => "duplicate_by_vector",
            DropReason::Unchanged => "unchanged",
            DropReason::MissingEvidence => "missing_evidence",
        }
    }
}

/// One dropped item and why.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DroppedItem {
    /// Its index in the response (for the processor's vector dedupe alone: its position in the item list it was given).
    pub index: usize,
    /// Why.
    pub reason: DropReason,
    /// Its text, when it had one.
    pub text: Option<String>,
    /// The known memory it duplicates, for duplicate reasons against the context, known texts or neighbours.
    pub duplicate_of: Option<MemoryId>,
    /// The earlier item it duplicates (same index space as `index`), for within-response duplicates.
    pub duplicate_of_index: Option<usize>,
    /// The similarity that decided it (1.0 for exact keys, the fuzzy ratio, or the cosine).
    pub score: Option<f64>,
    /// A short human-readable explanation.
    pub detail: Option<String>,
    /// For a duplicate of a stored memory: the turns the dropped item cited, which the write adds
    /// to that memory's evidence (the same fact read again is more support, not nothing).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub evidence: Vec<MessageId>,
}

impl DroppedItem {
    /// A drop with only the index, reason and text set.
    pub fn new(index: usize, reason: DropReason, text: Option<String>) -> Self {
        Self {
            index,
            reason,
            text,
            duplicate_of: None,
            duplicate_of_index: None,
            score: None,
            detail: None,
            evidence: Vec::new(),
        }
    }
}

impl DroppedItem {
    /// The record of a post-processing answer that changed nothing, and why.
    pub fn unchanged(why: &str) -> Self {
        Self {
            detail: Some(why.to_owned()),
            ..Self::new(0, DropReason::Unchanged, None)
        }
    }
}
