//! Moving over what is no value: whitespace and, leniently, comments, byte order marks and no-break spaces between
//! tokens; bytes that fit nowhere; containers nested too deep to keep; and the byte searches these use.

use super::Reader;

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

const BYTE_ORDER_MARK: &[u8] = "\u{FEFF}".as_bytes();
const NO_BREAK_SPACE: &[u8] = "\u{A0}".as_bytes();

impl Reader<'_> {
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

    /// Skips bytes that fit nowhere, at least one character, up to the next byte of `stops`.
    pub(super) fn skip_garbage(&mut self, stops: &[u8]) {
        self.skipped = true;
        self.at += utf8_len(self.bytes[self.at]);
        while let Some(&byte) = self.bytes.get(self.at) {
            if stops.contains(&byte) {
                return;
            }
            self.at += 1;
        }
    }

    /// Skips a container nested beyond [`MAX_DEPTH`](super::MAX_DEPTH) without recursing, minding double-quoted strings.
    pub(super) fn skip_nested(&mut self) {
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
pub(super) fn next_string_stop(bytes: &[u8], mut at: usize) -> usize {
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
