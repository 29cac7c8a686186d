//! Reading a model's raw text as JSON elements: find where the JSON is, then read it once with the tolerant reader.
//!
//! Where the JSON is: the whole text when it starts with a bracket; otherwise after leading `<thinking>` blocks, in
//! the first code fence that holds a bracket (to the end when the fence is cut), from the first bracket on, and
//! prose after the value closes is ignored. A bracket in the prose before the answer ("[see below]") is passed over
//! when a later value holds items. Which path was taken is reported so prompt regressions show up as a metric, and
//! whether the last element was cut is reported so the caller never stores a half-written item.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};

use crate::loose::LooseValue;
use crate::reader::{FromReader, Reader, TopObject};

/// How many bracketed values of one text are read before giving up on finding items: each is a pass over the rest
/// of the text, and prose rarely holds more than one or two brackets before the answer.
const MAX_CANDIDATES: usize = 8;

/// How a response was read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ParsePath {
    /// Blank text (or only a `<thinking>` block): no memories, which is a valid answer.
    #[default]
    Empty,
    /// The trimmed text was valid JSON as it stood.
    Strict,
    /// Valid JSON once fences, `<thinking>` blocks and surrounding prose were cut away.
    Prepass,
    /// The JSON itself needed leniency (quotes, commas, comments, literals, a cut…), but every byte had a place.
    Repaired,
    /// Bytes inside the JSON fitted nowhere (a note in the array, text after a cut) and were skipped; every complete
    /// element around them was read.
    Salvaged,
    /// Nothing usable could be read.
    Unparseable,
}

impl ParsePath {
    /// Every path, in declaration order (for reports that list zero counts too).
    pub const ALL: [ParsePath; 6] = [
        ParsePath::Empty,
        ParsePath::Strict,
        ParsePath::Prepass,
        ParsePath::Repaired,
        ParsePath::Salvaged,
        ParsePath::Unparseable,
    ];

    /// The snake_case name used in metrics and reports.
    pub fn as_str(self) -> &'static str {
        match self {
            ParsePath::Empty => "empty",
            ParsePath::Strict => "strict",
            ParsePath::Prepass => "prepass",
            ParsePath::Repaired => "repaired",
            ParsePath::Salvaged => "salvaged",
            ParsePath::Unparseable => "unparseable",
        }
    }
}

/// The elements of a response before per-item validation.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ParsedResponse<'a> {
    /// One value per memory the model wrote (objects, normally), borrowing from the raw text where possible.
    pub elements: Vec<LooseValue<'a>>,
    /// Which path produced them.
    pub path: ParsePath,
    /// The JSON ended before its brackets closed (the text ran out, or prose followed a cut).
    pub cut_off: bool,
    /// The last element did not close with its own bracket or quote, so it may be partial; every element before
    /// it closed. False when the text was cut between elements.
    pub last_element_cut: bool,
}

impl ParsedResponse<'_> {
    /// The same response owning all of its strings.
    pub fn into_owned(self) -> ParsedResponse<'static> {
        ParsedResponse {
            elements: self.elements.into_iter().map(LooseValue::into_owned).collect(),
            path: self.path,
            cut_off: self.cut_off,
            last_element_cut: self.last_element_cut,
        }
    }
}

/// Reads a raw response as a list of elements; never panics, whatever the input.
pub fn parse_response(raw: &str) -> ParsedResponse<'_> {
    let document = read_document::<LooseValue<'_>>(raw);
    ParsedResponse {
        elements: document.elements,
        path: document.path,
        cut_off: document.cut_off,
        last_element_cut: document.last_element_cut,
    }
}

/// [`ParsedResponse`] with the elements built as `T`, so `process` can read items straight into their fields.
pub(crate) struct Document<T> {
    pub elements: Vec<T>,
    pub path: ParsePath,
    pub cut_off: bool,
    pub last_element_cut: bool,
}

impl<T> Document<T> {
    fn without_elements(path: ParsePath) -> Self {
        Self {
            elements: Vec::new(),
            path,
            cut_off: false,
            last_element_cut: false,
        }
    }
}

/// One bracketed value of the text, read.
struct Candidate<T> {
    elements: Vec<T>,
    /// Where the value starts and ends, in bytes of the region it was read from.
    start: usize,
    end: usize,
    lenient: bool,
    skipped: bool,
    cut: bool,
    last_element_cut: bool,
    has_text: bool,
}

