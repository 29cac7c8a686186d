//! Reading a model's raw text as JSON elements: strict first, then a wrapper-stripping pre-pass, then repair.
//!
//! The recipe is the one measured in `docs/reference/crates.md` §2 (22/22 samples): strict parse; drop
//! `<thinking>` blocks; take a code fence's body (to the end when the fence is cut); cut prose before the first
//! bracket and after the balanced close; `jsonrepair-rs`; always re-validate with serde_json. Which path was taken
//! is reported so prompt regressions show up as a metric, and whether the JSON was cut off is reported so the
//! caller never stores a half-written last item.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};

use crate::loose::LooseValue;

/// Deepest nesting handed to the repairer. Our contract needs 4 levels (array, item, entities, entity); the cap
/// keeps a pathological `[[[[…` from recursing through the repairer's stack.
const MAX_REPAIR_DEPTH: usize = 32;

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
    /// The JSON itself had to be repaired (quotes, commas, comments, truncation…).
    Repaired,
    /// Nothing usable could be read.
    Unparseable,
}

impl ParsePath {
    /// The snake_case name used in metrics and reports.
    pub fn as_str(self) -> &'static str {
        match self {
            ParsePath::Empty => "empty",
            ParsePath::Strict => "strict",
            ParsePath::Prepass => "prepass",
            ParsePath::Repaired => "repaired",
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
    /// The JSON ended before its brackets closed, so the repairer had to close it: the last element may be partial.
    pub cut_off: bool,
}

impl<'a> ParsedResponse<'a> {
    fn new(elements: Vec<LooseValue<'a>>, path: ParsePath, cut_off: bool) -> Self {
        Self {
            elements,
            path,
            cut_off,
        }
    }

    fn unparseable() -> Self {
        Self::new(Vec::new(), ParsePath::Unparseable, false)
    }

    /// The same response owning all of its strings.
    pub fn into_owned(self) -> ParsedResponse<'static> {
        ParsedResponse {
            elements: self.elements.into_iter().map(LooseValue::into_owned).collect(),
            path: self.path,
            cut_off: self.cut_off,
        }
    }
}

/// Reads a raw response as a list of elements; never panics, whatever the input.
pub fn parse_response(raw: &str) -> ParsedResponse<'_> {
    parse_from(raw, false)
}

/// [`parse_response`] for a caller whose own strict parse of the trimmed text (an array) already failed, so the
/// strict step, and a pre-pass over that same text, are not repeated.
pub(crate) fn parse_response_after_strict(raw: &str) -> ParsedResponse<'_> {
    parse_from(raw, true)
}

/// The text `parse_response` reads strictly: `Some` when it is an array, the shape a typed strict read handles.
pub(crate) fn strict_array_candidate(raw: &str) -> Option<&str> {
    let trimmed = raw.trim();
    (trimmed.starts_with('[') && trimmed.ends_with(']')).then_some(trimmed)
}

/// The text the pre-pass would read, when it is an array, so a caller can read it directly: if that read succeeds
/// the pre-pass would have returned the same elements. `None` whenever the strict step might still succeed (it
/// comes first), the pre-pass would strip `<thinking>` blocks, or the array does not end the text.
/// `strict_failed` says that a strict read of the trimmed text (an array) has already failed.
///
/// Inside valid JSON, quotes other than `"`, `//` and `/*` occur only within strings, where the structure scan
/// skips them too, so the scan would close the value exactly where the JSON ends and cut nothing else.
pub(crate) fn prepass_array_candidate(raw: &str, strict_failed: bool) -> Option<&str> {
    let trimmed = raw.trim();
    if (may_yield_elements(trimmed) && !strict_failed) || trimmed.contains("<think") {
        return None;
    }
    let body = fenced_body(trimmed).unwrap_or(trimmed);
    let start = body.find(['[', '{'])?;
    let candidate = body[start..].trim_end();
    // The strict read has just rejected exactly this text.
    let already_rejected = strict_failed && same_slice(trimmed, candidate);
    (candidate.starts_with('[') && candidate.ends_with(']') && !already_rejected).then_some(candidate)
}

