//! Validation of one response element into a [`ValidItem`], or a reason code for dropping it.
//!
//! Only the text can sink an item: every other field is repaired or cleared and the repair counted in
//! [`FieldRepairs`], because a memory with a bad date is still a memory (the reference failed whole chunks on it).

use chrono::FixedOffset;
use memsift_core::status::Temporal;
use memsift_core::{MemoryId, MessageId};

use crate::dedupe::Signature;
use crate::item::Element;
use crate::loose::LooseValue;
use crate::sanitize::{
    AnalyzedText, DateField, MIN_ENTITY_CHARS, RELATIONSHIP_TYPES, clean_text, normalize_entity_kind, parse_date_field,
    parse_flag, parse_temporal,
};
use crate::{DropReason, FieldRepairs, MAX_TEXT_CHARS, MIN_TEXT_CHARS, ProcessInput, ValidItem};

/// Confidence used when the model gave none or gave something that is not a number.
pub const DEFAULT_CONFIDENCE: f64 = 0.9;

/// An item that passed validation, with what the dedupe and hint stages still need.
pub(crate) struct Candidate {
    pub item: ValidItem,
    /// Linking hints as response indices (validated to be in range and not the item itself).
    pub response_hints: Vec<usize>,
    /// The fuzzy bounds' summary of the item's text.
    pub signature: Signature,
}

/// Why an element was dropped, with a human-readable detail.
pub(crate) struct Rejection {
    pub reason: DropReason,
    pub detail: String,
}

impl Rejection {
    fn new(reason: DropReason, detail: impl Into<String>) -> Self {
        Self {
            reason,
            detail: detail.into(),
        }
    }
}

/// What every item of one response is validated against.
pub(crate) struct ItemContext<'a> {
    pub input: &'a ProcessInput<'a>,
    pub user_offset: FixedOffset,
    pub n_elements: usize,
}

