//! Fuzz target: arbitrary bytes as the body of `POST /v1/users/{user}/messages` never panic the
//! parser, and every message it accepts belongs to the user of the path (invariant 9: a body
//! cannot write into another user's store).

#![no_main]

use libfuzzer_sys::fuzz_target;
use memsift_import::parse_api_messages;

fuzz_target!(|data: &[u8]| {
    if let Ok(messages) = parse_api_messages("path-user", data) {
        assert!(
            messages.iter().all(|message| message.user_external_id == "path-user"),
            "{messages:?}"
        );
    }
});
