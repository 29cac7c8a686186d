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

use std::borrow::Cow;

use crate::item::{Element, RawItem};
use crate::loose::{LooseNumber, LooseValue};

/// Deepest nesting read as values. The output contract needs 4 levels (array, item, entities, entity); deeper
/// containers are skipped, so a pathological `[[[[…` costs one linear scan and no stack.
const MAX_DEPTH: usize = 32;

/// Bytes of JSON per element assumed when sizing the top-level array's vector.
const ITEM_BYTES_AT_LEAST: usize = 128;
/// The most elements a top-level array's vector is sized for up front.
const MAX_PRESIZED_ELEMENTS: usize = 64;
/// Room made for a nested list (entities, evidence, hints), which rarely holds more than a few.
const NESTED_ELEMENTS: usize = 4;

/// Bytes that end the fast scan of a double-quoted string: the quote, a backslash, and control characters.
const STRING_STOP: [bool; 256] = string_stops();

const fn string_stops() -> [bool; 256] {
    let mut table = [false; 256];
    let mut byte = 0usize;
    while byte < 0x20 {
        table[byte] = true;
        byte += 1;
    }
    table[b'"' as usize] = true;
    table[b'\\' as usize] = true;
    table
}

/// Exact powers of ten for the fast decimal path (10²² is the largest that a double holds exactly).
const POWERS_OF_TEN: [f64; 23] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20,
    1e21, 1e22,
];

const LEFT_DOUBLE: &[u8] = "\u{201C}".as_bytes();
const RIGHT_DOUBLE: &[u8] = "\u{201D}".as_bytes();
const LEFT_SINGLE: &[u8] = "\u{2018}".as_bytes();
const RIGHT_SINGLE: &[u8] = "\u{2019}".as_bytes();
const BYTE_ORDER_MARK: &[u8] = "\u{FEFF}".as_bytes();
const NO_BREAK_SPACE: &[u8] = "\u{A0}".as_bytes();

/// The quote a string was opened with, which decides what closes it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Quote {
    Double,
    Single,
    /// “…”, also closed by a straight double quote: models mix them.
    SmartDouble,
    /// ‘…’.
    SmartSingle,
}

/// Something a reader can build an array's elements as: a generic value, or an item's named fields.
pub(crate) trait FromReader<'a>: Sized {
    /// Reads one element at the reader's position (a value start).
    fn read(reader: &mut Reader<'a>) -> Self;
    /// The element for a value already read (elements of a wrapper object).
    fn from_value(value: LooseValue<'a>) -> Self;
    /// Whether it is an object with a `text` key: what tells a response's array from a bracket in its prose.
    fn has_text(&self) -> bool;
}

impl<'a> FromReader<'a> for LooseValue<'a> {
    fn read(reader: &mut Reader<'a>) -> Self {
        reader.value()
    }

    fn from_value(value: LooseValue<'a>) -> Self {
        value
    }

    fn has_text(&self) -> bool {
        self.get("text").is_some()
    }
}

impl<'a> FromReader<'a> for Element<'a> {
    fn read(reader: &mut Reader<'a>) -> Self {
        if reader.peek() == Some(b'{') && reader.depth < MAX_DEPTH {
            Element::Item(reader.object::<RawItem<'a>>())
        } else {
            Element::Other(reader.value())
        }
    }

    fn from_value(value: LooseValue<'a>) -> Self {
        Element::from_loose(value)
    }

    fn has_text(&self) -> bool {
        matches!(self, Element::Item(item) if item.text.is_some())
    }
}

/// Somewhere an object's fields go: all of them in order, or only the contract's named slots.
pub(crate) trait Fields<'a>: Default {
    /// Adds a field; `list_partial` says that the value is a list whose last element may be incomplete.
    fn insert(&mut self, key: Cow<'a, str>, value: LooseValue<'a>, list_partial: bool);
}

impl<'a> Fields<'a> for Vec<(Cow<'a, str>, LooseValue<'a>)> {
    fn insert(&mut self, key: Cow<'a, str>, value: LooseValue<'a>, _list_partial: bool) {
        self.push((key, value));
    }
}

/// The fields of a top-level object, with which lists ended in an incomplete element: the one that holds the
/// response's items (`{"memories": […]}`) may be followed by anything after a cut.
#[derive(Default)]
pub(crate) struct TopObject<'a> {
    pub fields: Vec<(Cow<'a, str>, LooseValue<'a>)>,
    /// Parallel to `fields`.
    pub lists_partial: Vec<bool>,
}

