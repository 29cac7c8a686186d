//! Pure response processing: raw lane output in, validated and deduplicated memories out.
//!
//! **Architecture invariant:** this crate does no I/O. Everything it needs (the raw text, the
//! request's context snapshot, the turn labels of the chunk, the clock reading) arrives as
//! arguments, so `memsift replay` can re-run it over stored outputs with no provider and no store.
//! One bad item never sinks a response: validation is per item and every drop records why.
//!
//! Stages, in order: [`parse_response`] (find the JSON, then one tolerant reading that recovers every element that
//! closed, recording the [`ParsePath`]); the truncation rule (an element the text ended inside is dropped, never
//! half-stored, whatever the stop reason: an `end_turn` answer can be cut too); per-item validation and sanitisation, fields left out
//! taking their defaults; exact dedupe on the normalised key; fuzzy dedupe (ratio ≥ 0.95) against earlier items and
//! the known texts; linking hints re-pointed at surviving items. The vector stage
//! ([`dedupe_by_vectors`], or [`ProcessOutput::apply_vector_stage`]) runs afterwards, once embeddings exist.
//!
//! Decisions worth knowing:
//! - Only the text can sink an item. A date that cannot be read is cleared and counted in
//!   [`FieldRepairs::bad_dates`]; the memory is kept, because the fact is still true without its date (the
//!   reference failed the whole chunk). Unknown ids, evidence outside the chunk, bad hints and bad entities are
//!   likewise dropped one by one and counted.
//! - The fuzzy ratio is strsim's normalized Levenshtein on lowercased, whitespace-collapsed text, not the
//!   reference's case-sensitive Indel ratio. For substitutions both give 1 − k/n; for insertions and deletions
//!   Levenshtein divides by the longer length where Indel divides by the sum, so Levenshtein is never more
//!   lenient and a ≥ 0.95 match is a near-copy, not a paraphrase. Exact length and histogram bounds run first.
//! - `items.len() + dropped.len() == elements_parsed` always holds (a property test checks it).

#![deny(missing_docs)]

mod dedupe;
mod item;
mod loose;
mod parse;
mod reader;
mod sanitize;
mod validate;

use std::cell::OnceCell;
use std::collections::{BTreeMap, BTreeSet, HashSet};

use chrono::{DateTime, FixedOffset, Utc};
use memsift_core::status::Temporal;
use memsift_core::{MemoryId, MessageId};
use serde::{Deserialize, Serialize};

pub use dedupe::{
    FUZZY_DUPLICATE_THRESHOLD, FuzzyText, VECTOR_DUPLICATE_THRESHOLD, cosine, dedupe_by_vectors, fuzzy_ratio,
    normalize_for_fuzzy, retain_with_hints,
};
pub use loose::{LooseNumber, LooseValue};
pub use parse::{ParsePath, ParsedResponse, parse_response};
pub use sanitize::{
    ENTITY_KINDS, MIN_ENTITY_CHARS, RELATIONSHIP_TYPES, SENSITIVE_PHRASES, mentions_private_fact, normalize_entity_kind,
};
pub use validate::DEFAULT_CONFIDENCE;
// Drops are stored with each request, so their type lives in memsift-core beside the other
// typed request values; this crate decides them.
pub use memsift_core::drops::{DropReason, DroppedItem};

use crate::dedupe::{Signature, is_clean_ascii, known_signature, normalized_char_count, remap_hints, similarity_of};
use crate::item::Element;
use crate::validate::{Candidate, ItemContext, validate_item};

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
    /// Why the provider stopped, when known. Recorded, not trusted: whether the answer was cut is read from its JSON,
    /// since a model can stop early with `end_turn` as well as hit `max_tokens`.
    pub stop_reason: Option<StopReason>,
    /// Known memories shown in the request: short id → (full id, text).
    pub context: BTreeMap<String, (MemoryId, String)>,
    /// Turn labels of the chunk → message ids; evidence outside this map is dropped. When it is
    /// not empty, an item must cite at least one of these that is not in `assistant_turns`, or it
    /// is dropped as `missing_evidence`; an input without turns (a parse-only bench or test) has
    /// nothing to check citations against.
    pub turns: BTreeMap<String, MessageId>,
    /// The labels among `turns` that are the assistant's: never evidence (the prompt forbids it).
    pub assistant_turns: BTreeSet<String>,
    /// The user's active memories' dedupe keys, for the exact stage against the store: all of
    /// them, or only those among [`candidate_keys`] (the same answer, read in a bounded time).
    pub existing_keys: HashSet<String>,
    /// The user's UTC offset in minutes (east positive); naive dates in the output are read in it. Default 0 (UTC);
    /// an offset chrono rejects (beyond ±24 h) also falls back to UTC.
    pub timezone_offset_minutes: i32,
    /// The user's active memories (id, text) for the fuzzy stage, in addition to the context texts.
    pub known_texts: Vec<(MemoryId, String)>,
}