/// Finds the JSON of a response and reads it (see the module documentation).
pub(crate) fn read_document<'a, T: FromReader<'a>>(raw: &'a str) -> Document<T> {
    let trimmed = trim(raw);
    if trimmed.is_empty() {
        return Document::without_elements(ParsePath::Empty);
    }
    // A byte order mark is leniency: the text as it stood was not JSON.
    let marked = trimmed.len() != raw.trim().len();
    let mut first: Option<Candidate<T>> = None;
    if trimmed.starts_with(['[', '{']) {
        let candidate = read_candidate::<T>(trimmed, 0);
        let whole = trimmed[candidate.end..].trim().is_empty();
        if candidate.has_text || whole {
            return finish(candidate, whole && !marked);
        }
        first = Some(candidate);
    } else if trimmed.starts_with('"')
        && let Some(document) = read_double_encoded::<T>(trimmed)
    {
        return document;
    }

    let unwrapped = skip_leading_thinking(trimmed);
    let region = fenced_body(unwrapped).unwrap_or(unwrapped);
    // The value at the very start has been read already, and so has everything up to its end.
    let mut search_from = match &first {
        Some(candidate) if std::ptr::eq(region, trimmed) => candidate.end,
        _ => 0,
    };
    for _ in 0..MAX_CANDIDATES {
        let Some(start) = find_bracket(region, search_from) else {
            break;
        };
        let candidate = read_candidate::<T>(region, start);
        if candidate.has_text {
            return finish(candidate, false);
        }
        search_from = candidate.end.max(candidate.start + 1);
        first.get_or_insert(candidate);
    }
    match first {
        // No value holds items: the first one is the answer, so its elements are dropped with their reasons.
        Some(candidate) => finish(candidate, false),
        None if region.trim().is_empty() => Document::without_elements(ParsePath::Empty),
        None => Document::without_elements(ParsePath::Unparseable),
    }
}

/// The position of the first `[` or `{` at or after `from`.
fn find_bracket(text: &str, from: usize) -> Option<usize> {
    let rest = text.as_bytes().get(from..)?;
    rest.iter()
        .position(|&byte| byte == b'[' || byte == b'{')
        .map(|at| from + at)
}

/// The text without surrounding whitespace or byte order marks. `str::trim` first: it is specialized for
/// whitespace, where a closure pattern decodes character by character, and this runs on every response.
fn trim(raw: &str) -> &str {
    let mut trimmed = raw.trim();
    while let Some(rest) = trimmed.strip_prefix('\u{FEFF}') {
        trimmed = rest.trim_start();
    }
    while let Some(rest) = trimmed.strip_suffix('\u{FEFF}') {
        trimmed = rest.trim_end();
    }
    trimmed
}

fn finish<T>(candidate: Candidate<T>, whole_text: bool) -> Document<T> {
    let path = if candidate.skipped {
        ParsePath::Salvaged
    } else if candidate.lenient || candidate.cut {
        ParsePath::Repaired
    } else if whole_text {
        ParsePath::Strict
    } else {
        ParsePath::Prepass
    };
    Document {
        elements: candidate.elements,
        path,
        cut_off: candidate.cut,
        last_element_cut: candidate.last_element_cut,
    }
}

/// Reads the value at `start` (a bracket) and applies the shape rules.
fn read_candidate<'a, T: FromReader<'a>>(region: &'a str, start: usize) -> Candidate<T> {
    let mut reader = Reader::new(region, start);
    let (elements, last_element_cut) = if region.as_bytes()[start] == b'[' {
        let elements = reader.array::<T>();
        (elements, reader.last_array_partial())
    } else {
        let top = reader.object::<TopObject<'a>>();
        match shape(top) {
            Shape::List { elements, partial } => (elements.into_iter().map(T::from_value).collect(), partial),
            Shape::Single(value) => (vec![T::from_value(value)], reader.ended_early()),
        }
    };
    let has_text = elements.iter().any(T::has_text);
    Candidate {
        elements,
        start,
        end: reader.position(),
        lenient: reader.lenient,
        skipped: reader.skipped,
        cut: reader.cut,
        last_element_cut,
        has_text,
    }
}

/// A text that is one JSON string holding the answer (double-encoded output): the answer read from inside it.
fn read_double_encoded<'a, T: FromReader<'a>>(trimmed: &'a str) -> Option<Document<T>> {
    let mut reader = Reader::new(trimmed, 0);
    let LooseValue::String(inner) = reader.value() else {
        return None;
    };
    if reader.lenient || reader.cut || reader.position() != trimmed.len() || !trim(&inner).starts_with(['[', '{']) {
        return None;
    }
    let document = read_document::<LooseValue<'_>>(&inner);
    let path = match document.path {
        ParsePath::Prepass => ParsePath::Strict,
        other => other,
    };
    Some(Document {
        elements: document
            .elements
            .into_iter()
            .map(|element| T::from_value(element.into_owned()))
            .collect(),
        path,
        cut_off: document.cut_off,
        last_element_cut: document.last_element_cut,
    })
}

