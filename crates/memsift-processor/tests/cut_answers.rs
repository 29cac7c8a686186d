//! Answers cut at any byte, whatever the stop reason: every element that closed is kept or dropped
//! for its own reason, never as truncated; a continuation is asked for exactly when the JSON never
//! closed; and it reads the chunk from the last turn a kept item cites.

use std::collections::BTreeMap;

use memsift_core::MessageId;
use memsift_processor::{DropReason, ProcessInput, StopReason, process, unfinished_turns};
use proptest::prelude::*;
use serde_json::json;

/// One generated answer: its text, and where each element and the array start and end in it.
struct Answer {
    text: String,
    /// Byte offset of the array's `[`.
    open: usize,
    /// Byte offset just past the array's `]`.
    close_end: usize,
    /// (offset of `{`, offset just past `}`) of each element.
    elements: Vec<(usize, usize)>,
}

/// The elements as a model writes them, compact or indented, in a fence or bare.
fn answer(elements: &[String], pretty: bool, fenced: bool) -> Answer {
    let (start, separator, end) = if pretty {
        ("[\n  ", ",\n  ", "\n]")
    } else {
        ("[", ",", "]")
    };
    let prefix = if fenced { "```json\n" } else { "" };
    let mut text = format!("{prefix}{start}");
    let open = prefix.len();
    let mut offsets = Vec::with_capacity(elements.len());
    for (index, element) in elements.iter().enumerate() {
        if index > 0 {
            text.push_str(separator);
        }
        offsets.push((text.len(), text.len() + element.len()));
        text.push_str(element);
    }
    text.push_str(end);
    let close_end = text.len();
    if fenced {
        text.push_str("\n```");
    }
    Answer {
        text,
        open,
        close_end,
        elements: offsets,
    }
}

fn stop_reason() -> impl Strategy<Value = Option<StopReason>> {
    // `end_turn` and `stop` read as `EndTurn`, `max_tokens` and `length` as `MaxTokens`.
    prop_oneof![
        Just(Some(StopReason::EndTurn)),
        Just(Some(StopReason::MaxTokens)),
        Just(Some(StopReason::Other)),
        Just(None),
    ]
}

/// Items: a text of random words (never near another) and one to three cited turns.
fn items(n_turns: usize) -> impl Strategy<Value = Vec<(String, Vec<usize>)>> {
    prop::collection::vec(
        ("[a-z]{4,9}( [a-z]{3,9}){2,5}", prop::collection::vec(0..n_turns, 1..4)),
        0..7,
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 600, .. ProptestConfig::default() })]

    #[test]
    fn a_cut_answer_keeps_what_closed_and_continues_from_the_last_kept_citation(
        (n_turns, items) in (1usize..8).prop_flat_map(|n| (Just(n), items(n))),
        pretty in any::<bool>(),
        fenced in any::<bool>(),
        stop_reason in stop_reason(),
        cut_fraction in 0.0f64..=1.0,
    ) {
        let labels: Vec<String> = (0..n_turns).map(|turn| format!("D1:{turn}")).collect();
        let order: Vec<MessageId> = (0..n_turns).map(|_| MessageId::new_v7()).collect();
        let elements: Vec<String> = items
            .iter()
            .map(|(text, cited)| {
                let evidence: Vec<&String> = cited.iter().map(|&turn| &labels[turn]).collect();
                json!({"text": text, "temporal": "durable", "evidence_turns": evidence}).to_string()
            })
            .collect();
        let answer = answer(&elements, pretty, fenced);
        let mut cut = ((answer.text.len() as f64) * cut_fraction) as usize;
        while !answer.text.is_char_boundary(cut) {
            cut -= 1;
        }
        let raw = &answer.text[..cut];
        let turns: BTreeMap<String, MessageId> = labels.iter().cloned().zip(order.iter().copied()).collect();
        let output = process(&ProcessInput { raw_text: raw, stop_reason, turns, ..ProcessInput::default() });

        // (a) Every element that closed before the cut is kept or dropped for a reason of its own.
        let n_closed = answer.elements.iter().filter(|(_, end)| *end <= cut).count();
        for index in 0..n_closed {
            let kept = output.item_indices.contains(&index);
            let dropped = output.dropped.iter().find(|drop| drop.index == index);
            prop_assert!(kept || dropped.is_some(), "closed element {index} vanished from {raw:?}");
            if let Some(drop) = dropped {
                prop_assert_ne!(drop.reason, DropReason::Truncated, "closed element {} dropped as cut in {:?}", index, raw);
            }
        }
        // Only the element the text ended inside is dropped as truncated.
        for drop in output.dropped.iter().filter(|drop| drop.reason == DropReason::Truncated) {
            prop_assert_eq!(drop.index, n_closed, "{:?}", raw);
            let (start, end) = answer.elements[n_closed];
            prop_assert!(start < cut && cut < end, "{:?}", raw);
        }

        // (b) A continuation exactly when the JSON began and never closed, whatever the stop reason.
        let unterminated = answer.open < cut && cut < answer.close_end;
        let rest = unfinished_turns(&output, &order);
        prop_assert_eq!(rest.is_some(), unterminated, "stop {:?}, {:?}", stop_reason, raw);

        // (c) It reads the chunk from the last turn a kept item cites (all of it when none does).
        if let Some(rest) = rest {
            let start = output
                .item_indices
                .iter()
                .flat_map(|&index| items[index].1.iter().copied())
                .max()
                .unwrap_or(0);
            prop_assert_eq!(rest, &order[start..], "{:?}", raw);
        }
    }
}