impl ProcessInput<'_> {
    /// The user's offset as chrono sees it.
    pub fn user_offset(&self) -> FixedOffset {
        self.timezone_offset_minutes
            .checked_mul(60)
            .and_then(FixedOffset::east_opt)
            .unwrap_or(FixedOffset::east_opt(0).expect("a zero offset is always valid"))
    }
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

/// Counts of fields that were repaired or cleared without dropping their item.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FieldRepairs {
    /// Related or consolidated ids that were not in the request's context (dropped).
    pub unknown_ids: usize,
    /// Evidence labels that are not turns of this chunk (dropped).
    pub evidence_outside_chunk: usize,
    /// `happens_at`/`expires_at` values that could not be read as dates (cleared; the item is kept).
    pub bad_dates: usize,
    /// Confidences that were not numbers (set to the default) or outside [0, 1] (clamped).
    pub bad_confidence: usize,
    /// `sensitive` values that were neither booleans nor "true"/"false" (read as false, then the phrase list).
    pub bad_sensitive: usize,
    /// Items the phrase list marked sensitive although the model did not.
    pub sensitive_by_phrase: usize,
    /// `temporal` labels outside the four values (set to `unknown`).
    pub bad_temporal: usize,
    /// `relationship_type` values outside [`RELATIONSHIP_TYPES`] (cleared).
    pub bad_relationship_type: usize,
    /// Linking hints that were not integers, out of range or self-references (dropped).
    pub bad_linking_hints: usize,
    /// Entities without a usable name (dropped).
    pub bad_entities: usize,
    /// Texts from which control or zero-width characters were removed.
    pub control_characters: usize,
}

/// What processing produced.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ProcessOutput {
    /// Items to write.
    pub items: Vec<ValidItem>,
    /// Items not written, each with a reason, in response order.
    pub dropped: Vec<DroppedItem>,
    /// The response could not be read as JSON at all.
    pub unparseable: bool,
    /// How the response was read.
    pub parse_path: ParsePath,
    /// The JSON ended before its brackets closed (the text ran out, or a note followed a cut), whatever the stop
    /// reason, so a continuation must read the chunk again; the element the text ended inside, if any, is kept
    /// with the fields that closed when its text closed, and dropped as truncated otherwise.
    pub cut_off: bool,
    /// How many elements the response held; always `items.len() + dropped.len()`.
    pub elements_parsed: usize,
    /// The response index of each item (parallel to `items`).
    pub item_indices: Vec<usize>,
    /// Fields repaired or cleared on kept and dropped-as-duplicate items.
    pub repairs: FieldRepairs,
}

impl ProcessOutput {
    /// How many drops have `reason`.
    pub fn count_dropped(&self, reason: DropReason) -> usize {
        self.dropped.iter().filter(|drop| drop.reason == reason).count()
    }

    /// Runs [`dedupe_by_vectors`] over `items` and applies it: drops are recorded with their response index
    /// (and `duplicate_of_index` as a response index too), and linking hints are re-pointed at the survivors.
    pub fn apply_vector_stage(
        &mut self,
        item_vectors: &[Vec<f32>],
        neighbours: &[Vec<(MemoryId, f32)>],
        threshold: f32,
    ) {
        let (kept, dropped) = dedupe_by_vectors(&self.items, item_vectors, neighbours, threshold);
        let to_response_index = |position: usize| self.item_indices.get(position).copied().unwrap_or(position);
        for mut drop in dropped {
            drop.index = to_response_index(drop.index);
            drop.duplicate_of_index = drop.duplicate_of_index.map(to_response_index);
            self.dropped.push(drop);
        }
        self.dropped.sort_by_key(|drop| drop.index);
        self.item_indices = kept.iter().map(|&position| to_response_index(position)).collect();
        self.items = retain_with_hints(std::mem::take(&mut self.items), &kept);
    }
}

