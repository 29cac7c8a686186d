//! Numbers (in the forms JSON allows and those models write), literals (JSON's and Python's), and bare words read
//! as strings.

use std::borrow::Cow;

use super::Reader;
use crate::loose::{LooseNumber, LooseValue};

/// Exact powers of ten for the fast decimal path (10²² is the largest that a double holds exactly).
const POWERS_OF_TEN: [f64; 23] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20,
    1e21, 1e22,
];

impl<'a> Reader<'a> {
    /// Reads a number; a token that is no number is null.
    pub(super) fn number(&mut self) -> LooseValue<'a> {
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
    pub(super) fn word_at(&self, at: usize) -> &'a str {
        let mut end = at;
        while end < self.bytes.len() && (self.bytes[end].is_ascii_alphanumeric() || self.bytes[end] == b'_') {
            end += 1;
        }
        &self.text[at..end]
    }

    /// Reads a literal (`true`, Python's `None`…) or, leniently, a bare word run up to the next separator as a
    /// string.
    pub(super) fn word_value(&mut self) -> LooseValue<'a> {
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

/// The literals, and whether each is strict JSON.
pub(super) fn literal(word: &str) -> Option<(LooseValue<'static>, bool)> {
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