/// Whether strict parsing can yield elements: only an array, an object or a string can, and each must end with its
/// closing character.
fn may_yield_elements(trimmed: &str) -> bool {
    matches!(trimmed.as_bytes().first(), Some(b'[' | b'{' | b'"')) && trimmed.ends_with([']', '}', '"'])
}

fn parse_from(raw: &str, strict_failed: bool) -> ParsedResponse<'_> {
    let trimmed = raw.trim();
    if trimmed.is_empty() {
        return ParsedResponse::new(Vec::new(), ParsePath::Empty, false);
    }
    // The common case costs one parsing pass and nothing else. Only an array, an object or a string can yield
    // elements, and each must end with its closing character, so text that cannot is not parsed twice (a cut-off
    // array would otherwise be read to its end here and again by the pre-pass).
    let may_yield_elements = may_yield_elements(trimmed);
    if may_yield_elements
        && !strict_failed
        && let Ok(value) = LooseValue::parse(trimmed)
        && let Some(elements) = elements_of(value)
    {
        return ParsedResponse::new(elements, ParsePath::Strict, false);
    }
    match strip_thinking_blocks(trimmed) {
        // The strict step has already read exactly this text when it was a candidate.
        Cow::Borrowed(text) => parse_unwrapped(text, may_yield_elements.then_some(trimmed)),
        Cow::Owned(text) => parse_unwrapped(&text, None).into_owned(),
    }
}

/// Whether two slices are the same text at the same address (not merely equal).
fn same_slice(a: &str, b: &str) -> bool {
    std::ptr::eq(a, b)
}

/// Steps 3–5 of the recipe on text whose `<thinking>` blocks are gone; `already_failed` is text that the strict
/// step parsed without getting elements, so a candidate that is that very slice is not parsed again.
fn parse_unwrapped<'a>(without_thinking: &'a str, already_failed: Option<&str>) -> ParsedResponse<'a> {
    let body = fenced_body(without_thinking).unwrap_or(without_thinking);
    let Some(start) = body.find(['[', '{']) else {
        let path = if body.trim().is_empty() {
            ParsePath::Empty
        } else {
            ParsePath::Unparseable
        };
        return ParsedResponse::new(Vec::new(), path, false);
    };
    let from_first_bracket = &body[start..];
    let scan = scan_structure(from_first_bracket);
    let candidate = match scan.balanced_end {
        Some(end) => &from_first_bracket[..end],
        None => from_first_bracket,
    };
    let cut_off = scan.balanced_end.is_none();

    let parsed_before = already_failed.is_some_and(|failed| same_slice(failed, candidate));
    if !parsed_before
        && let Ok(value) = LooseValue::parse(candidate)
        && let Some(elements) = elements_of(value)
    {
        return ParsedResponse::new(elements, ParsePath::Prepass, false);
    }
    if scan.max_depth > MAX_REPAIR_DEPTH {
        return ParsedResponse::unparseable();
    }
    // Trailing commas are the commonest breakage and the general repairer costs ten times a parse: try the
    // one-line fix first, and trust it only if serde_json then accepts the whole text.
    if !cut_off
        && let Some(fixed) = without_trailing_commas(candidate)
        && let Ok(value) = LooseValue::parse(&fixed)
        && let Some(elements) = elements_of(value)
    {
        let elements = elements.into_iter().map(LooseValue::into_owned).collect();
        return ParsedResponse::new(elements, ParsePath::Repaired, false);
    }
    if let Some(elements) = repair(candidate) {
        return ParsedResponse::new(elements, ParsePath::Repaired, cut_off);
    }
    // The scanner's idea of where the value closes can be wrong when quotes are broken; the repairer may still
    // make sense of the whole tail.
    if candidate.len() != from_first_bracket.len()
        && let Some(elements) = repair(from_first_bracket)
    {
        return ParsedResponse::new(elements, ParsePath::Repaired, true);
    }
    ParsedResponse::unparseable()
}

