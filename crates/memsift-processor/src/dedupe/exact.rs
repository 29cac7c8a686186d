//! The exact stage's key for ASCII text, compacted in place (`memsift_core::text::dedupe_key` for ASCII), with hooks
//! that let the one pass over an item's bytes serve the histogram and the sensitive-phrase scan too.

/// `u8::is_ascii_alphanumeric` as a table: one load instead of three range tests, for every byte of every item.
const IS_ASCII_ALPHANUMERIC: [bool; 256] = ascii_alphanumerics();

const fn ascii_alphanumerics() -> [bool; 256] {
    let mut table = [false; 256];
    let mut byte = 0usize;
    while byte < 256 {
        table[byte] = (byte as u8).is_ascii_alphanumeric();
        byte += 1;
    }
    table
}

/// Compacts lowercase ASCII `bytes` in place into a dedupe key: the runs of letters and digits joined by single
/// spaces (`memsift_core::text::dedupe_key` for ASCII). The key is never longer than its input, so it is written
/// behind the read position; `at_word_start` sees the still-uncompacted bytes from each word's first byte on (the
/// sensitive-phrase scan reads there), and `each_byte` sees every byte first (the histogram counts there, saving
/// a pass of its own).
#[inline]
pub(crate) fn compact_ascii_key(
    bytes: &mut Vec<u8>,
    mut each_byte: impl FnMut(u8),
    mut at_word_start: impl FnMut(&[u8]),
) {
    let mut key_len = 0usize;
    let mut pending_space = false;
    for read in 0..bytes.len() {
        let byte = bytes[read];
        each_byte(byte);
        if IS_ASCII_ALPHANUMERIC[usize::from(byte)] {
            if pending_space || key_len == 0 {
                at_word_start(&bytes[read..]);
            }
            if pending_space && key_len > 0 {
                bytes[key_len] = b' ';
                key_len += 1;
            }
            pending_space = false;
            bytes[key_len] = byte;
            key_len += 1;
        } else {
            pending_space = true;
        }
    }
    bytes.truncate(key_len);
}