/// The normalised key (`dedupe_key`) of every item's text in a raw answer, whatever becomes of
/// the item later (kept, dropped as invalid, a duplicate or a near-duplicate): erasure
/// fingerprints all of them, so an item the same answer would give after a re-import is refused
/// whether or not it was stored the first time.
pub fn item_fact_keys(raw: &str) -> Vec<String> {
    parse_response(raw)
        .elements
        .iter()
        .filter_map(|element| element.get("text").and_then(LooseValue::as_str))
        .map(|text| sanitize::AnalyzedText::of(text).exact_key)
        .filter(|key| !key.is_empty())
        .collect()
}

/// Parses, validates and deduplicates one response.
pub fn process(input: &ProcessInput<'_>) -> ProcessOutput {
    let parse::Document {
        elements,
        path,
        cut_off,
        last_element_cut,
    } = parse_elements(input.raw_text);
    let n_elements = elements.len();
    let mut output = ProcessOutput {
        unparseable: path == ParsePath::Unparseable,
        parse_path: path,
        cut_off,
        elements_parsed: n_elements,
        ..ProcessOutput::default()
    };
    if n_elements == 0 {
        return output;
    }
    // Only an element the text ended inside is partial, whatever the stop reason. A `max_tokens`
    // stop after an element closed cut nothing of it: dropping it would lose a complete memory,
    // and a response holding one complete element would yield none.
    let context = ItemContext {
        input,
        user_offset: input.user_offset(),
        n_elements,
    };
    let known = known_texts(input);

    let mut survivors: Vec<(usize, Candidate)> = Vec::with_capacity(n_elements);
    output.items.reserve_exact(n_elements);
    output.item_indices.reserve_exact(n_elements);
    for (index, element) in elements.iter().enumerate() {
        // The element the answer ended inside is an item if its text closed (what it finished saying, without
        // the field it was cut in); otherwise it is dropped as truncated.
        if last_element_cut && index + 1 == n_elements && !element.text_whole() {
            let text = element.text().map(str::to_owned);
            output.dropped.push(DroppedItem {
                detail: Some("the answer ended inside this element's text".into()),
                ..DroppedItem::new(index, DropReason::Truncated, text)
            });
            continue;
        }
        let candidate = match validate_item(element, index, &context, &mut output.repairs) {
            Ok(candidate) => candidate,
            Err(rejection) => {
                let text = element.text().map(str::to_owned);
                output.dropped.push(DroppedItem {
                    detail: Some(rejection.detail),
                    ..DroppedItem::new(index, rejection.reason, text)
                });
                continue;
            }
        };
        // Consolidating items replace the memories they name, so resembling them is the point, not a duplicate.
        let consolidates = !candidate.item.consolidates_memory_ids.is_empty();
        let duplicate = if consolidates {
            None
        } else {
            find_duplicate(&candidate, &survivors, &known, input)
        };
        if let Some(duplicate) = duplicate {
            // Only a duplicate of a stored memory passes its evidence on; one of an earlier item
            // of this response cites the same chunk.
            let evidence = if duplicate.duplicate_of_index.is_none() {
                candidate.item.evidence
            } else {
                Vec::new()
            };
            output.dropped.push(DroppedItem {
                index,
                text: Some(candidate.item.text),
                evidence,
                ..duplicate
            });
            continue;
        }
        survivors.push((index, candidate));
    }

    let mut new_position: Vec<Option<usize>> = vec![None; n_elements];
    for (position, (index, _)) in survivors.iter().enumerate() {
        new_position[*index] = Some(position);
    }
    for (position, (index, candidate)) in survivors.into_iter().enumerate() {
        let mut item = candidate.item;
        item.linking_hints = remap_hints(&candidate.response_hints, &new_position, position);
        output.items.push(item);
        output.item_indices.push(index);
    }
    output
}

