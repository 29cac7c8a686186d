//! Pure response processing: raw lane output in, validated and deduplicated memories out.
//!
//! **Architecture invariant:** this crate does no I/O. Everything it needs (the raw text, the
//! request's context snapshot, the turn labels of the chunk, the clock reading) arrives as
//! arguments, so `memsift replay` can re-run it over stored outputs with no provider and no store.
//! One bad item never sinks a response: validation is per item and every drop records why.

#![deny(missing_docs)]

use std::collections::{BTreeMap, HashSet};

use chrono::{DateTime, NaiveDate, NaiveDateTime, Utc};
use memsift_core::status::Temporal;
use memsift_core::text::{collapse_whitespace, dedupe_key};
use memsift_core::{MemoryId, MessageId};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Shortest memory text kept, in characters (the reference's rule).
pub const MIN_TEXT_CHARS: usize = 10;
/// Longest memory text kept, in characters.
pub const MAX_TEXT_CHARS: usize = 2000;

/// Why the provider stopped writing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// The model finished.
    EndTurn,
    /// The output hit `max_tokens`: the tail may be cut.
    MaxTokens,
    /// Anything else the provider reports.
    Other,
}

/// Everything the processor needs, captured when the request was built.
#[derive(Clone, Debug, Default)]
pub struct ProcessInput<'a> {
    /// The lane's raw text.
    pub raw_text: &'a str,
    /// Why the provider stopped, when known.
    pub stop_reason: Option<StopReason>,
    /// Known memories shown in the request: short id → (full id, text).
    pub context: BTreeMap<String, (MemoryId, String)>,
    /// Turn labels of the chunk → message ids; evidence outside this map is dropped.
    pub turns: BTreeMap<String, MessageId>,
    /// The user's active memories' dedupe keys, for the exact stage against the store.
    pub existing_keys: HashSet<String>,
}

/// A memory that survived processing.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ValidItem {
    /// Trimmed, whitespace-collapsed text.
    pub text: String,
    /// The normalised exact key (unique per user among active memories).
    pub dedupe_key: String,
    /// 0.0–1.0.
    pub confidence: f64,
    /// UTC.
    pub happens_at: Option<DateTime<Utc>>,
    /// UTC.
    pub expires_at: Option<DateTime<Utc>>,
    /// Private fact.
    pub sensitive: bool,
    /// How long it holds.
    pub temporal: Temporal,
    /// Link kind to known memories, if any.
    pub relationship_type: Option<String>,
    /// Known memories it relates to.
    pub related_memory_ids: Vec<MemoryId>,
    /// Known memories it merges.
    pub consolidates_memory_ids: Vec<MemoryId>,
    /// Indices into the surviving items.
    pub linking_hints: Vec<usize>,
    /// (name, kind) pairs, names whitespace-collapsed.
    pub entities: Vec<(String, String)>,
    /// Message ids of the evidence turns.
    pub evidence: Vec<MessageId>,
}

/// Why an item was dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DropReason {
    /// The element was not an object.
    WrongType,
    /// No `text`, or not a string.
    MissingText,
    /// Shorter than [`MIN_TEXT_CHARS`].
    TooShort,
    /// Longer than [`MAX_TEXT_CHARS`].
    TooLong,
    /// Same normalised text as an earlier item of this response.
    DuplicateInResponse,
    /// Same normalised text as an active memory of the user.
    DuplicateOfExisting,
    /// The last item of a response cut off by `max_tokens`.
    Truncated,
}

/// One dropped item and why.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DroppedItem {
    /// Its index in the response.
    pub index: usize,
    /// Why.
    pub reason: DropReason,
    /// Its text, when it had one.
    pub text: Option<String>,
}

/// What processing produced.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ProcessOutput {
    /// Items to write.
    pub items: Vec<ValidItem>,
    /// Items not written, each with a reason.
    pub dropped: Vec<DroppedItem>,
    /// The response could not be read as JSON at all.
    pub unparseable: bool,
}

