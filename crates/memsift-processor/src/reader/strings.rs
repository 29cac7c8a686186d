//! Quoted strings in any style models write (double, single, smart), with their escapes, inner quotes that stay
//! text, and raw control characters; a string without escapes borrows from the text.

use std::borrow::Cow;

use super::Reader;
use super::scan::next_string_stop;

const LEFT_DOUBLE: &[u8] = "\u{201C}".as_bytes();
const RIGHT_DOUBLE: &[u8] = "\u{201D}".as_bytes();
const LEFT_SINGLE: &[u8] = "\u{2018}".as_bytes();
const RIGHT_SINGLE: &[u8] = "\u{2019}".as_bytes();

/// The quote a string was opened with, which decides what closes it.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Quote {
    Double,
    Single,
    /// “…”, also closed by a straight double quote: models mix them.
    SmartDouble,
    /// ‘…’.
    SmartSingle,
}

impl<'a> Reader<'a> {
    /// The quote opening a string at `at`, with its length in bytes.
    #[inline]
    pub(super) fn quote_at(&self, at: usize) -> Option<(Quote, usize)> {
        match self.bytes.get(at)? {
            b'"' => Some((Quote::Double, 1)),
            b'\'' => Some((Quote::Single, 1)),
            0xE2 if self.starts_with(at, LEFT_DOUBLE) => Some((Quote::SmartDouble, LEFT_DOUBLE.len())),
            0xE2 if self.starts_with(at, LEFT_SINGLE) => Some((Quote::SmartSingle, LEFT_SINGLE.len())),
            _ => None,
        }
    }

    /// Reads a string whose opening quote (`open_len` bytes) is at the position. Strings without escapes borrow
    /// from the text.
    #[inline]
    pub(super) fn string(&mut self, quote: Quote, open_len: usize) -> Cow<'a, str> {
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
