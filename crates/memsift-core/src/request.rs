//! The typed values a request row carries from the crate that plans it to the crates that send,
//! store and apply it: what it is about (`subject`), what to send (`request_body`), and the
//! snapshot its answer is read against (`context`).
//!
//! Each is stored as JSON on `llm_requests` and read back by another crate, so each is defined
//! once, here: a renamed field is a compile error, not a key that silently reads as missing.
//! Empty fields are left out of the stored JSON, so rows written before a field existed read back
//! the same, and rows written now stay as small as the old ones.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::{MemoryId, MessageId, RequestId, SegmentId};

/// What a request is about. Extraction requests leave it empty (their segment and chunk say it);
/// post-processing requests name the memories, entity or segment, and the run whose cap they
/// count against.
///
/// A key this type does not know is refused, not ignored: the store keeps typed columns beside
/// the JSON (the run, the entity), and a subject written by a renamed field must fail loudly.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RequestSubject {
    /// The post-processing run this request belongs to (its cap is counted per run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<String>,
    /// How many memories the run may change at most.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cap: Option<i64>,
    /// The memory classified, refined or reviewed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_id: Option<MemoryId>,
    /// Relationship classification: the memories it is compared with, in the order shown.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub candidates: Vec<MemoryId>,
    /// Consolidation: the cluster's memories, in the order shown.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub members: Vec<MemoryId>,
    /// Entity GC: the entity reviewed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entity_id: Option<String>,
    /// Entity GC: the entities it may be merged into.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub entity_candidates: Vec<String>,
    /// Segment summary: the segment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub segment_id: Option<SegmentId>,
    /// Consolidation review: the proposal it reviews.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proposal_request_id: Option<RequestId>,
}

impl RequestSubject {
    /// Every memory this request names (its memory, candidates and members): a stage never
    /// plans a memory that a request in flight already names.
    pub fn memory_ids(&self) -> Vec<MemoryId> {
        self.memory_id
            .iter()
            .chain(&self.candidates)
            .chain(&self.members)
            .copied()
            .collect()
    }
}

/// What a lane sends for one request: a system prompt (identical across requests, so providers
/// cache it) and the user message.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RequestBody {
    /// The system prompt.
    #[serde(default)]
    pub system: String,
    /// The user message: turns for extraction, a compact JSON task for post-processing.
    #[serde(default)]
    pub user_message: String,
}

/// The snapshot an answer is read against, taken when the request was planned: labels and short
/// ids the model may cite, mapped back to rows, and what a review is reviewing.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RequestContext {
    /// Extraction: each turn label shown to the model → its message.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub turns: BTreeMap<String, MessageId>,
    /// Extraction: the labels among `turns` that are the assistant's, which evidence may not cite
    /// alone. Empty on rows planned before it was recorded.
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub assistant_turns: BTreeSet<String>,
    /// Extraction: each short id shown → the known memory and its text at the time.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub memories: BTreeMap<String, (MemoryId, String)>,
    /// Consolidation review: the proposed text under review.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proposal: Option<String>,
    /// Consolidation review: why the proposal was made.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proposal_reasoning: Option<String>,
    /// Extraction: how many cut answers of its chunk came before this request, each continued by
    /// the next (0: the chunk's first request). Bounds the continuations of a chunk.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub continuation: u32,
}

fn is_zero(value: &u32) -> bool {
    *value == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_written_before_the_types_read_back_the_same() {
        let subject: RequestSubject = serde_json::from_str(
            r#"{"run":"r1","cap":3,"members":["0190c2a0-0000-7000-8000-000000000001"],"proposal_request_id":"0190c2a0-0000-7000-8000-000000000002"}"#,
        )
        .unwrap();
        assert_eq!(subject.cap, Some(3));
        assert_eq!(subject.memory_ids().len(), 1);
        let context: RequestContext = serde_json::from_str(
            r#"{"turns":{"t0":"0190c2a0-0000-7000-8000-000000000003"},"memories":{"ab12cd":["0190c2a0-0000-7000-8000-000000000004","Ana has a cat."]}}"#,
        )
        .unwrap();
        assert_eq!(context.memories["ab12cd"].1, "Ana has a cat.");
        // An empty value stays `{}` in the row, as extraction subjects always were.
        assert_eq!(serde_json::to_string(&RequestSubject::default()).unwrap(), "{}");
        // A key no field reads is refused: it was written by a field that has since been renamed.
        assert!(serde_json::from_str::<RequestSubject>(r#"{"run_id":"r1"}"#).is_err());
        assert_eq!(
            serde_json::to_value(&context).unwrap(),
            serde_json::json!({"turns":{"t0":"0190c2a0-0000-7000-8000-000000000003"},"memories":{"ab12cd":["0190c2a0-0000-7000-8000-000000000004","Ana has a cat."]}})
        );
    }
}
