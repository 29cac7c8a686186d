//! Reading a stage's answer as JSON, tolerantly, and the typed field accessors every parser shares.
//!
//! The wrapper stripping and repair are `memsift_processor::parse_response`, the processor's tolerant reader
//! (strict JSON, `<thinking>` blocks, code fences, surrounding prose, single quotes, comments, a cut tail), so
//! extraction and post-processing answers are read the same way. One difference: that recipe reads an object holding a
//! `memories` list as the list (the extraction contract), while a consolidation answer may well echo the
//! `memories` it merged, so objects are first read here as they stand, bare or fenced.

use memsift_processor::parse_response;
use serde_json::{Map, Value};

use crate::AnswerError;

/// How many characters of an unreadable answer the error quotes.
const EXCERPT_CHARS: usize = 60;

/// The JSON values of an answer (one for an object, each element for an array) and whether it was cut off.
pub(crate) struct Elements {
    pub(crate) values: Vec<Value>,
    pub(crate) cut_off: bool,
}

/// Reads an answer as a list of JSON values.
pub(crate) fn read_elements(raw: &str) -> Result<Elements, AnswerError> {
    let parsed = parse_response(raw);
    if matches!(
        parsed.path,
        memsift_processor::ParsePath::Unparseable | memsift_processor::ParsePath::Empty
    ) {
        return Err(AnswerError::Unparseable {
            excerpt: raw.trim().chars().take(EXCERPT_CHARS).collect(),
        });
    }
    Ok(Elements {
        values: parsed.elements.iter().map(|element| element.to_json()).collect(),
        cut_off: parsed.cut_off,
    })
}

/// Reads an answer that must be one JSON object (a one-element array holding it is accepted too).
///
/// `must_be_complete` refuses answers whose JSON was cut off, for stages whose answer carries a text that would
/// be stored: a cut merge or trim could silently lose a fact.
pub(crate) fn read_object(raw: &str, must_be_complete: bool) -> Result<Map<String, Value>, AnswerError> {
    if let Some(object) = plain_object(raw) {
        return Ok(object);
    }
    let elements = read_elements(raw)?;
    if must_be_complete && elements.cut_off {
        return Err(AnswerError::Truncated);
    }
    let n_values = elements.values.len();
    match elements.values.into_iter().next() {
        Some(Value::Object(object)) if n_values == 1 => Ok(object),
        _ => Err(AnswerError::Invalid(format!(
            "expected one JSON object, found {n_values} value(s) of another shape"
        ))),
    }
}

/// The answer's object when it is valid JSON as it stands, alone or as a code fence's whole body.
fn plain_object(raw: &str) -> Option<Map<String, Value>> {
    let trimmed = raw.trim();
    let body = match trimmed.find("```") {
        Some(fence) => {
            let after_ticks = &trimmed[fence + 3..];
            let body = &after_ticks[after_ticks.find('\n')? + 1..];
            &body[..body.find("```")?]
        }
        None => trimmed,
    };
    match serde_json::from_str(body.trim()).ok()? {
        Value::Object(object) => Some(object),
        _ => None,
    }
}

/// A required string field, whitespace-collapsed.
pub(crate) fn required_text(object: &Map<String, Value>, field: &'static str) -> Result<String, AnswerError> {
    match object.get(field) {
        None | Some(Value::Null) => Err(AnswerError::MissingField { field }),
        Some(Value::String(text)) => Ok(memsift_core::text::collapse_whitespace(text)),
        Some(other) => Err(AnswerError::Invalid(format!(
            "`{field}` should be a string, not {other}"
        ))),
    }
}

/// An optional string field, whitespace-collapsed; empty when absent.
pub(crate) fn optional_text(object: &Map<String, Value>, field: &str) -> String {
    object
        .get(field)
        .and_then(Value::as_str)
        .map(memsift_core::text::collapse_whitespace)
        .unwrap_or_default()
}

/// The `action` field, lower-cased with spaces and hyphens as underscores (`do nothing` reads as `do_nothing`).
pub(crate) fn action(object: &Map<String, Value>) -> Result<String, AnswerError> {
    let action = required_text(object, "action")?;
    Ok(action.to_ascii_lowercase().replace([' ', '-'], "_"))
}

/// A number, or a string holding one (models quote numbers now and then).
pub(crate) fn number(value: &Value) -> Option<f64> {
    let number = match value {
        Value::Number(number) => number.as_f64(),
        Value::String(text) => text.trim().parse().ok(),
        _ => None,
    };
    number.filter(|number: &f64| number.is_finite())
}

/// A boolean, or a string that plainly means one (`"true"`, `"yes"`, `"false"`, `"no"`).
pub(crate) fn boolean(value: &Value) -> Option<bool> {
    match value {
        Value::Bool(flag) => Some(*flag),
        Value::String(text) => match text.trim().to_ascii_lowercase().as_str() {
            "true" | "yes" => Some(true),
            "false" | "no" => Some(false),
            _ => None,
        },
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fenced_prose_wrapped_and_broken_objects_are_read() {
        for raw in [
            r#"{"action":"keep"}"#,
            "Here you go:\n```json\n{\"action\": \"keep\"}\n```\nThanks.",
            "Sure! {\"action\": \"keep\",} Hope this helps.",
            "{'action': 'keep'}",
            r#"[{"action":"keep"}]"#,
        ] {
            let object = read_object(raw, true).unwrap_or_else(|error| panic!("{raw}: {error}"));
            assert_eq!(action(&object).unwrap(), "keep", "{raw}");
        }
    }

    #[test]
    fn an_object_echoing_a_memories_list_stays_one_object() {
        let raw = r#"{"action":"merge","text":"Caroline likes tea","memories":["m1","m2"]}"#;
        assert_eq!(
            required_text(&read_object(raw, true).unwrap(), "text").unwrap(),
            "Caroline likes tea"
        );
        let fenced = format!("Merged:\n```json\n{raw}\n```");
        assert_eq!(action(&read_object(&fenced, true).unwrap()).unwrap(), "merge");
    }

    #[test]
    fn prose_only_blank_and_cut_answers_are_errors_that_say_so() {
        let error = read_object("I would rather not merge these.", true).unwrap_err();
        assert!(error.to_string().contains("I would rather not"), "{error}");
        assert!(matches!(
            read_object("   ", false),
            Err(AnswerError::Unparseable { .. })
        ));
        assert_eq!(
            read_object(r#"{"action":"merge","text":"Caroline li"#, true),
            Err(AnswerError::Truncated)
        );
        assert!(read_object(r#"[{"a":1},{"b":2}]"#, false).is_err());
    }

    #[test]
    fn quoted_numbers_and_booleans_are_understood() {
        assert_eq!(number(&Value::from("0.8")), Some(0.8));
        assert_eq!(number(&Value::from("high")), None);
        assert_eq!(boolean(&Value::from("Yes")), Some(true));
        assert_eq!(boolean(&Value::from(1)), None);
    }
}
