//! One response element as validation sees it: the dozen fields of the output contract, read straight from the
//! text, or the value itself when it is not an object.
//!
//! Reading items into [`crate::LooseValue`] objects built a field list per item, searched it a dozen times and
//! freed it again; filling named slots while parsing does none of that. Each slot holds exactly what
//! `LooseValue::get` would have returned (the last copy of a repeated key), and keys outside the contract are still
//! parsed as values, so the same texts are accepted and rejected as before.

use crate::loose::LooseValue;

/// A response element.
// Unboxed: nearly every element is an item, and a box would cost the allocation per item this type exists to avoid.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Element<'a> {
    /// An object, reduced to the fields the contract names.
    Item(RawItem<'a>),
    /// Anything else; validation drops it as the wrong type.
    Other(LooseValue<'a>),
}

/// The contract's fields of one object, each the last copy of its key.
#[derive(Default)]
pub(crate) struct RawItem<'a> {
    pub text: Option<LooseValue<'a>>,
    pub confidence: Option<LooseValue<'a>>,
    pub happens_at: Option<LooseValue<'a>>,
    pub expires_at: Option<LooseValue<'a>>,
    pub sensitive: Option<LooseValue<'a>>,
    pub temporal: Option<LooseValue<'a>>,
    pub relationship_type: Option<LooseValue<'a>>,
    pub related_memory_ids: Option<LooseValue<'a>>,
    pub consolidates_memory_ids: Option<LooseValue<'a>>,
    pub linking_hints: Option<LooseValue<'a>>,
    pub entities: Option<LooseValue<'a>>,
    pub evidence_turns: Option<LooseValue<'a>>,
    /// Whether the `text` value closed: the reader sets it; an item built from an already parsed value leaves it
    /// false, which only matters for an element the text ended inside (see [`Element::text_whole`]).
    pub text_whole: bool,
}

impl<'a> RawItem<'a> {
    /// The slot of a contract key; `None` for any other key.
    pub(crate) fn slot(&mut self, key: &str) -> Option<&mut Option<LooseValue<'a>>> {
        Some(match key {
            "text" => &mut self.text,
            "confidence" => &mut self.confidence,
            "happens_at" => &mut self.happens_at,
            "expires_at" => &mut self.expires_at,
            "sensitive" => &mut self.sensitive,
            "temporal" => &mut self.temporal,
            "relationship_type" => &mut self.relationship_type,
            "related_memory_ids" => &mut self.related_memory_ids,
            "consolidates_memory_ids" => &mut self.consolidates_memory_ids,
            "linking_hints" => &mut self.linking_hints,
            "entities" => &mut self.entities,
            "evidence_turns" => &mut self.evidence_turns,
            _ => return None,
        })
    }
}

impl<'a> Element<'a> {
    /// The element of an already parsed value (the pre-pass and repair paths).
    pub(crate) fn from_loose(value: LooseValue<'a>) -> Self {
        match value {
            LooseValue::Object(fields) => {
                let mut item = RawItem::default();
                for (key, value) in fields {
                    if let Some(slot) = item.slot(&key) {
                        *slot = Some(value);
                    }
                }
                Element::Item(item)
            }
            other => Element::Other(other),
        }
    }

    /// Whether this object's `text` string closed before the response's text ended: an element the text ended
    /// inside is still an item when it had finished saying its memory.
    pub(crate) fn text_whole(&self) -> bool {
        matches!(self, Element::Item(item) if item.text_whole && item.text.as_ref().and_then(LooseValue::as_str).is_some())
    }

    /// The `text` field when it is a string; `None` for non-objects, like `LooseValue::get`.
    pub(crate) fn text(&self) -> Option<&str> {
        match self {
            Element::Item(item) => item.text.as_ref().and_then(LooseValue::as_str),
            Element::Other(_) => None,
        }
    }
}
