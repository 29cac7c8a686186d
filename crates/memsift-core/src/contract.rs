//! The extraction output contract: what every lane returns for one chunk of a segment.
//!
//! A lane's raw output is text; `memsift-processor` turns it into validated items. These types are
//! what a well-behaved producer (the heuristic lane, the simulator) serialises, and the field names
//! the prompt asks a model for. `[]` is a valid, common answer.
//!
//! The contract is compact: a field that is null, empty or at its default is left out, as the
//! prompt asks a model to do, because output tokens cost five times input tokens and a dozen
//! spelled-out defaults per memory were most of the answer. The defaults here are the ones the
//! processor fills in for a missing field, so writing or omitting a default reads the same.

use serde::{Deserialize, Serialize};

use crate::status::Temporal;

/// The confidence of an item that states none.
pub const DEFAULT_CONFIDENCE: f64 = 0.9;

/// One extracted memory as a producer writes it: fields at their default are left out.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ExtractedItem {
    /// The memory, written as a standalone fact.
    pub text: String,
    /// How sure the producer is, 0.0 to 1.0; [`DEFAULT_CONFIDENCE`] when left out.
    #[serde(default = "default_confidence", skip_serializing_if = "is_default_confidence")]
    pub confidence: f64,
    /// When the event happens (ISO-8601), for plans and appointments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub happens_at: Option<String>,
    /// When the fact stops being true (ISO-8601).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<String>,
    /// A private fact: address, health, family, schedule, income, real name.
    #[serde(default, skip_serializing_if = "is_false")]
    pub sensitive: bool,
    /// How long the fact holds; `unknown` when left out.
    #[serde(default = "unknown_temporal", skip_serializing_if = "is_unknown_temporal")]
    pub temporal: Temporal,
    /// How this item relates to known memories (`conflicts`, `supersedes`, …), if at all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub relationship_type: Option<String>,
    /// Short ids of the known memories the relationship refers to.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub related_memory_ids: Vec<String>,
    /// Short ids of known memories this item merges; such an item is never a duplicate.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub consolidates_memory_ids: Vec<String>,
    /// 0-based indices of other items in the same response that this one relates to.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub linking_hints: Vec<usize>,
    /// Named things the memory mentions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub entities: Vec<ExtractedEntity>,
    /// Labels of the turns the memory was read from, as shown in the prompt; always written,
    /// because a memory without evidence cannot be traced to what was said.
    #[serde(default)]
    pub evidence_turns: Vec<String>,
}

impl ExtractedItem {
    /// The item with every field written out, defaults included, as the contract was before it
    /// left them out: what cost comparisons measure the compact form against.
    pub fn spelled_out(&self) -> serde_json::Value {
        serde_json::json!({
            "text": self.text,
            "confidence": self.confidence,
            "happens_at": self.happens_at,
            "expires_at": self.expires_at,
            "sensitive": self.sensitive,
            "temporal": self.temporal,
            "relationship_type": self.relationship_type,
            "related_memory_ids": self.related_memory_ids,
            "consolidates_memory_ids": self.consolidates_memory_ids,
            "linking_hints": self.linking_hints,
            "entities": self.entities,
            "evidence_turns": self.evidence_turns,
        })
    }
}

fn default_confidence() -> f64 {
    DEFAULT_CONFIDENCE
}

fn is_default_confidence(confidence: &f64) -> bool {
    *confidence == DEFAULT_CONFIDENCE
}

fn is_false(flag: &bool) -> bool {
    !*flag
}

fn unknown_temporal() -> Temporal {
    Temporal::Unknown
}

fn is_unknown_temporal(temporal: &Temporal) -> bool {
    *temporal == Temporal::Unknown
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
            confidence: DEFAULT_CONFIDENCE,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_item_at_its_defaults_is_written_as_text_and_evidence_only() {
        let item = ExtractedItem::new(
            "Caroline has a dog named Rex.",
            Temporal::Unknown,
            vec!["D1:3".to_owned()],
        );
        let json = serde_json::to_string(&item).unwrap();
        assert_eq!(
            json,
            r#"{"text":"Caroline has a dog named Rex.","evidence_turns":["D1:3"]}"#
        );
        assert_eq!(serde_json::from_str::<ExtractedItem>(&json).unwrap(), item);
    }

    #[test]
    fn every_field_off_its_default_is_written_and_read_back() {
        let item = ExtractedItem {
            text: "Moves to Berlin on 2024-03-01.".to_owned(),
            confidence: 0.7,
            happens_at: Some("2024-03-01".to_owned()),
            expires_at: Some("2025-01-01".to_owned()),
            sensitive: true,
            temporal: Temporal::OneOff,
            relationship_type: Some("supersedes".to_owned()),
            related_memory_ids: vec!["a1b2".to_owned()],
            consolidates_memory_ids: vec!["c3d4".to_owned()],
            linking_hints: vec![1],
            entities: vec![ExtractedEntity {
                name: "Berlin".to_owned(),
                kind: "place".to_owned(),
            }],
            evidence_turns: vec!["t4".to_owned()],
        };
        let value = serde_json::to_value(&item).unwrap();
        assert_eq!(
            value,
            item.spelled_out(),
            "nothing is at its default, so nothing is left out"
        );
        assert_eq!(serde_json::from_value::<ExtractedItem>(value).unwrap(), item);
    }

    #[test]
    fn spelled_out_defaults_read_the_same_as_left_out_ones() {
        let full = r#"{"text":"Likes tea.","confidence":0.9,"happens_at":null,"expires_at":null,"sensitive":false,
            "temporal":"unknown","relationship_type":null,"related_memory_ids":[],"consolidates_memory_ids":[],
            "linking_hints":[],"entities":[],"evidence_turns":["t1"]}"#;
        let compact = r#"{"text":"Likes tea.","evidence_turns":["t1"]}"#;
        assert_eq!(
            serde_json::from_str::<ExtractedItem>(full).unwrap(),
            serde_json::from_str::<ExtractedItem>(compact).unwrap()
        );
    }
}
