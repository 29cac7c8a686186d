//! The tolerant JSON reader: one pass over a model's text that reads strict JSON and the damage models produce, and
//! says which elements closed.
//!
//! Accepted beyond the grammar: single and smart quotes (an apostrophe inside a single-quoted text stays in it),
//! unescaped inner quotes, raw control characters in strings, Python literals (`None`, `True`, `False`), bare keys
//! and bare words as values, `//` and `/* */` comments, byte order marks and no-break spaces between tokens, leading,
//! trailing, doubled and missing commas, missing colons, numbers in forms JSON forbids (`+1`, `.5`, `01`), a closer
//! that belongs to an outer container, and a text that ends anywhere. Bytes that fit nowhere (a model's note inside
//! the array) are skipped and the reading resumes at the next bracket or comma.
//!
//! Written by hand rather than layered on a repair library for two reasons. A response cut in the middle and
//! followed by a note ("(output truncated)") is only recoverable by a reader that knows which elements closed before
//! the damage, and a general repairer rewrites the whole document or gives up on it. And one pass that builds only
//! what validation reads is faster than a strict parse followed, for one response in ten, by a repair and a second
//! parse.
//!
//! Whether the reading was strict is recorded ([`Reader::lenient`], [`Reader::skipped`], [`Reader::cut`]), so the
//! caller can report how the response was read.
//!
//! The reader is split by what it reads: this file holds its state and the containers (arrays, objects, keys and
//! the punctuation between them); `scan` moves over what is no value (whitespace, comments, stray bytes, nesting too
//! deep to keep); `strings` reads quoted text and its escapes; `scalars` numbers, literals and bare words; `targets`
//! is what the elements are built as (generic values, or an item's named fields straight away).

use std::borrow::Cow;

use self::scalars::literal;
use crate::loose::LooseValue;

mod scalars;
mod scan;
mod strings;
mod targets;

pub(crate) use targets::{Fields, FromReader, TopObject};

/// Deepest nesting read as values. The output contract needs 4 levels (array, item, entities, entity); deeper
/// containers are skipped, so a pathological `[[[[…` costs one linear scan and no stack.
const MAX_DEPTH: usize = 32;

/// Bytes of JSON per element assumed when sizing the top-level array's vector.
const ITEM_BYTES_AT_LEAST: usize = 128;
/// The most elements a top-level array's vector is sized for up front.
const MAX_PRESIZED_ELEMENTS: usize = 64;
/// Room made for a nested list (entities, evidence, hints), which rarely holds more than a few.
const NESTED_ELEMENTS: usize = 4;

/// What a container's loop does after [`Reader::punctuation`].
enum Step {
    /// The container ended.
    End,
    /// Read on.
    Next,
    /// A byte that is not shared punctuation, for the container to handle.
    Other(u8),
}

/// A position in a text and what reading it has needed so far.
pub(crate) struct Reader<'a> {
    text: &'a str,
    bytes: &'a [u8],
    at: usize,
    /// Syntax outside strict JSON was accepted somewhere.
    pub lenient: bool,
    /// Bytes that belong to no value were skipped.
    pub skipped: bool,
    /// The text ended inside a value.
    pub cut: bool,
    /// Whether the value read last ended before its own closing quote or bracket (the text ended, or a closer of an
    /// outer container ended it), so that it may be incomplete.
    ended_early: bool,
    /// Whether the array that finished last ended with its last element incomplete. Arrays finish inside out, so
    /// after a whole value this describes its outermost array that finished last.
    last_array_partial: bool,
    /// How many containers are open.
    depth: usize,
    /// Bit `d` set when the container open at depth `d` is an object, clear for an array: tells whether a stray
    /// closer ends an outer one. Depth stays below [`MAX_DEPTH`], so 64 bits hold every open container.
    open_objects: u64,
}