fn repair(candidate: &str) -> Option<Vec<LooseValue<'static>>> {
    // The repairer is third-party code fed arbitrary model output: a bug in it must cost one response, not the
    // worker thread.
    let repaired = std::panic::catch_unwind(|| jsonrepair_rs::jsonrepair(candidate))
        .ok()?
        .ok()?;
    // Its `Ok` is only trusted once serde_json agrees.
    let value = LooseValue::parse(&repaired).ok()?;
    Some(elements_of(value)?.into_iter().map(LooseValue::into_owned).collect())
}

/// The text without commas that directly precede a closing bracket (outside double-quoted strings), or `None`
/// when there were none.
fn without_trailing_commas(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut kept = Vec::with_capacity(bytes.len());
    let mut removed_any = false;
    let mut in_string = false;
    let mut at = 0;
    while at < bytes.len() {
        let byte = bytes[at];
        if in_string {
            kept.push(byte);
            if byte == b'\\' {
                if let Some(&escaped) = bytes.get(at + 1) {
                    kept.push(escaped);
                }
                at += 2;
                continue;
            }
            in_string = byte != b'"';
        } else if byte == b','
            && bytes[at + 1..]
                .iter()
                .find(|next| !next.is_ascii_whitespace())
                .is_some_and(|next| matches!(next, b']' | b'}'))
        {
            removed_any = true;
        } else {
            in_string = byte == b'"';
            kept.push(byte);
        }
        at += 1;
    }
    // Only ASCII commas were removed, so the bytes are still UTF-8; the check is cheap insurance.
    removed_any.then(|| String::from_utf8(kept).ok()).flatten()
}