impl<'a> Fields<'a> for TopObject<'a> {
    fn insert(&mut self, key: Cow<'a, str>, value: LooseValue<'a>, list_partial: bool) {
        self.fields.push((key, value));
        self.lists_partial.push(list_partial);
    }
}

impl<'a> Fields<'a> for RawItem<'a> {
    fn insert(&mut self, key: Cow<'a, str>, value: LooseValue<'a>, _list_partial: bool) {
        if let Some(slot) = self.slot(&key) {
            *slot = Some(value);
        }
    }
}

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

    /// Skips whitespace, and leniently comments, byte order marks and no-break spaces.
    #[inline(always)]
    pub(crate) fn skip_insignificant(&mut self) {
        // Between tokens of compact JSON there is nothing or one space: settle those without the loop.
        match self.bytes.get(self.at) {
            Some(b' ')
                if self
                    .bytes
                    .get(self.at + 1)
                    .is_some_and(|next| is_plain_token_byte(*next)) =>
            {
                self.at += 1;
                return;
            }
            Some(&byte) if is_plain_token_byte(byte) => return,
            _ => {}
        }
        self.skip_insignificant_slowly();
    }

    #[inline(never)]
    fn skip_insignificant_slowly(&mut self) {
        while let Some(&byte) = self.bytes.get(self.at) {
            match byte {
                b' ' | b'\n' | b'\r' | b'\t' => self.at += 1,
                b'/' if self.bytes.get(self.at + 1) == Some(&b'/') => {
                    self.lenient = true;
                    self.at = memchr_from(self.bytes, self.at, b'\n').unwrap_or(self.bytes.len());
                }
                b'/' if self.bytes.get(self.at + 1) == Some(&b'*') => {
                    self.lenient = true;
                    match find_from(self.bytes, self.at + 2, b"*/") {
                        Some(close) => self.at = close + 2,
                        None => {
                            self.at = self.bytes.len();
                            self.cut = true;
                        }
                    }
                }
                0xEF if self.starts_with(self.at, BYTE_ORDER_MARK) => {
                    self.lenient = true;
                    self.at += BYTE_ORDER_MARK.len();
                }
                0xC2 if self.starts_with(self.at, NO_BREAK_SPACE) => {
                    self.lenient = true;
                    self.at += NO_BREAK_SPACE.len();
                }
                _ => break,
            }
        }
    }

    /// The quote opening a string at `at`, with its length in bytes.
    #[inline]
    fn quote_at(&self, at: usize) -> Option<(Quote, usize)> {
        match self.bytes.get(at)? {
            b'"' => Some((Quote::Double, 1)),
            b'\'' => Some((Quote::Single, 1)),
            0xE2 if self.starts_with(at, LEFT_DOUBLE) => Some((Quote::SmartDouble, LEFT_DOUBLE.len())),
            0xE2 if self.starts_with(at, LEFT_SINGLE) => Some((Quote::SmartSingle, LEFT_SINGLE.len())),
            _ => None,
        }
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
                    let list_partial = matches!(value, LooseValue::Array(_)) && self.last_array_partial;
                    fields.insert(key, value, list_partial);
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

    /// Skips bytes that fit nowhere, at least one character, up to the next byte of `stops`.
    fn skip_garbage(&mut self, stops: &[u8]) {
        self.skipped = true;
        self.at += utf8_len(self.bytes[self.at]);
        while let Some(&byte) = self.bytes.get(self.at) {
            if stops.contains(&byte) {
                return;
            }
            self.at += 1;
        }
    }

    /// Skips a container nested beyond [`MAX_DEPTH`] without recursing, minding double-quoted strings.
    fn skip_nested(&mut self) {
        self.skipped = true;
        let mut depth = 0usize;
        while let Some(&byte) = self.bytes.get(self.at) {
            self.at += 1;
            match byte {
                b'{' | b'[' => depth += 1,
                b'}' | b']' => {
                    depth -= 1;
                    if depth == 0 {
                        self.ended_early = false;
                        return;
                    }
                }
                b'"' => {
                    while let Some(&inner) = self.bytes.get(self.at) {
                        self.at += if inner == b'\\' { 2 } else { 1 };
                        if inner == b'"' {
                            break;
                        }
                    }
                    self.at = self.at.min(self.bytes.len());
                }
                _ => {}
            }
        }
        self.cut = true;
        self.ended_early = true;
    }

    /// Reads a string whose opening quote (`open_len` bytes) is at the position. Strings without escapes borrow
    /// from the text.
    #[inline]
    fn string(&mut self, quote: Quote, open_len: usize) -> Cow<'a, str> {
        // Nearly every string of a response is double-quoted, plain, and followed by its separator.
        if quote == Quote::Double {
            let start = self.at + 1;
            let stop = next_string_stop(self.bytes, start);
            if self.bytes.get(stop) == Some(&b'"') && self.closes_string(stop + 1) {
                self.at = stop + 1;
                self.ended_early = false;
                return Cow::Borrowed(&self.text[start..stop]);
            }
        }
        self.string_slowly(quote, open_len)
    }

    /// [`Reader::string`] for everything but a plain double-quoted string.
    #[inline(never)]
    fn string_slowly(&mut self, quote: Quote, open_len: usize) -> Cow<'a, str> {
        if quote != Quote::Double {
            self.lenient = true;
        }
        let start = self.at + open_len;
        let mut at = start;
        let mut segment_start = start;
        let mut owned: Option<String> = None;
        loop {
            // The fast scan: in a double-quoted string only three kinds of byte matter.
            if quote == Quote::Double {
                at = next_string_stop(self.bytes, at);
            }
            let Some(&byte) = self.bytes.get(at) else {
                self.cut = true;
                self.ended_early = true;
                self.at = at;
                return finish_string(self.text, owned, segment_start, at);
            };
            if let Some(close_len) = self.closing_quote(quote, at) {
                if self.closes_string(at + close_len) {
                    let text = finish_string(self.text, owned, segment_start, at);
                    self.at = at + close_len;
                    self.ended_early = false;
                    return text;
                }
                // A quote inside the text ("He said "hi"", "Caroline's"): it stays.
                self.lenient = true;
                at += close_len;
                continue;
            }
            match byte {
                b'\\' => {
                    let buffer = owned.get_or_insert_with(|| String::with_capacity(at - start + 16));
                    buffer.push_str(&self.text[segment_start..at]);
                    at = self.escape(at, buffer);
                    segment_start = at;
                }
                byte if byte < 0x20 => {
                    // Raw newlines and tabs: validation collapses or strips them.
                    self.lenient = true;
                    at += 1;
                }
                _ => at += 1,
            }
        }
    }

    /// The length of a closing quote for `quote` at `at`, if there is one.
    fn closing_quote(&self, quote: Quote, at: usize) -> Option<usize> {
        let byte = self.bytes[at];
        match quote {
            Quote::Double => (byte == b'"').then_some(1),
            Quote::Single => (byte == b'\'').then_some(1),
            Quote::SmartDouble if byte == b'"' => Some(1),
            Quote::SmartDouble => self.starts_with(at, RIGHT_DOUBLE).then_some(RIGHT_DOUBLE.len()),
            Quote::SmartSingle if byte == b'\'' => Some(1),
            Quote::SmartSingle => self.starts_with(at, RIGHT_SINGLE).then_some(RIGHT_SINGLE.len()),
        }
    }

    /// Whether a quote that ends just before `after` closes its string: in JSON a closing quote is followed by a
    /// comma, colon, closer, comment or the end; a quote followed by anything else is part of the text. A quote
    /// after whitespace also counts, so a missing comma between two strings is read as one.
    #[inline]
    fn closes_string(&self, after: usize) -> bool {
        if let None | Some(b',' | b':' | b'}' | b']') = self.bytes.get(after) {
            return true;
        }
        let mut at = after;
        while at < self.bytes.len() && self.bytes[at].is_ascii_whitespace() {
            at += 1;
        }
        let spaced = at > after;
        match self.bytes.get(at) {
            None | Some(b',' | b':' | b'}' | b']' | b'/') => true,
            Some(b'"' | b'\'') => spaced,
            Some(0xE2) => spaced && self.quote_at(at).is_some(),
            Some(_) => false,
        }
    }

    /// Decodes the escape whose backslash is at `at` into `buffer`; returns the position after it.
    fn escape(&mut self, at: usize, buffer: &mut String) -> usize {
        let Some(&kind) = self.bytes.get(at + 1) else {
            // The text ends after the backslash.
            self.cut = true;
            return at + 1;
        };
        let simple = match kind {
            b'"' => Some('"'),
            b'\\' => Some('\\'),
            b'/' => Some('/'),
            b'b' => Some('\u{8}'),
            b'f' => Some('\u{c}'),
            b'n' => Some('\n'),
            b'r' => Some('\r'),
            b't' => Some('\t'),
            b'\'' => {
                self.lenient = true;
                Some('\'')
            }
            _ => None,
        };
        if let Some(decoded) = simple {
            buffer.push(decoded);
            return at + 2;
        }
        if kind == b'u'
            && let Some(unit) = self.hex4(at + 2)
        {
            if (0xD800..0xDC00).contains(&unit)
                && self.bytes.get(at + 6) == Some(&b'\\')
                && self.bytes.get(at + 7) == Some(&b'u')
                && let Some(low) = self.hex4(at + 8)
                && (0xDC00..0xE000).contains(&low)
            {
                let code = 0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00);
                buffer.push(char::from_u32(code).unwrap_or(char::REPLACEMENT_CHARACTER));
                return at + 12;
            }
            match char::from_u32(unit) {
                Some(decoded) => buffer.push(decoded),
                None => {
                    // A lone surrogate.
                    self.lenient = true;
                    buffer.push(char::REPLACEMENT_CHARACTER);
                }
            }
            return at + 6;
        }
        // Not an escape JSON knows (a Windows path, a cut `\u`): the backslash is text, and what follows is read
        // as text again.
        self.lenient = true;
        buffer.push('\\');
        at + 1
    }

    fn hex4(&self, at: usize) -> Option<u32> {
        let digits = self.bytes.get(at..at + 4)?;
        let mut value = 0u32;
        for &digit in digits {
            value = value * 16 + char::from(digit).to_digit(16)?;
        }
        Some(value)
    }

    /// Reads a number; a token that is no number is null.
    fn number(&mut self) -> LooseValue<'a> {
        let start = self.at;
        let bytes = self.bytes;
        let mut at = start;
        let negative = bytes[at] == b'-';
        if matches!(bytes[at], b'-' | b'+') {
            at += 1;
        }
        let digits_start = at;
        let mut mantissa: u64 = 0;
        let mut n_digits = 0usize;
        while at < bytes.len() && bytes[at].is_ascii_digit() {
            mantissa = mantissa.wrapping_mul(10).wrapping_add(u64::from(bytes[at] - b'0'));
            n_digits += 1;
            at += 1;
        }
        let integer_digits = n_digits;
        let mut fraction_digits = 0usize;
        if at < bytes.len() && bytes[at] == b'.' {
            at += 1;
            while at < bytes.len() && bytes[at].is_ascii_digit() {
                mantissa = mantissa.wrapping_mul(10).wrapping_add(u64::from(bytes[at] - b'0'));
                n_digits += 1;
                fraction_digits += 1;
                at += 1;
            }
        }
        let mut has_exponent = false;
        if at < bytes.len() && matches!(bytes[at], b'e' | b'E') {
            has_exponent = true;
            at += 1;
            if at < bytes.len() && matches!(bytes[at], b'+' | b'-') {
                at += 1;
            }
            while at < bytes.len() && bytes[at].is_ascii_digit() {
                at += 1;
            }
        }
        self.at = at;
        // A number that touches the end of the text may have been cut.
        self.ended_early = at == bytes.len();
        let token = &self.text[start..at];
        let has_point = at > digits_start + integer_digits && bytes[digits_start + integer_digits] == b'.';
        let strict_form = bytes[start] != b'+'
            && integer_digits > 0
            && (integer_digits == 1 || bytes[digits_start] != b'0')
            && (!has_point || fraction_digits > 0)
            && (!has_exponent || bytes[at - 1].is_ascii_digit());
        if !strict_form {
            self.lenient = true;
        }
        if n_digits == 0 {
            self.lenient = true;
            return LooseValue::Null;
        }
        let value = if !has_point && !has_exponent && n_digits <= 19 {
            // Integers as serde_json reads them: non-negative ones unsigned, negative ones signed when they fit.
            match (negative, i64::try_from(mantissa)) {
                (false, _) => Some(LooseNumber::Unsigned(mantissa)),
                (true, Ok(magnitude)) if mantissa != 0 => Some(LooseNumber::Signed(-magnitude)),
                (true, _) => token.parse::<f64>().ok().map(LooseNumber::Float),
            }
        } else if !has_exponent && n_digits <= 15 {
            // Both operands are exact doubles, and IEEE division rounds correctly, so this is the correctly
            // rounded value that a full parse would give (Clinger's fast path).
            let magnitude = mantissa as f64 / POWERS_OF_TEN[fraction_digits];
            Some(LooseNumber::Float(if negative { -magnitude } else { magnitude }))
        } else {
            token
                .trim_start_matches('+')
                .parse::<f64>()
                .ok()
                .map(LooseNumber::Float)
        };
        match value {
            Some(LooseNumber::Float(float)) if !float.is_finite() => {
                self.lenient = true;
                LooseValue::Null
            }
            Some(number) => LooseValue::Number(number),
            None => {
                self.lenient = true;
                LooseValue::Null
            }
        }
    }

    /// The run of word bytes at `at`.
    fn word_at(&self, at: usize) -> &'a str {
        let mut end = at;
        while end < self.bytes.len() && (self.bytes[end].is_ascii_alphanumeric() || self.bytes[end] == b'_') {
            end += 1;
        }
        &self.text[at..end]
    }

    /// Reads a literal (`true`, Python's `None`…) or, leniently, a bare word run up to the next separator as a
    /// string.
    fn word_value(&mut self) -> LooseValue<'a> {
        let word = self.word_at(self.at);
        if let Some((value, strict)) = literal(word) {
            self.at += word.len();
            self.ended_early = self.at == self.bytes.len();
            if !strict {
                self.lenient = true;
            }
            return value;
        }
        self.lenient = true;
        let start = self.at;
        while let Some(&byte) = self.bytes.get(self.at) {
            if matches!(byte, b',' | b'}' | b']' | b'\n') {
                break;
            }
            self.at += 1;
        }
        self.ended_early = self.at == self.bytes.len();
        if self.ended_early {
            self.cut = true;
        }
        LooseValue::String(Cow::Borrowed(self.text[start..self.at].trim_end()))
    }
}