impl<'a> Reader<'a> {
    /// A reader at byte `at` of `text`, which must be a character boundary.
    pub(crate) fn new(text: &'a str, at: usize) -> Self {
        Self {
            text,
            bytes: text.as_bytes(),
            at,
            lenient: false,
            skipped: false,
            cut: false,
            ended_early: false,
            last_array_partial: false,
            depth: 0,
            open_objects: 0,
        }
    }

    /// The byte offset reached.
    pub(crate) fn position(&self) -> usize {
        self.at
    }

    /// Whether the value read last may be incomplete: the text ended inside it, or a closer of an outer container
    /// ended it.
    pub(crate) fn ended_early(&self) -> bool {
        self.ended_early
    }

    /// Whether the array read last ended with an incomplete element.
    pub(crate) fn last_array_partial(&self) -> bool {
        self.last_array_partial
    }

    #[inline]
    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.at).copied()
    }

    #[inline]
    fn starts_with(&self, at: usize, pattern: &[u8]) -> bool {
        self.bytes.get(at..).is_some_and(|rest| rest.starts_with(pattern))
    }

    /// Reads any value at the current position (which holds a value's first byte; see [`starts_value`]).
    pub(crate) fn value(&mut self) -> LooseValue<'a> {
        let Some(byte) = self.peek() else {
            self.cut = true;
            self.ended_early = true;
            return LooseValue::Null;
        };
        match byte {
            b'{' | b'[' if self.depth >= MAX_DEPTH => {
                self.skip_nested();
                LooseValue::Null
            }
            b'{' => LooseValue::Object(self.object()),
            b'[' => LooseValue::Array(self.array()),
            b'-' | b'+' | b'.' | b'0'..=b'9' => self.number(),
            _ => {
                if let Some((quote, open_len)) = self.quote_at(self.at) {
                    return LooseValue::String(self.string(quote, open_len));
                }
                self.word_value()
            }
        }
    }

    /// Reads an array at `[`, its elements built as `T`.
    pub(crate) fn array<T: FromReader<'a>>(&mut self) -> Vec<T> {
        self.at += 1;
        self.open(false);
        // An item takes well over a hundred bytes of JSON, so this is rarely exceeded, and growing a vector of
        // items (hundreds of bytes each) move by move cost more than the spare room.
        let capacity = ((self.bytes.len() - self.at) / ITEM_BYTES_AT_LEAST + 1).min(MAX_PRESIZED_ELEMENTS);
        let mut elements: Vec<T> = if self.depth == 1 {
            Vec::with_capacity(capacity)
        } else if self.bytes.get(self.at) == Some(&b']') {
            // `[]`, the commonest nested list: nothing to allocate.
            Vec::new()
        } else {
            Vec::with_capacity(NESTED_ELEMENTS)
        };
        let mut after_comma = true;
        let mut partial = false;
        loop {
            let byte = match self.punctuation(b']', &mut after_comma, !elements.is_empty()) {
                Step::End => break,
                Step::Next => continue,
                Step::Other(byte) => byte,
            };
            match byte {
                b'[' if self.bracketed_note_end().is_some() => {
                    // `[truncated]`, `[see below]`: a note in brackets, not an element.
                    self.skipped = true;
                    self.at = self.bracketed_note_end().unwrap_or(self.bytes.len());
                }
                _ if self.starts_element() => {
                    if !after_comma {
                        self.lenient = true;
                    }
                    elements.push(T::read(self));
                    after_comma = false;
                    // Ended by the end of the text, or by a closer that was not its own: it may be incomplete. A stray
                    // `]` that ended an element object is this array's, and closes it on the next turn.
                    partial = self.ended_early;
                    if self.cut {
                        break;
                    }
                }
                _ => self.skip_garbage(b",]}{["),
            }
        }
        self.close();
        self.last_array_partial = partial;
        elements
    }

    /// Reads an object at `{` into `F`.
    pub(crate) fn object<F: Fields<'a>>(&mut self) -> F {
        self.at += 1;
        self.open(true);
        let mut fields = F::default();
        let mut after_comma = true;
        let mut n_fields = 0usize;
        loop {
            let byte = match self.punctuation(b'}', &mut after_comma, n_fields > 0) {
                Step::End => break,
                Step::Next => continue,
                Step::Other(byte) => byte,
            };
            match byte {
                b'{' | b'[' => {
                    // A value where a key belongs: read it so its brackets stay balanced, and keep nothing.
                    self.skipped = true;
                    let _ = self.value();
                    if self.cut {
                        self.ended_early = true;
                        break;
                    }
                }
                _ if self.starts_key(byte) => {
                    if !after_comma {
                        self.lenient = true;
                    }
                    after_comma = false;
                    n_fields += 1;
                    let key = self.key();
                    let value = self.field_value();
                    // The text ended inside this value; in a list, inside its last element only.
                    let partial = if matches!(value, LooseValue::Array(_)) {
                        self.last_array_partial
                    } else {
                        self.ended_early
                    };
                    fields.insert(key, value, partial);
                    if self.cut {
                        self.ended_early = true;
                        break;
                    }
                }
                _ => self.skip_garbage(b",}]{[\"'"),
            }
        }
        self.close();
        fields
    }

    /// Reads the value after a key (the colon included); a missing value is null.
    fn field_value(&mut self) -> LooseValue<'a> {
        self.skip_insignificant();
        match self.peek() {
            Some(b':') => self.at += 1,
            Some(b'=') => {
                self.lenient = true;
                self.at += 1;
            }
            None => {
                self.cut = true;
                return LooseValue::Null;
            }
            Some(_) => self.lenient = true,
        }
        self.skip_insignificant();
        match self.peek() {
            None => {
                self.cut = true;
                LooseValue::Null
            }
            Some(b',' | b'}' | b']') => {
                self.lenient = true;
                LooseValue::Null
            }
            Some(byte) if starts_value(byte) => self.value(),
            Some(_) => {
                self.skip_garbage(b",}]{[");
                LooseValue::Null
            }
        }
    }

    #[inline]
    fn starts_key(&self, byte: u8) -> bool {
        byte.is_ascii_alphanumeric() || matches!(byte, b'_' | b'$' | b'"' | b'\'') || byte >= 0x80
    }

    /// Reads a key: quoted in any style, or bare up to the colon.
    fn key(&mut self) -> Cow<'a, str> {
        if let Some((quote, open_len)) = self.quote_at(self.at) {
            return self.string(quote, open_len);
        }
        self.lenient = true;
        let start = self.at;
        while let Some(&byte) = self.bytes.get(self.at) {
            if matches!(byte, b':' | b',' | b'}' | b']' | b'{' | b'[' | b'"' | b'\'') || byte.is_ascii_whitespace() {
                break;
            }
            self.at += 1;
        }
        if self.at == self.bytes.len() {
            self.cut = true;
        }
        Cow::Borrowed(&self.text[start..self.at])
    }

    /// Whether the byte at the position can start an array element: a container, a string, a number, or a literal.
    /// Bare words are not elements but text that strayed into the array.
    fn starts_element(&self) -> bool {
        let Some(byte) = self.peek() else {
            return false;
        };
        match byte {
            b'{' | b'[' | b'"' | b'\'' | b'0'..=b'9' => true,
            // A dash or dot that starts no number is a list bullet or an ellipsis in a note.
            b'-' | b'+' | b'.' => self
                .bytes
                .get(self.at + 1)
                .is_some_and(|next| next.is_ascii_digit() || (*next == b'.' && byte != b'.')),
            0xE2 => self.quote_at(self.at).is_some(),
            b'a'..=b'z' | b'A'..=b'Z' => literal(self.word_at(self.at)).is_some(),
            _ => false,
        }
    }

    /// The position after a note in brackets at the position (`[output truncated]`, `[…]`): words and sentence
    /// punctuation only, at least one letter or dot, on one line. A list of values always holds a quote, digit,
    /// bracket, brace or literal, so none is taken for a note, bar a list of bare words, which is no value anyway.
    fn bracketed_note_end(&self) -> Option<usize> {
        const LONGEST_NOTE: usize = 120;
        let rest = self.bytes.get(self.at + 1..)?;
        let close = rest.iter().take(LONGEST_NOTE).position(|&byte| {
            !(byte.is_ascii_alphabetic()
                || byte >= 0x80
                || matches!(byte, b' ' | b'.' | b'-' | b'!' | b'?' | b':' | b';' | b'(' | b')'))
        })?;
        let note = &rest[..close];
        let is_note = rest[close] == b']'
            && note
                .iter()
                .any(|&byte| byte.is_ascii_alphabetic() || byte == b'.' || byte >= 0x80)
            && literal(std::str::from_utf8(note).unwrap_or("").trim()).is_none();
        is_note.then_some(self.at + 1 + close + 1)
    }

    fn open(&mut self, object: bool) {
        self.open_objects |= u64::from(object) << self.depth;
        self.depth += 1;
    }

    fn close(&mut self) {
        self.depth -= 1;
        self.open_objects &= !(1u64 << self.depth);
    }

    /// Moves to the next token of a container and handles the punctuation arrays and objects share: the end of the
    /// text ends the container (cut); its own `closer` ends it (a comma just before it was a trailing one); a comma
    /// separates (a second one in a row is lenient); the other kind of closer ends it too when it belongs to an
    /// enclosing container (`{"memories": [ … }`), and is skipped otherwise. Any other byte is the caller's.
    #[inline(always)]
    fn punctuation(&mut self, closer: u8, after_comma: &mut bool, has_members: bool) -> Step {
        self.skip_insignificant();
        let Some(byte) = self.peek() else {
            self.cut = true;
            self.ended_early = true;
            return Step::End;
        };
        let (other_closer, other_opener) = if closer == b']' { (b'}', b'{') } else { (b']', b'[') };
        if byte == closer {
            if *after_comma && has_members {
                self.lenient = true;
            }
            self.at += 1;
            self.ended_early = false;
            return Step::End;
        }
        if byte == b',' {
            if *after_comma {
                self.lenient = true;
            }
            *after_comma = true;
            self.at += 1;
            return Step::Next;
        }
        if byte == other_closer {
            if self.closes_outer(other_opener) {
                self.lenient = true;
                self.ended_early = true;
                return Step::End;
            }
            self.skipped = true;
            self.at += 1;
            return Step::Next;
        }
        Step::Other(byte)
    }

    /// Whether a closer of kind `opener` belongs to a container enclosing the innermost one.
    fn closes_outer(&self, opener: u8) -> bool {
        let enclosing = (1u64 << self.depth.saturating_sub(1)) - 1;
        let objects = self.open_objects & enclosing;
        if opener == b'{' {
            objects != 0
        } else {
            objects != enclosing
        }
    }
}

