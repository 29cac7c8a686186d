//! Fuzz target: arbitrary bytes, read as a model response, through `parse_response` and `process`, never panic,
//! `process` reports the same parse path, cut flags and element count as `parse_response`, and only the last
//! element is ever dropped as truncated, and only when it was cut or the output hit `max_tokens`.
//!
//! The first byte picks the stop reason and whether the request had known memories, so one corpus explores the
//! truncation rule and the fuzzy stage against known texts as well as the parser; the rest is the response text,
//! decoded lossily because the lanes hand the processor text, never bytes.

#![no_main]

use std::collections::{BTreeMap, HashSet};

use libfuzzer_sys::fuzz_target;
use memsift_core::{MemoryId, MessageId};
use memsift_processor::{DropReason, ProcessInput, StopReason, parse_response, process};

const KNOWN: [(&str, &str, &str); 2] = [
    (
        "ctx00001",
        "01900000-0000-7000-8000-000000000001",
        "Caroline volunteers at the animal shelter every Saturday morning.",
    ),
    (
        "ctx00002",
        "01900000-0000-7000-8000-000000000002",
        "Melanie plays the clarinet in a band.",
    ),
];

fuzz_target!(|data: &[u8]| {
    let (selector, text) = data.split_first().map_or((0, data), |(first, rest)| (*first, rest));
    let raw = String::from_utf8_lossy(text);

    // The parser alone is public too, and `replay` calls it directly.
    let parsed = parse_response(&raw);
    let (generic_path, generic_cut_off, generic_len) = (parsed.path, parsed.cut_off, parsed.elements.len());
    let last_element_cut = parsed.last_element_cut;
    let _ = parsed.into_owned();

    let stop_reason = match selector % 4 {
        0 => None,
        1 => Some(StopReason::EndTurn),
        2 => Some(StopReason::MaxTokens),
        _ => Some(StopReason::Other),
    };
    let mut input = ProcessInput {
        raw_text: &raw,
        stop_reason,
        timezone_offset_minutes: i32::from(selector as i8) * 15,
        ..ProcessInput::default()
    };
    if selector & 0x10 != 0 {
        let mut context = BTreeMap::new();
        let mut known_texts = Vec::new();
        for (short, full, memory) in KNOWN {
            let id = MemoryId::parse(full).expect("the fixed ids are valid");
            context.insert(short.to_owned(), (id, memory.to_owned()));
            known_texts.push((id, memory.to_owned()));
        }
        let mut turns = BTreeMap::new();
        turns.insert(
            "t1".to_owned(),
            MessageId::parse("01900000-0000-7000-8000-000000000011").expect("the fixed id is valid"),
        );
        input.context = context;
        input.known_texts = known_texts;
        input.turns = turns;
        input.existing_keys = HashSet::from(["caroline keeps an old diary from school".to_owned()]);
    }

    let output = process(&input);
    // `process` reads common shapes through its own typed fast paths; they must agree with the parser.
    assert_eq!(
        (output.parse_path, output.cut_off, output.elements_parsed),
        (generic_path, generic_cut_off, generic_len)
    );
    assert_eq!(output.items.len() + output.dropped.len(), output.elements_parsed);
    for drop in output
        .dropped
        .iter()
        .filter(|drop| drop.reason == DropReason::Truncated)
    {
        assert_eq!(drop.index + 1, output.elements_parsed);
        assert!(last_element_cut || stop_reason == Some(StopReason::MaxTokens));
    }
    assert_eq!(output.item_indices.len(), output.items.len());
    for item in &output.items {
        assert!(item.linking_hints.iter().all(|&hint| hint < output.items.len()));
        assert!((0.0..=1.0).contains(&item.confidence));
    }
});