/// Whether a byte starts a token for certain: not whitespace, not a comment's slash, not the first byte of a byte
/// order mark or no-break space.
#[inline]
fn is_plain_token_byte(byte: u8) -> bool {
    byte > b' ' && byte != b'/' && byte < 0x80
}

/// The position of the first byte from `at` on that ends the fast scan of a double-quoted string ([`STRING_STOP`]),
/// or the end. Eight bytes at a time: model texts run to a hundred bytes between stops.
#[inline]
fn next_string_stop(bytes: &[u8], mut at: usize) -> usize {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = ONES * 0x80;
    // High bit of each byte below `n`, exact for the lowest such byte (a borrow only crosses a byte that is below).
    let below = |word: u64, n: u64| word.wrapping_sub(ONES * n) & !word & HIGH;
    while let Some(chunk) = bytes.get(at..at + 8) {
        let word = u64::from_le_bytes(chunk.try_into().unwrap_or([0; 8]));
        let stops =
            below(word ^ (ONES * u64::from(b'"')), 1) | below(word ^ (ONES * u64::from(b'\\')), 1) | below(word, 0x20);
        if stops != 0 {
            return at + (stops.trailing_zeros() / 8) as usize;
        }
        at += 8;
    }
    while at < bytes.len() && !STRING_STOP[usize::from(bytes[at])] {
        at += 1;
    }
    at
}

