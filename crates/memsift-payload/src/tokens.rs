//! Token counting with a real BPE tokenizer, so chunk budgets mean what providers will bill.
//!
//! No provider publishes an offline tokenizer for every model; `o200k_base` (OpenAI's current
//! encoding) is close enough to Anthropic's to keep chunks well inside any context window, and its
//! ranks ship inside `tiktoken-rs`, so counting never touches the network.

use std::sync::LazyLock;

use tiktoken_rs::CoreBPE;

/// The encoding [`count_tokens`] uses.
pub const TOKENIZER: &str = "o200k_base";

// Building the BPE tables parses ~200k ranks; do it once per process, not per call.
static BPE: LazyLock<CoreBPE> = LazyLock::new(|| {
    tiktoken_rs::o200k_base().expect("o200k_base ranks are compiled into tiktoken-rs and always parse")
});

/// The number of tokens `text` encodes to, treating special-token text as ordinary text (user
/// text that spells `<|endoftext|>` is just characters to us).
pub fn count_tokens(text: &str) -> usize {
    BPE.encode_ordinary(text).len()
}

#[cfg(test)]
mod tests {
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
}
