//! Refinement: trim a verbose memory or split one holding several facts, or leave it alone.
//!
//! Eligibility (length, age, reads, cooldown, rejections) is decided by the caller from these constants; this
//! module builds the request and validates the answer, so a bad answer is an error the caller counts as a
//! rejection rather than a rewrite of the memory.

use std::collections::HashSet;

use memsift_core::prompt::Prompt;
use memsift_core::status::Purpose;
use memsift_core::text::{collapse_whitespace, dedupe_key};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::answer::{action, optional_text, read_object, required_text};
use crate::{AnswerError, MemoryText, StageRequest};

/// Memories shorter than this are already tight enough.
pub const MIN_CHARS: usize = 70;
/// A memory must have settled for a week before it is rewritten, so fresh corrections land first.
pub const MIN_AGE_DAYS: i64 = 7;
/// Only memories that are read are worth paying to refine.
pub const MIN_READS: i64 = 3;
/// After an attempt, a memory waits this long before the next one.
pub const COOLDOWN_DAYS: i64 = 30;
/// After this many rejected answers a memory is not offered again.
pub const MAX_REJECTIONS: i64 = 3;

/// The fewest and most parts of a split: fewer is not a split, more is a shredding.
const SPLIT_PARTS: std::ops::RangeInclusive<usize> = 2..=5;
/// The longest part of a split, in characters.
const MAX_PART_CHARS: usize = 1000;

/// What to do with a memory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refinement {
    /// Replace the text with this shorter one.
    Trim(String),
    /// Replace the memory with these 2 to 5 memories.
    Split(Vec<String>),
    /// Leave it; the reason is recorded.
    DoNothing(String),
}

/// The user message of a refinement request.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct RefinementTask {
    pub(crate) task: String,
    pub(crate) memory: String,
}

/// One request asking how to tighten `memory`.
pub fn refinement_request(prompt: &Prompt, memory: &MemoryText) -> StageRequest {
    StageRequest::new(
        prompt,
        &RefinementTask {
            task: Purpose::Refinement.as_str().to_owned(),
            memory: memory.text.clone(),
        },
    )
}

/// Reads `{"action":"trim","text":"…"}`, `{"action":"split","texts":["…",…]}` or
/// `{"action":"do_nothing","reason":"…"}`, and checks it against `original`.
///
/// A trim must be non-empty and strictly shorter than the original (after whitespace collapse; so a mere respacing
/// is not a trim). A split needs 2 to 5 distinct, non-empty parts of at most 1000 characters each. Anything else,
/// including a cut-off answer, is an error.
pub fn parse_refinement_answer(raw: &str, original: &str) -> Result<Refinement, AnswerError> {
    let object = read_object(raw, true)?;
    match action(&object)?.as_str() {
        "trim" => {
            let text = required_text(&object, "text")?;
            let original = collapse_whitespace(original);
            if text.is_empty() {
                return Err(AnswerError::Invalid("a trimmed text cannot be empty".to_owned()));
            }
            if text.chars().count() >= original.chars().count() {
                return Err(AnswerError::Invalid(format!(
                    "a trim must be shorter than the original ({} characters), this one has {}",
                    original.chars().count(),
                    text.chars().count()
                )));
            }
            Ok(Refinement::Trim(text))
        }
        "split" => split_of(object.get("texts")).map(Refinement::Split),
        "do_nothing" | "nothing" | "keep" => Ok(Refinement::DoNothing(optional_text(&object, "reason"))),
        other => Err(AnswerError::Invalid(format!(
            "unknown refinement action `{other}`: expected trim, split or do_nothing"
        ))),
    }
}

