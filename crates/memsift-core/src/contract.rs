//! The extraction output contract: what every lane returns for one chunk of a segment.
//!
//! A lane's raw output is text; `memsift-processor` turns it into validated items. These types are
//! what a well-behaved producer (the heuristic lane, the simulator) serialises, and the field names
//! the prompt asks a model for. `[]` is a valid, common answer.

use serde::{Deserialize, Serialize};

use crate::status::Temporal;

/// One extracted memory as a producer writes it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ExtractedItem {
    /// The memory, written as a standalone fact.
    pub text: String,
    /// How sure the producer is, 0.0 to 1.0.
    pub confidence: f64,
    /// When the event happens (ISO-8601), for plans and appointments.
    pub happens_at: Option<String>,
    /// When the fact stops being true (ISO-8601).
    pub expires_at: Option<String>,
    /// A private fact: address, health, family, schedule, income, real name.
    pub sensitive: bool,
    /// How long the fact holds.
    pub temporal: Temporal,
    /// How this item relates to known memories (`conflicts`, `supersedes`, …), if at all.
    pub relationship_type: Option<String>,
    /// Short ids of the known memories the relationship refers to.
    pub related_memory_ids: Vec<String>,
    /// Short ids of known memories this item merges; such an item is never a duplicate.
    pub consolidates_memory_ids: Vec<String>,
    /// 0-based indices of other items in the same response that this one relates to.
    pub linking_hints: Vec<usize>,
    /// Named things the memory mentions.
    pub entities: Vec<ExtractedEntity>,
    /// Labels of the turns the memory was read from, as shown in the prompt.
    pub evidence_turns: Vec<String>,
}

/// An entity named by an extracted item.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExtractedEntity {
    /// The name as written.
    pub name: String,
    /// A coarse kind: `person`, `place`, `organization`, `pet`, `product`, `event`, `other`.
    pub kind: String,
}

impl ExtractedItem {
    /// An item with only its text, evidence and temporal kind set; other fields take neutral values.
    pub fn new(text: impl Into<String>, temporal: Temporal, evidence_turns: Vec<String>) -> Self {
        Self {
            text: text.into(),
            confidence: 0.9,
            happens_at: None,
            expires_at: None,
            sensitive: false,
            temporal,
            relationship_type: None,
            related_memory_ids: Vec::new(),
            consolidates_memory_ids: Vec::new(),
            linking_hints: Vec::new(),
            entities: Vec::new(),
            evidence_turns,
        }
    }
}

/// One turn of a chunk as every lane sees it: the input side of the contract.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Turn {
    /// The label the prompt shows and `evidence_turns` cite: the message's external id
    /// (a LoCoMo `dia_id` such as `D1:3`) when it has one, else `t<sequence>`.
    pub label: String,
    /// Who spoke.
    pub role: crate::status::Role,
    /// The speaker's name, when the source names speakers (LoCoMo does).
    pub speaker: Option<String>,
    /// The text.
    pub content: String,
    /// When it was said.
    pub at: chrono::DateTime<chrono::Utc>,
}