/// What a top-level object holds.
enum Shape<'a> {
    /// A list of elements; `partial` says its last element may be incomplete.
    List {
        elements: Vec<LooseValue<'a>>,
        partial: bool,
    },
    /// One memory (or one unusable value, which validation drops with its reason).
    Single(LooseValue<'a>),
}

/// Applies the shape rules to a top-level object: with `memories` it holds that list; without `text`, and with one
/// list that holds an object (`{"items": […]}`, or a lone `{"anything": []}`), it holds that list; otherwise it is
/// one memory.
fn shape(top: TopObject<'_>) -> Shape<'_> {
    let TopObject {
        mut fields,
        lists_partial,
    } = top;
    let list_at = fields
        .iter()
        .rposition(|(key, _)| key == "memories")
        .or_else(|| wrapped_list(&fields));
    let Some(position) = list_at else {
        return Shape::Single(LooseValue::Object(fields));
    };
    let partial = lists_partial.get(position).copied().unwrap_or(false);
    match fields.swap_remove(position).1 {
        LooseValue::Array(elements) => Shape::List { elements, partial },
        LooseValue::Null => Shape::List {
            elements: Vec::new(),
            partial: false,
        },
        // Kept as one element so validation records why it was unusable instead of losing it silently.
        other => Shape::List {
            elements: vec![other],
            partial: false,
        },
    }
}

/// The position of the one list field of an object that wraps a list of items.
fn wrapped_list(fields: &[(Cow<'_, str>, LooseValue<'_>)]) -> Option<usize> {
    if fields.iter().any(|(key, _)| key == "text") {
        return None;
    }
    let mut lists = fields
        .iter()
        .enumerate()
        .filter(|(_, (_, value))| matches!(value, LooseValue::Array(_)));
    let (position, (_, LooseValue::Array(elements))) = lists.next()? else {
        return None;
    };
    if lists.next().is_some() {
        return None;
    }
    // One object is enough: a cut list can end in whatever followed the cut.
    let holds_items = elements.iter().any(LooseValue::is_object);
    (holds_items || (elements.is_empty() && fields.len() == 1)).then_some(position)
}

/// The text after any `<thinking>…</thinking>` (or `<think>…</think>`) blocks it starts with; an unclosed block
/// runs to the end.
fn skip_leading_thinking(text: &str) -> &str {
    let mut rest = text;
    loop {
        rest = rest.trim_start();
        if !rest.starts_with("<think") {
            return rest;
        }
        let close_tag = if rest.starts_with("<thinking") {
            "</thinking>"
        } else {
            "</think>"
        };
        match rest.find(close_tag) {
            Some(close) => rest = &rest[close + close_tag.len()..],
            None => return "",
        }
    }
}

/// The body of the first code fence that holds a bracket, up to its closing fence or the end of a cut fence.
fn fenced_body(text: &str) -> Option<&str> {
    let mut search_from = 0;
    while let Some(relative) = text[search_from..].find("```") {
        let fence = search_from + relative;
        let after_ticks = &text[fence + 3..];
        // The rest of the opening line is a language tag (```json), not content.
        let body_start = after_ticks.find('\n').map_or(after_ticks.len(), |newline| newline + 1);
        let body_and_rest = &after_ticks[body_start..];
        let body_len = body_and_rest.find("```").unwrap_or(body_and_rest.len());
        let body = &body_and_rest[..body_len];
        if body.contains(['[', '{']) {
            return Some(body);
        }
        let consumed = fence + 3 + body_start + body_len + 3;
        if consumed >= text.len() {
            return None;
        }
        search_from = consumed;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leading_thinking_blocks_are_skipped_even_when_unclosed() {
        assert_eq!(skip_leading_thinking("<thinking>x [</thinking>[1]"), "[1]");
        assert_eq!(skip_leading_thinking(" <think>a</think>\n<think>b</think> [2]"), "[2]");
        assert_eq!(skip_leading_thinking("<think>cut [1]"), "");
    }

    #[test]
    fn fence_body_runs_to_the_end_when_the_fence_is_cut() {
        assert_eq!(fenced_body("a\n```json\n[1,\n"), Some("[1,\n"));
        assert_eq!(fenced_body("```\n[1]\n```\nmore"), Some("[1]\n"));
        assert_eq!(fenced_body("```python\nprint()\n```\n```json\n[2]\n```"), Some("[2]\n"));
    }

    #[test]
    fn the_reader_sees_through_strings_and_comments() {
        let text = r#"[{"a": "]}", 'b': '[', /* ] */ "c": 1}] trailing: {"#;
        let candidate = read_candidate::<LooseValue<'_>>(text, 0);
        assert_eq!(candidate.end, text.find("] trailing").unwrap() + 1);
        assert!(!candidate.cut);
        assert!(read_candidate::<LooseValue<'_>>(r#"[{"a": "x"#, 0).cut);
    }
}