/// The dedupe keys of every element of the answer that passes validation. They are the only keys
/// the exact stage looks up in [`ProcessInput::existing_keys`], so a caller can read just these
/// from its store (one index lookup each, whatever the user holds) instead of every key the user
/// has: [`process`] answers the same with `existing_keys` cut down to them (a property test holds
/// this).
pub fn candidate_keys(input: &ProcessInput<'_>) -> BTreeSet<String> {
    let document = parse_elements(input.raw_text);
    let context = ItemContext {
        input,
        user_offset: input.user_offset(),
        n_elements: document.elements.len(),
    };
    let mut repairs = FieldRepairs::default();
    document
        .elements
        .iter()
        .enumerate()
        .filter_map(|(index, element)| validate_item(element, index, &context, &mut repairs).ok())
        .map(|candidate| candidate.item.dedupe_key)
        .collect()
}

/// [`parse_response`] with the elements read as [`Element`]s, straight into the contract's fields.
fn parse_elements(raw: &str) -> parse::Document<Element<'_>> {
    parse::read_document::<Element<'_>>(raw)
}

/// A memory the user already has, summarized for the fuzzy bounds.
struct KnownText<'a> {
    id: MemoryId,
    text: &'a str,
    n_chars: usize,
    /// Printable ASCII with single inner spaces: its normalized length is its length, and its signature needs no
    /// second check.
    clean_ascii: bool,
}

impl<'a> KnownText<'a> {
    fn new(id: MemoryId, text: &'a str) -> Self {
        let clean_ascii = is_clean_ascii(text);
        Self {
            id,
            text,
            n_chars: if clean_ascii {
                text.len()
            } else {
                normalized_char_count(text)
            },
            clean_ascii,
        }
    }
}

/// The known texts sorted by normalized length, with their histograms beside them.
struct KnownTexts<'a> {
    texts: Vec<KnownText<'a>>,
    /// Parallel to `texts`; each is computed the first time an item's length window reaches its text, since
    /// most never need it. Kept apart from `texts` so the sort moves 40-byte entries instead of 300-byte ones.
    signatures: Vec<OnceCell<Signature>>,
}

/// The context texts and the caller's known texts, each memory once, sorted by normalized length.
fn known_texts<'a>(input: &'a ProcessInput<'_>) -> KnownTexts<'a> {
    let mut texts: Vec<KnownText<'a>> = Vec::with_capacity(input.context.len() + input.known_texts.len());
    for (id, text) in input.context.values() {
        texts.push(KnownText::new(*id, text));
    }
    // The caller usually repeats the context among its known texts; summarizing them twice would double the cost.
    let mut context_ids: Vec<MemoryId> = texts.iter().map(|known| known.id).collect();
    context_ids.sort_unstable();
    for (id, text) in &input.known_texts {
        if context_ids.binary_search(id).is_err() {
            texts.push(KnownText::new(*id, text));
        }
    }
    // Sorted by length so each item only looks at the texts whose length lets the ratio reach the threshold.
    // Stable, so texts of equal length keep the input's order and ties between equal scores resolve the same way
    // on every run.
    texts.sort_by_key(|known| known.n_chars);
    let signatures = texts.iter().map(|_| OnceCell::new()).collect();
    KnownTexts { texts, signatures }
}