/// Applies the shape rules: an array is the list; an object with `memories` holds the list; any other object is
/// one memory; a string holding JSON (double-encoded output) is read once more; other scalars are unusable.
fn elements_of(value: LooseValue<'_>) -> Option<Vec<LooseValue<'_>>> {
    match value {
        LooseValue::Array(elements) => Some(elements),
        LooseValue::Object(mut fields) => match fields.iter().rposition(|(key, _)| key == "memories") {
            Some(position) => match fields.swap_remove(position).1 {
                LooseValue::Array(elements) => Some(elements),
                LooseValue::Null => Some(Vec::new()),
                // Kept as one element so validation records why it was unusable instead of losing it silently.
                other => Some(vec![other]),
            },
            None => Some(vec![LooseValue::Object(fields)]),
        },
        LooseValue::String(text) => {
            let inner = LooseValue::parse(text.trim()).ok()?;
            if !matches!(inner, LooseValue::Array(_) | LooseValue::Object(_)) {
                return None;
            }
            Some(elements_of(inner)?.into_iter().map(LooseValue::into_owned).collect())
        }
        _ => None,
    }
}

/// Removes `<thinking>…</thinking>` (and `<think>…</think>`) blocks; an unclosed block runs to the end.
fn strip_thinking_blocks(text: &str) -> Cow<'_, str> {
    if !text.contains("<think") {
        return Cow::Borrowed(text);
    }
    let mut rest = text;
    let mut kept = String::with_capacity(text.len());
    while let Some(open) = rest.find("<think") {
        kept.push_str(&rest[..open]);
        let after_open = &rest[open..];
        let close_tag = if after_open.starts_with("<thinking") {
            "</thinking>"
        } else {
            "</think>"
        };
        match after_open.find(close_tag) {
            Some(close) => rest = &after_open[close + close_tag.len()..],
            None => {
                rest = "";
                break;
            }
        }
    }
    kept.push_str(rest);
    Cow::Owned(kept)
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

struct Scan {
    /// Byte offset just past the bracket that closes the first value, when it closes.
    balanced_end: Option<usize>,
    max_depth: usize,
}

/// Follows brackets outside strings and comments to find where the first value closes.
///
/// Knowing the balanced end lets trailing prose be cut even when it holds punctuation, and knowing that it never
/// closes tells us the output was truncated (the repairer will close it, but the last element may be partial).
/// Single and smart quotes only open a string where a value or key can start, so apostrophes in prose are
/// not mistaken for strings.
fn scan_structure(text: &str) -> Scan {
    let bytes = text.as_bytes();
    let mut depth = 0usize;
    let mut max_depth = 0usize;
    let mut previous_significant = b'[';
    let mut at = 0usize;
    while at < bytes.len() {
        let byte = bytes[at];
        let in_value_position = matches!(previous_significant, b'[' | b'{' | b':' | b',');
        match byte {
            b'"' => {
                at = skip_string(bytes, at + 1, b"\"");
                previous_significant = b'"';
                continue;
            }
            b'\'' if in_value_position => {
                at = skip_string(bytes, at + 1, b"'");
                previous_significant = b'"';
                continue;
            }
            0xE2 if in_value_position && bytes[at..].starts_with("“".as_bytes()) => {
                at = skip_string(bytes, at + "“".len(), "”".as_bytes());
                previous_significant = b'"';
                continue;
            }
            b'/' if bytes.get(at + 1) == Some(&b'/') => {
                at = bytes[at..]
                    .iter()
                    .position(|&b| b == b'\n')
                    .map_or(bytes.len(), |newline| at + newline);
                continue;
            }
            b'/' if bytes.get(at + 1) == Some(&b'*') => {
                at = find_bytes(&bytes[at + 2..], b"*/").map_or(bytes.len(), |close| at + 2 + close + 2);
                continue;
            }
            b'[' | b'{' => {
                depth += 1;
                max_depth = max_depth.max(depth);
            }
            b']' | b'}' => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return Scan {
                        balanced_end: Some(at + 1),
                        max_depth,
                    };
                }
            }
            _ => {}
        }
        if !byte.is_ascii_whitespace() {
            previous_significant = byte;
        }
        at += 1;
    }
    Scan {
        balanced_end: None,
        max_depth,
    }
}

/// Index just past the closing quote, or the end of the text for an unterminated string.
fn skip_string(bytes: &[u8], mut at: usize, closing: &[u8]) -> usize {
    while at < bytes.len() {
        if bytes[at] == b'\\' {
            at += 2;
            continue;
        }
        // A straight double quote also ends a smart-quoted string: models mix them.
        if bytes[at..].starts_with(closing) {
            return at + closing.len();
        }
        if closing != b"\"" && closing != b"'" && bytes[at] == b'"' {
            return at + 1;
        }
        at += 1;
    }
    bytes.len()
}

fn find_bytes(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|window| window == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thinking_blocks_are_removed_even_when_unclosed() {
        assert_eq!(strip_thinking_blocks("<thinking>x [</thinking>[1]"), "[1]");
        assert_eq!(strip_thinking_blocks("[1]<think>cut"), "[1]");
    }

    #[test]
    fn fence_body_runs_to_the_end_when_the_fence_is_cut() {
        assert_eq!(fenced_body("a\n```json\n[1,\n"), Some("[1,\n"));
        assert_eq!(fenced_body("```\n[1]\n```\nmore"), Some("[1]\n"));
        assert_eq!(fenced_body("```python\nprint()\n```\n```json\n[2]\n```"), Some("[2]\n"));
    }

    #[test]
    fn the_scanner_sees_through_strings_and_comments() {
        let text = r#"[{"a": "]}", 'b': '[', /* ] */ "c": 1}] trailing: {"#;
        let scan = scan_structure(text);
        assert_eq!(scan.balanced_end, Some(text.find("] trailing").unwrap() + 1));
        assert!(scan_structure(r#"[{"a": "x"#).balanced_end.is_none());
    }
}