/// Whether a byte can start a value after a key: anything but separators and closers, so that bare words are read.
fn starts_value(byte: u8) -> bool {
    !matches!(
        byte,
        b',' | b'}' | b']' | b':' | b')' | b'(' | b'*' | b'#' | b';' | b'='
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::item::Element;

    #[test]
    fn slots_hold_what_get_returns() {
        let text = r#"[{"text": "a", "text": "b", "extra": {"x": [1]}, "confidence": 0.5}, 3, "s", null]"#;
        let elements = Reader::new(text, 0).array::<Element<'_>>();
        let values = Reader::new(text, 0).array::<LooseValue<'_>>();
        assert_eq!(elements.len(), values.len());
        for (element, value) in elements.iter().zip(values.clone()) {
            assert_eq!(element.text(), value.get("text").and_then(LooseValue::as_str));
            match (element, Element::from_loose(value.clone())) {
                (Element::Item(item), Element::Item(converted)) => {
                    assert_eq!(item.text, converted.text);
                    assert_eq!(item.confidence, converted.confidence);
                    assert_eq!(item.confidence.as_ref(), value.get("confidence"));
                }
                (Element::Other(other), Element::Other(converted)) => assert_eq!(*other, converted),
                _ => panic!("the two readings disagree on {value:?}"),
            }
        }
    }
}