/// The first stage that calls the candidate a duplicate, as a drop template (index and text filled by the caller).
fn find_duplicate(
    candidate: &Candidate,
    survivors: &[(usize, Candidate)],
    known: &KnownTexts<'_>,
    input: &ProcessInput<'_>,
) -> Option<DroppedItem> {
    let key = &candidate.item.dedupe_key;
    if !input.existing_keys.is_empty() && input.existing_keys.contains(key) {
        return Some(DroppedItem {
            score: Some(1.0),
            ..DroppedItem::new(0, DropReason::DuplicateOfExisting, None)
        });
    }
    // Responses hold tens of items: a scan beats hashing and cloning every key.
    if let Some((earlier, _)) = survivors.iter().find(|(_, earlier)| earlier.item.dedupe_key == *key) {
        return Some(DroppedItem {
            duplicate_of_index: Some(*earlier),
            score: Some(1.0),
            ..DroppedItem::new(0, DropReason::DuplicateInResponse, None)
        });
    }
    let best_earlier = best_match(survivors, candidate);
    if let Some((earlier, score)) = best_earlier {
        return Some(DroppedItem {
            duplicate_of_index: Some(earlier),
            score: Some(score),
            ..DroppedItem::new(0, DropReason::NearDuplicateInResponse, None)
        });
    }
    let mut best_known: Option<(MemoryId, f64)> = None;
    let (shortest, longest) = candidate.signature.length_window(FUZZY_DUPLICATE_THRESHOLD);
    let first = known.texts.partition_point(|other| other.n_chars < shortest);
    let in_window = known.texts[first..]
        .iter()
        .zip(&known.signatures[first..])
        .take_while(|(other, _)| other.n_chars <= longest);
    for (other, signature) in in_window {
        let other_signature = signature.get_or_init(|| known_signature(other.text, other.clean_ascii));
        if let Some(score) = similarity_of(
            &candidate.item.text,
            &candidate.signature,
            other.text,
            other_signature,
            FUZZY_DUPLICATE_THRESHOLD,
        ) && best_known.is_none_or(|(_, best_score)| score > best_score)
        {
            best_known = Some((other.id, score));
        }
    }
    best_known.map(|(memory, score)| DroppedItem {
        duplicate_of: Some(memory),
        score: Some(score),
        ..DroppedItem::new(0, DropReason::NearDuplicateOfKnown, None)
    })
}

/// The earlier survivor with the highest fuzzy ratio at or above the threshold, with that ratio.
fn best_match(survivors: &[(usize, Candidate)], candidate: &Candidate) -> Option<(usize, f64)> {
    let mut best: Option<(usize, f64)> = None;
    for (index, earlier) in survivors {
        if let Some(score) = similarity_of(
            &candidate.item.text,
            &candidate.signature,
            &earlier.item.text,
            &earlier.signature,
            FUZZY_DUPLICATE_THRESHOLD,
        ) && best.is_none_or(|(_, best_score)| score > best_score)
        {
            best = Some((*index, score));
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The typed fast paths must report what the generic parser reports: path, cut-off flag and every element.
    #[test]
    fn typed_reading_agrees_with_parse_response() {
        let array = r#"[{"text": "Caroline moved to Boston", "entities": [{"name": "Caroline"}]}, 7, "s", {"x": 1e5}]"#;
        let samples = [
            array.to_owned(),
            format!("```json\n{array}\n```"),
            format!("```json\n{array}\n```\nHope that helps."),
            format!("Here you go:\n{array}"),
            format!("Here you go:\n{array}\nLet me know."),
            format!("<thinking>[1]</thinking>{array}"),
            array.replace("}]", "},]"),
            array[..array.len() - 10].to_owned(),
            format!("```\n{}", &array[..array.len() - 5]),
            r#"{"text": "```json [1] ``` inside a string"}"#.to_owned(),
            r#"{"memories": [{"text": "wrapped in an object"}]}"#.to_owned(),
            r#""[{\"text\": \"double encoded\"}]""#.to_owned(),
            r#"Sure: [{"text": "it's a 'quote' and “smart” ones // not a comment"}]"#.to_owned(),
            "[[[[1]]]]".to_owned(),
            "[1, 2] [3]".to_owned(),
            "   ".to_owned(),
            "no json here".to_owned(),
        ];
        for raw in &samples {
            let parse::Document {
                elements,
                path,
                cut_off,
                last_element_cut,
            } = parse_elements(raw);
            let generic = parse_response(raw);
            assert_eq!(
                (path, cut_off, last_element_cut),
                (generic.path, generic.cut_off, generic.last_element_cut),
                "{raw:?}"
            );
            assert_eq!(elements.len(), generic.elements.len(), "{raw:?}");
            for (element, value) in elements.iter().zip(generic.elements) {
                assert_eq!(
                    element.text(),
                    value.get("text").and_then(LooseValue::as_str),
                    "{raw:?}"
                );
                match (element, Element::from_loose(value)) {
                    (Element::Item(item), Element::Item(converted)) => {
                        assert_eq!(item.entities, converted.entities, "{raw:?}");
                    }
                    (Element::Other(other), Element::Other(converted)) => assert_eq!(*other, converted, "{raw:?}"),
                    _ => panic!("the readings disagree on an element of {raw:?}"),
                }
            }
        }
    }
}