/// Parses, validates and deduplicates one response.
pub fn process(input: &ProcessInput<'_>) -> ProcessOutput {
    let mut output = ProcessOutput::default();
    let elements = match parse_elements(input.raw_text) {
        Some(elements) => elements,
        None => {
            output.unparseable = true;
            return output;
        }
    };
    let mut seen_keys = HashSet::new();
    for (index, element) in elements.into_iter().enumerate() {
        match validate(&element, input) {
            Err(reason) => output.dropped.push(DroppedItem {
                index,
                reason,
                text: text_of(&element),
            }),
            Ok(item) => {
                if input.existing_keys.contains(&item.dedupe_key) {
                    output.dropped.push(DroppedItem {
                        index,
                        reason: DropReason::DuplicateOfExisting,
                        text: Some(item.text),
                    });
                } else if !seen_keys.insert(item.dedupe_key.clone()) {
                    output.dropped.push(DroppedItem {
                        index,
                        reason: DropReason::DuplicateInResponse,
                        text: Some(item.text),
                    });
                } else {
                    output.items.push(item);
                }
            }
        }
    }
    output
}

fn parse_elements(raw: &str) -> Option<Vec<Value>> {
    let trimmed = raw.trim();
    if trimmed.is_empty() {
        return Some(Vec::new());
    }
    match serde_json::from_str::<Value>(trimmed).ok()? {
        Value::Array(elements) => Some(elements),
        Value::Object(mut object) => match object.remove("memories") {
            Some(Value::Array(elements)) => Some(elements),
            Some(_) => None,
            None => Some(vec![Value::Object(object)]),
        },
        _ => None,
    }
}

fn text_of(element: &Value) -> Option<String> {
    element.get("text").and_then(Value::as_str).map(str::to_owned)
}

fn validate(element: &Value, input: &ProcessInput<'_>) -> Result<ValidItem, DropReason> {
    let object = element.as_object().ok_or(DropReason::WrongType)?;
    let text = collapse_whitespace(
        object
            .get("text")
            .and_then(Value::as_str)
            .ok_or(DropReason::MissingText)?,
    );
    let n_chars = text.chars().count();
    if n_chars < MIN_TEXT_CHARS {
        return Err(DropReason::TooShort);
    }
    if n_chars > MAX_TEXT_CHARS {
        return Err(DropReason::TooLong);
    }
    let confidence = object
        .get("confidence")
        .and_then(Value::as_f64)
        .unwrap_or(0.9)
        .clamp(0.0, 1.0);
    let evidence = string_list(object.get("evidence_turns"))
        .into_iter()
        .filter_map(|label| input.turns.get(&label).copied())
        .collect();
    let entities = object
        .get("entities")
        .and_then(Value::as_array)
        .map(|list| {
            list.iter()
                .filter_map(|entity| {
                    let name = collapse_whitespace(entity.get("name")?.as_str()?);
                    let kind = entity
                        .get("kind")
                        .and_then(Value::as_str)
                        .unwrap_or("other")
                        .trim()
                        .to_lowercase();
                    (name.chars().count() >= 2).then_some((name, kind))
                })
                .collect()
        })
        .unwrap_or_default();
    let map_ids = |key: &str| -> Vec<MemoryId> {
        string_list(object.get(key))
            .iter()
            .filter_map(|short| input.context.get(short).map(|(id, _)| *id))
            .collect()
    };
    Ok(ValidItem {
        dedupe_key: dedupe_key(&text),
        text,
        confidence,
        happens_at: object.get("happens_at").and_then(Value::as_str).and_then(parse_date),
        expires_at: object.get("expires_at").and_then(Value::as_str).and_then(parse_date),
        sensitive: object.get("sensitive").and_then(Value::as_bool).unwrap_or(false),
        temporal: object
            .get("temporal")
            .and_then(Value::as_str)
            .map(Temporal::normalize)
            .unwrap_or(Temporal::Unknown),
        relationship_type: object
            .get("relationship_type")
            .and_then(Value::as_str)
            .map(str::to_owned),
        related_memory_ids: map_ids("related_memory_ids"),
        consolidates_memory_ids: map_ids("consolidates_memory_ids"),
        linking_hints: Vec::new(),
        entities,
        evidence,
    })
}

fn string_list(value: Option<&Value>) -> Vec<String> {
    value
        .and_then(Value::as_array)
        .map(|list| list.iter().filter_map(Value::as_str).map(str::to_owned).collect())
        .unwrap_or_default()
}

fn parse_date(input: &str) -> Option<DateTime<Utc>> {
    if let Ok(at) = DateTime::parse_from_rfc3339(input) {
        return Some(at.with_timezone(&Utc));
    }
    if let Ok(naive) = NaiveDateTime::parse_from_str(input, "%Y-%m-%dT%H:%M:%S") {
        return Some(naive.and_utc());
    }
    NaiveDate::parse_from_str(input, "%Y-%m-%d")
        .ok()
        .and_then(|date| date.and_hms_opt(0, 0, 0))
        .map(|naive| naive.and_utc())
}