pub(crate) fn validate_item(
    element: &Element<'_>,
    index: usize,
    context: &ItemContext<'_>,
    repairs: &mut FieldRepairs,
) -> Result<Candidate, Rejection> {
    let object = match element {
        Element::Item(item) => item,
        Element::Other(value) => {
            return Err(Rejection::new(
                DropReason::WrongType,
                format!("element is {}", value.type_name()),
            ));
        }
    };
    let raw_text = match object.text.as_ref() {
        Some(LooseValue::String(text)) => text,
        None | Some(LooseValue::Null) => return Err(Rejection::new(DropReason::MissingText, "no `text`")),
        Some(other) => {
            return Err(Rejection::new(
                DropReason::MissingText,
                format!("`text` is {}", other.type_name()),
            ));
        }
    };
    let analyzed = AnalyzedText::of(raw_text);
    let n_chars = analyzed.text.chars().count();
    if n_chars == 0 {
        return Err(Rejection::new(DropReason::MissingText, "`text` is blank"));
    }
    if n_chars < MIN_TEXT_CHARS {
        return Err(Rejection::new(
            DropReason::TooShort,
            format!("{n_chars} characters < {MIN_TEXT_CHARS}"),
        ));
    }
    if n_chars > MAX_TEXT_CHARS {
        return Err(Rejection::new(
            DropReason::TooLong,
            format!("{n_chars} characters > {MAX_TEXT_CHARS}"),
        ));
    }
    if analyzed.stripped_controls {
        repairs.control_characters += 1;
    }
    let AnalyzedText {
        text,
        signature,
        exact_key,
        mentions_private: phrase_sensitive,
        ..
    } = analyzed;

    let confidence = match object.confidence.as_ref() {
        None | Some(LooseValue::Null) => DEFAULT_CONFIDENCE,
        Some(LooseValue::Number(number)) => match number.as_f64() {
            value if (0.0..=1.0).contains(&value) => value,
            value => {
                repairs.bad_confidence += 1;
                value.clamp(0.0, 1.0)
            }
        },
        // Booleans and strings are not confidences (Python's bool-is-int let `true` through as 1.0).
        Some(_) => {
            repairs.bad_confidence += 1;
            DEFAULT_CONFIDENCE
        }
    };

    let mut date = |value: Option<&LooseValue<'_>>| match parse_date_field(value, context.user_offset) {
        DateField::Absent => None,
        DateField::Valid(at) => Some(at),
        DateField::Invalid => {
            repairs.bad_dates += 1;
            None
        }
    };
    let happens_at = date(object.happens_at.as_ref());
    let expires_at = date(object.expires_at.as_ref());

    let declared_sensitive = parse_flag(object.sensitive.as_ref()).unwrap_or_else(|| {
        repairs.bad_sensitive += 1;
        false
    });
    if phrase_sensitive && !declared_sensitive {
        repairs.sensitive_by_phrase += 1;
    }

    let temporal = match object.temporal.as_ref() {
        None | Some(LooseValue::Null) => Temporal::Unknown,
        Some(LooseValue::String(label)) => {
            let temporal = parse_temporal(label);
            if temporal == Temporal::Unknown && !label.trim().eq_ignore_ascii_case("unknown") {
                repairs.bad_temporal += 1;
            }
            temporal
        }
        Some(_) => {
            repairs.bad_temporal += 1;
            Temporal::Unknown
        }
    };

    let relationship_type = match object.relationship_type.as_ref() {
        None | Some(LooseValue::Null) => None,
        Some(LooseValue::String(kind)) => {
            let kind = kind.trim().to_ascii_lowercase();
            if RELATIONSHIP_TYPES.contains(&kind.as_str()) {
                Some(kind)
            } else {
                if !kind.is_empty() && kind != "null" && kind != "none" {
                    repairs.bad_relationship_type += 1;
                }
                None
            }
        }
        Some(_) => {
            repairs.bad_relationship_type += 1;
            None
        }
    };

    let related_memory_ids = map_memory_ids(object.related_memory_ids.as_ref(), context.input, repairs);
    let consolidates_memory_ids = map_memory_ids(object.consolidates_memory_ids.as_ref(), context.input, repairs);
    let response_hints = linking_hints(object.linking_hints.as_ref(), index, context.n_elements, repairs);
    let entities = entities(object.entities.as_ref(), repairs);
    let evidence = evidence(object.evidence_turns.as_ref(), context.input, repairs)?;

    Ok(Candidate {
        item: ValidItem {
            dedupe_key: exact_key,
            text,
            confidence,
            happens_at,
            expires_at,
            sensitive: declared_sensitive || phrase_sensitive,
            temporal,
            relationship_type,
            related_memory_ids,
            consolidates_memory_ids,
            linking_hints: Vec::new(),
            entities,
            evidence,
        },
        response_hints,
        signature,
    })
}

/// A list field that a model sometimes writes as a single scalar.
fn as_list<'v, 'a>(value: Option<&'v LooseValue<'a>>) -> &'v [LooseValue<'a>] {
    match value {
        Some(LooseValue::Array(list)) => list,
        Some(
            scalar @ (LooseValue::String(_) | LooseValue::Number(_) | LooseValue::Bool(_) | LooseValue::Object(_)),
        ) => std::slice::from_ref(scalar),
        None | Some(LooseValue::Null) => &[],
    }
}

/// Maps short ids back to full ids through the request's context; anything else is counted and dropped.
fn map_memory_ids(
    value: Option<&LooseValue<'_>>,
    input: &ProcessInput<'_>,
    repairs: &mut FieldRepairs,
) -> Vec<MemoryId> {
    let mut ids = Vec::new();
    for value in as_list(value) {
        let resolved = value.as_str().and_then(|short| resolve_memory_id(short.trim(), input));
        match resolved {
            Some(id) if !ids.contains(&id) => ids.push(id),
            Some(_) => {}
            None => repairs.unknown_ids += 1,
        }
    }
    ids
}

fn resolve_memory_id(written: &str, input: &ProcessInput<'_>) -> Option<MemoryId> {
    if let Some((id, _)) = input.context.get(written) {
        return Some(*id);
    }
    let lowered = written.to_ascii_lowercase();
    if let Some((id, _)) = input.context.get(&lowered) {
        return Some(*id);
    }
    // A model that copies the full id of a memory it was shown is still pointing at a known memory.
    let full = MemoryId::parse(written).ok()?;
    input.context.values().map(|(id, _)| *id).find(|id| *id == full)
}

