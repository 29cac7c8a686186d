//! Fuzz target: arbitrary bytes as the body of `POST /v1/users/{user}/messages` never panic the
//! parser, every message it accepts belongs to the user of the path (invariant 9: a body cannot
//! write into another user's store), and none is longer than the message limit.

#![no_main]

use libfuzzer_sys::fuzz_target;
use memsift_import::parse_api_messages;

/// A limit small enough that fuzzed bodies cross it.
const MAX_MESSAGE_BYTES: usize = 64;

fuzz_target!(|data: &[u8]| {
    if let Ok(messages) = parse_api_messages("path-user", data, MAX_MESSAGE_BYTES) {
        assert!(
            messages.iter().all(|message| message.user_external_id == "path-user"),
            "{messages:?}"
        );
        assert!(
            messages.iter().all(|message| message.content.len() <= MAX_MESSAGE_BYTES),
            "{messages:?}"
        );
    }
});