fn split_of(texts: Option<&Value>) -> Result<Vec<String>, AnswerError> {
    let values = match texts {
        None | Some(Value::Null) => return Err(AnswerError::MissingField { field: "texts" }),
        Some(Value::Array(values)) => values,
        Some(other) => return Err(AnswerError::Invalid(format!("`texts` should be a list, not {other}"))),
    };
    let mut parts = Vec::with_capacity(values.len());
    let mut keys = HashSet::new();
    for value in values {
        let part = collapse_whitespace(
            value
                .as_str()
                .ok_or_else(|| AnswerError::Invalid(format!("a split part should be a string, not {value}")))?,
        );
        if part.is_empty() || part.chars().count() > MAX_PART_CHARS {
            return Err(AnswerError::Invalid(format!(
                "each split part needs 1 to {MAX_PART_CHARS} characters"
            )));
        }
        if !keys.insert(dedupe_key(&part)) {
            return Err(AnswerError::Invalid(format!("the split repeats the part `{part}`")));
        }
        parts.push(part);
    }
    if !SPLIT_PARTS.contains(&parts.len()) {
        return Err(AnswerError::Invalid(format!(
            "a split needs {} to {} parts, this one has {}",
            SPLIT_PARTS.start(),
            SPLIT_PARTS.end(),
            parts.len()
        )));
    }
    Ok(parts)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{memories, prompt};

    const ORIGINAL: &str =
        "Caroline basically really loves hiking in the Alps; she also volunteers at a shelter on weekends.";

    #[test]
    fn the_request_carries_the_memory_text() {
        let request = refinement_request(&prompt("refinement"), &memories(&[ORIGINAL])[0]);
        assert!(
            request
                .user_message
                .starts_with(r#"{"task":"refinement","memory":"Caroline basically"#)
        );
    }

    #[test]
    fn trims_must_be_shorter_and_different() {
        let trimmed = parse_refinement_answer(
            "Sure:\n```json\n{\"action\": \"trim\", \"text\": \"Caroline loves hiking in the Alps.\"}\n```",
            ORIGINAL,
        );
        assert_eq!(
            trimmed,
            Ok(Refinement::Trim("Caroline loves hiking in the Alps.".to_owned()))
        );
        let respaced = format!(r#"{{"action":"trim","text":"{}"}}"#, ORIGINAL.replace(' ', "  "));
        assert!(
            parse_refinement_answer(&respaced, ORIGINAL).is_err(),
            "a respacing is not a trim"
        );
        let longer = format!(r#"{{"action":"trim","text":"{ORIGINAL} Indeed."}}"#);
        assert!(parse_refinement_answer(&longer, ORIGINAL).is_err());
        assert!(parse_refinement_answer(r#"{"action":"trim","text":""}"#, ORIGINAL).is_err());
        assert_eq!(
            parse_refinement_answer(r#"{"action":"trim"}"#, ORIGINAL),
            Err(AnswerError::MissingField { field: "text" })
        );
    }

    #[test]
    fn splits_need_two_to_five_distinct_parts() {
        let split = parse_refinement_answer(
            "{'action': 'split', 'texts': ['Caroline loves hiking in the Alps.', 'Caroline volunteers at a shelter.'],}",
            ORIGINAL,
        );
        assert_eq!(
            split,
            Ok(Refinement::Split(vec![
                "Caroline loves hiking in the Alps.".to_owned(),
                "Caroline volunteers at a shelter.".to_owned()
            ]))
        );
        assert!(parse_refinement_answer(r#"{"action":"split","texts":["One part only."]}"#, ORIGINAL).is_err());
        assert!(parse_refinement_answer(r#"{"action":"split","texts":["A b.","a  B"]}"#, ORIGINAL).is_err());
        assert!(parse_refinement_answer(r#"{"action":"split","texts":["a","b","c","d","e","f"]}"#, ORIGINAL).is_err());
        assert!(parse_refinement_answer(r#"{"action":"split","texts":["a",""]}"#, ORIGINAL).is_err());
        assert!(parse_refinement_answer(r#"{"action":"split","texts":"a; b"}"#, ORIGINAL).is_err());
    }

    #[test]
    fn do_nothing_keeps_its_reason_and_unknown_actions_are_errors() {
        assert_eq!(
            parse_refinement_answer(r#"{"action":"do nothing","reason":"already tight"}"#, ORIGINAL),
            Ok(Refinement::DoNothing("already tight".to_owned()))
        );
        let error = parse_refinement_answer(r#"{"action":"rewrite","text":"x"}"#, ORIGINAL).unwrap_err();
        assert!(error.to_string().contains("rewrite"), "{error}");
    }
}