/// The literals, and whether each is strict JSON.
fn literal(word: &str) -> Option<(LooseValue<'static>, bool)> {
    Some(match word {
        "true" => (LooseValue::Bool(true), true),
        "false" => (LooseValue::Bool(false), true),
        "null" => (LooseValue::Null, true),
        "True" | "TRUE" => (LooseValue::Bool(true), false),
        "False" | "FALSE" => (LooseValue::Bool(false), false),
        "None" | "NULL" | "Null" | "undefined" | "NaN" | "nil" => (LooseValue::Null, false),
        _ => return None,
    })
}

/// Whether a byte can start a value after a key: anything but separators and closers, so that bare words are read.
fn starts_value(byte: u8) -> bool {
    !matches!(
        byte,
        b',' | b'}' | b']' | b':' | b')' | b'(' | b'*' | b'#' | b';' | b'='
    )
}

#[inline]
fn finish_string<'a>(text: &'a str, owned: Option<String>, segment_start: usize, end: usize) -> Cow<'a, str> {
    match owned {
        None => Cow::Borrowed(&text[segment_start..end]),
        Some(mut buffer) => {
            buffer.push_str(&text[segment_start..end]);
            Cow::Owned(buffer)
        }
    }
}

/// The length of the UTF-8 sequence a leading byte starts (1 for continuation bytes, so progress is always made).
fn utf8_len(byte: u8) -> usize {
    match byte {
        0xF0..=0xFF => 4,
        0xE0..=0xEF => 3,
        0xC0..=0xDF => 2,
        _ => 1,
    }
}

fn memchr_from(bytes: &[u8], from: usize, needle: u8) -> Option<usize> {
    bytes[from..]
        .iter()
        .position(|&byte| byte == needle)
        .map(|at| from + at)
}

fn find_from(bytes: &[u8], from: usize, needle: &[u8]) -> Option<usize> {
    bytes
        .get(from..)?
        .windows(needle.len())
        .position(|window| window == needle)
        .map(|at| from + at)
}