/// Keeps integer hints that point at another element of this response; booleans and floats are not indices.
fn linking_hints(
    value: Option<&LooseValue<'_>>,
    own: usize,
    n_elements: usize,
    repairs: &mut FieldRepairs,
) -> Vec<usize> {
    let mut hints = Vec::new();
    for hint in as_list(value) {
        let target = hint.as_u64().and_then(|target| usize::try_from(target).ok());
        match target {
            Some(target) if target < n_elements && target != own => {
                if !hints.contains(&target) {
                    hints.push(target);
                }
            }
            _ => repairs.bad_linking_hints += 1,
        }
    }
    hints
}

fn entities(value: Option<&LooseValue<'_>>, repairs: &mut FieldRepairs) -> Vec<(String, String)> {
    let mut kept: Vec<(String, String)> = Vec::new();
    for entity in as_list(value) {
        let (name, kind) = match entity {
            LooseValue::Object(_) => {
                let kind = entity
                    .get("kind")
                    .or_else(|| entity.get("type"))
                    .and_then(LooseValue::as_str)
                    .unwrap_or("");
                (entity.get("name").and_then(LooseValue::as_str), kind)
            }
            // A bare name is a usable entity of unknown kind.
            LooseValue::String(name) => (Some(name.as_ref()), ""),
            _ => (None, ""),
        };
        let Some(name) = name.map(|name| clean_text(name).text) else {
            repairs.bad_entities += 1;
            continue;
        };
        if name.chars().count() < MIN_ENTITY_CHARS {
            repairs.bad_entities += 1;
            continue;
        }
        let kind = normalize_entity_kind(kind);
        let already = kept
            .iter()
            .any(|(seen, seen_kind)| seen_kind == kind && same_name(seen, &name));
        if !already {
            kept.push((name, kind.to_owned()));
        }
    }
    kept
}

/// Evidence must cite turns of this chunk that are not the assistant's: a label the chunk does not
/// have is a hallucinated citation, and an assistant turn is not something the person said. An
/// item left with no such citation is dropped (when the input names its chunk's turns at all).
fn evidence(
    value: Option<&LooseValue<'_>>,
    input: &ProcessInput<'_>,
    repairs: &mut FieldRepairs,
) -> Result<Vec<MessageId>, Rejection> {
    let mut messages = Vec::new();
    let (mut unknown, mut assistant) = (Vec::new(), Vec::new());
    let cited = as_list(value);
    for label in cited {
        let written = label.as_str().map(str::trim);
        match written.and_then(|label| Some((label, input.turns.get(label)?))) {
            Some((label, _)) if input.assistant_turns.contains(label) => assistant.push(label.to_owned()),
            Some((_, message)) if !messages.contains(message) => messages.push(*message),
            Some(_) => {}
            None => {
                repairs.evidence_outside_chunk += 1;
                unknown.push(written.map_or_else(|| label.type_name().to_owned(), str::to_owned));
            }
        }
    }
    if !messages.is_empty() || input.turns.is_empty() {
        return Ok(messages);
    }
    let detail = if cited.is_empty() {
        "no `evidence_turns`".to_owned()
    } else if !assistant.is_empty() {
        format!("cites only assistant turns ({})", assistant.join(", "))
    } else {
        format!("cites no turn of this chunk ({})", cut(&unknown.join(", "), 80))
    };
    Err(Rejection::new(DropReason::MissingEvidence, detail))
}

/// At most `max` characters of `text`, so a detail never carries a model's whole invention.
fn cut(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}

/// Case-insensitive equality without allocating in the common ASCII case.
fn same_name(a: &str, b: &str) -> bool {
    if a.is_ascii() && b.is_ascii() {
        return a.eq_ignore_ascii_case(b);
    }
    a.to_lowercase() == b.to_lowercase()
}
