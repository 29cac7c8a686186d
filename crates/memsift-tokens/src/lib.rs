//! Token counting with a real BPE tokenizer, so chunk budgets mean what providers will bill, in
//! time linear in the length of the text.
//!
//! No provider publishes an offline tokenizer for every model; `o200k_base` (OpenAI's current
//! encoding) is close enough to Anthropic's to keep chunks well inside any context window, and its
//! ranks ship inside `tiktoken-rs`, so counting never touches the network.
//!
//! BPE first cuts text into pieces with the encoding's regex (a word, a run of punctuation, a run
//! of spaces) and then merges bytes within each piece, at a cost quadratic in the piece's length:
//! one unbroken 256 KiB word (a DNA sequence, a base64 blob, a line of `=`) took ~50 s. So a
//! piece longer than [`MAX_PIECE_BYTES`] is *split* into parts of at most that many bytes, each
//! encoded with the real ranks, instead of being *estimated* from its length. Splitting stays
//! within a few tokens per cut for any alphabet (DNA at ~4 bytes a token, CJK at ~1 character a
//! token, emoji at several tokens a character), where a bytes-per-token estimate would be wrong
//! by a factor for some of them. Text without such a piece is encoded whole, exactly as before.

use std::sync::LazyLock;

use fancy_regex::Regex;
use tiktoken_rs::CoreBPE;

/// The encoding [`count_tokens`] uses.
pub const TOKENIZER: &str = "o200k_base";

/// The longest piece handed to BPE whole; longer ones are split into parts of at most this many
/// bytes. Longer than any word of prose (so normal text is counted exactly) and short enough that
/// a megabyte of one word costs what a megabyte of prose does.
pub const MAX_PIECE_BYTES: usize = 256;

/// A run of this many bytes of one kind (whitespace, non-whitespace, or `\r`, `\n` and `/`, which
/// the punctuation piece may end with) is the shortest that can belong to a piece longer than
/// [`MAX_PIECE_BYTES`]: a piece is at most a 4-byte prefix, one run of each of two kinds, and a
/// 3-byte suffix such as `'ll`. Text without such a run skips the piece scan.
const LONG_RUN_BYTES: usize = MAX_PIECE_BYTES / 2 - 8;

// Building the BPE tables parses ~200k ranks; do it once per process, not per call.
static BPE: LazyLock<CoreBPE> = LazyLock::new(|| {
    tiktoken_rs::o200k_base().expect("o200k_base ranks are compiled into tiktoken-rs and always parse")
});

// The encoding's own pre-tokenizer, to find the pieces BPE would see.
static PIECES: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(tiktoken_rs::O200K_BASE_PAT_STR).expect("the o200k_base pattern is the one tiktoken-rs compiles")
});

/// The number of tokens `text` encodes to, treating special-token text as ordinary text (user
/// text that spells `<|endoftext|>` is just characters to us). Exact unless a piece of `text` is
/// longer than [`MAX_PIECE_BYTES`]; linear in the length of `text` either way.
pub fn count_tokens(text: &str) -> usize {
    bpe_inputs(text)
        .into_iter()
        .map(|input| BPE.encode_ordinary(input).len())
        .sum()
}

/// The strings [`count_tokens`] encodes one by one, in order; they concatenate to `text`.
///
/// The whole text when none of its pieces is longer than [`MAX_PIECE_BYTES`]. Otherwise the text
/// between long pieces is kept whole (it is cut exactly at piece boundaries, so it encodes as it
/// would inside the whole text), and each long piece is cut into parts of at most
/// [`MAX_PIECE_BYTES`] bytes on character boundaries.
pub fn bpe_inputs(text: &str) -> Vec<&str> {
    if !has_long_run(text) {
        return vec![text];
    }
    let mut inputs = Vec::new();
    let mut span_start = 0;
    for piece in PIECES.find_iter(text) {
        let Ok(piece) = piece else {
            // Only the backtracking limit fails a match; the rest is cut blindly, which is still
            // linear (tiktoken's own scan would have panicked on such text).
            inputs.extend(parts_of_at_most(&text[span_start..], MAX_PIECE_BYTES));
            return inputs;
        };
        if piece.as_str().len() <= MAX_PIECE_BYTES {
            continue;
        }
        if span_start < piece.start() {
            inputs.push(&text[span_start..piece.start()]);
        }
        inputs.extend(parts_of_at_most(piece.as_str(), MAX_PIECE_BYTES));
        span_start = piece.end();
    }
    if span_start < text.len() || inputs.is_empty() {
        inputs.push(&text[span_start..]);
    }
    inputs
}

/// Whether `text` holds a run of [`LONG_RUN_BYTES`] of one kind, without which no piece can be
/// longer than [`MAX_PIECE_BYTES`].
fn has_long_run(text: &str) -> bool {
    // Bytes of the current run of whitespace, of non-whitespace, and of `\r`, `\n`, `/`.
    let (mut space, mut solid, mut line_end) = (0, 0, 0);
    for ch in text.chars() {
        let width = ch.len_utf8();
        // The regex's `\s` is Unicode White_Space, which is what `char::is_whitespace` tests.
        if ch.is_whitespace() {
            space += width;
            solid = 0;
        } else {
            solid += width;
            space = 0;
        }
        if matches!(ch, '\r' | '\n' | '/') {
            line_end += width;
        } else {
            line_end = 0;
        }
        if space.max(solid).max(line_end) >= LONG_RUN_BYTES {
            return true;
        }
    }
    false
}

/// `text` cut into consecutive parts of at most `max_bytes` bytes (at least one character each).
fn parts_of_at_most(text: &str, max_bytes: usize) -> Vec<&str> {
    let mut parts = Vec::with_capacity(text.len() / max_bytes + 1);
    let mut rest = text;
    while !rest.is_empty() {
        let mut cut = max_bytes.min(rest.len());
        while !rest.is_char_boundary(cut) {
            cut -= 1;
        }
        if cut == 0 {
            // `max_bytes` is below one character's width: take the character.
            cut = rest.chars().next().map_or(rest.len(), char::len_utf8);
        }
        let (part, tail) = rest.split_at(cut);
        parts.push(part);
        rest = tail;
    }
    parts
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn counts_are_those_of_the_real_encoding() {
        assert_eq!(count_tokens(""), 0);
        assert_eq!(count_tokens("hello world"), 2);
        assert!(
            count_tokens("<|endoftext|>") > 1,
            "special tokens are counted as plain text"
        );
    }

    fn exact(text: &str) -> usize {
        BPE.encode_ordinary(text).len()
    }

    /// An upper bound on BPE's merge work for `input`: the square of each piece's length.
    fn merge_work(input: &str) -> usize {
        PIECES
            .find_iter(input)
            .map(|piece| {
                piece
                    .expect("test inputs stay under the backtracking limit")
                    .as_str()
                    .len()
                    .pow(2)
            })
            .sum()
    }

    /// Alphabets a long word is drawn from: one piece each (DNA, lowercase, a script without
    /// case, punctuation, spaces), pieces that alternate (mixed case, digits, the `\n`/`/` tail of
    /// punctuation pieces), combining marks, emoji, and any character at all.
    const ALPHABETS: &[&str] = &[
        "ACGT",
        "acgt",
        "abcdefghijklmnopqrstuvwxyz",
        "AbCdEfGhIjKlMnOpQrStUvWxYz0123456789+/=",
        "日本語中文字漢",
        "абвгдеёжз",
        "\u{0627}\u{0644}\u{0639}\u{0631}\u{0628}\u{064A}\u{064E}\u{0650}",
        "e\u{0301}\u{0302}\u{0308}",
        "🧬🦀👍🏽\u{200d}",
        "=-*#!?.,;:",
        " \t\u{a0}\u{3000}",
        "\n/\r",
        "0123456789",
    ];

    /// A long word of `n_bytes` (roughly: whole characters) drawn from `alphabet` by a
    /// deterministic generator, so a case shrinks by its length and seed, not character by character.
    fn long_word(alphabet: &str, n_bytes: usize, seed: u64) -> String {
        let chars: Vec<char> = if alphabet.is_empty() {
            // "Any character": a spread over the whole range of scalar values.
            (0..64u32)
                .filter_map(|step| char::from_u32(step.wrapping_mul(0x4_4B1D) % 0x11_0000))
                .collect()
        } else {
            alphabet.chars().collect()
        };
        let mut state = seed | 1;
        let mut word = String::with_capacity(n_bytes + 4);
        while word.len() < n_bytes {
            // xorshift64: enough spread for a word, no dependency.
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            word.push(chars[(state % chars.len() as u64) as usize]);
        }
        word
    }

    /// Prose around long words: `words` are placed between sentences.
    fn mixed(words: &[String], prose: &str) -> String {
        let mut text = String::new();
        for word in words {
            text.push_str(prose);
            text.push(' ');
            text.push_str(word);
            text.push(' ');
        }
        text.push_str(prose);
        text
    }

    fn alphabet() -> impl Strategy<Value = &'static str> {
        prop_oneof![prop::sample::select(ALPHABETS), Just("")]
    }

    fn prose() -> impl Strategy<Value = String> {
        "[A-Za-z ,.'!?0-9]{0,200}"
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]

        /// The whole class of long words, up to 1 MiB: every input BPE sees is a slice of the
        /// text, each byte is handed over once, and the merge work is at most
        /// `MAX_PIECE_BYTES` per byte, where one unsplit 1 MiB word would cost a million per byte.
        #[test]
        fn counting_work_is_linear_in_the_length_of_any_long_word(
            first in (alphabet(), 0usize..=1 << 20, any::<u64>()),
            more in prop::collection::vec((alphabet(), 0usize..1 << 16, any::<u64>()), 0..2),
            prose in prose(),
        ) {
            let words: Vec<String> = std::iter::once(&first)
                .chain(&more)
                .map(|(alphabet, n, seed)| long_word(alphabet, *n, *seed))
                .collect();
            let text = mixed(&words, &prose);
            let inputs = bpe_inputs(&text);
            prop_assert_eq!(inputs.concat(), text.as_str());
            let work: usize = inputs.iter().map(|input| merge_work(input)).sum();
            prop_assert!(
                work <= MAX_PIECE_BYTES * text.len(),
                "merge work {} for {} bytes", work, text.len()
            );
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// On texts small enough to count exactly, a split count is within a stated bound of the
        /// exact one, and a text with no long piece is counted exactly.
        #[test]
        fn split_counts_stay_within_two_tokens_per_cut_of_the_exact_count(
            words in prop::collection::vec((alphabet(), 0usize..6000, any::<u64>()), 1..3),
            prose in prose(),
        ) {
            let words: Vec<String> = words.iter().map(|(alphabet, n, seed)| long_word(alphabet, *n, *seed)).collect();
            let text = mixed(&words, &prose);
            let long_pieces: Vec<usize> = PIECES
                .find_iter(&text)
                .map(|piece| piece.unwrap().as_str().len())
                .filter(|&len| len > MAX_PIECE_BYTES)
                .collect();
            let n_cuts: usize = long_pieces.iter().map(|len| len.div_ceil(MAX_PIECE_BYTES) - 1).sum();
            let (exact, counted) = (exact(&text), count_tokens(&text));
            if long_pieces.is_empty() {
                prop_assert_eq!(counted, exact);
            } else {
                prop_assert!(
                    counted.abs_diff(exact) <= 2 * n_cuts,
                    "counted {} exact {} with {} cuts", counted, exact, n_cuts
                );
            }
        }

        /// Ordinary text, long URLs and code included, is counted exactly as the encoder counts it.
        #[test]
        fn text_without_long_pieces_is_counted_exactly(text in "([a-zA-Z0-9_/:.?=&%-]{1,200}[ \n\t]{1,3}){0,40}") {
            prop_assert_eq!(count_tokens(&text), exact(&text));
        }
    }
}
