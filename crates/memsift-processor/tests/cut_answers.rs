//! Answers cut at any byte, whatever the stop reason: every element that closed is kept or dropped
//! for its own reason, never as truncated; the element the text ended inside is kept with what it
//! finished saying when its text closed (its evidence: the labels that closed), and dropped as
//! truncated otherwise; a continuation is asked for exactly when the JSON never closed.

use std::collections::{BTreeMap, BTreeSet};

use memsift_core::MessageId;
use memsift_processor::{DropReason, ProcessInput, StopReason, process};
use proptest::prelude::*;

/// One element as a model writes it, in any field order, with where its parts end.
struct Element {
    json: String,
    /// Offset just past the text's closing quote.
    text_end: usize,
    /// (offset just past each evidence label's closing quote, its turn).
    label_ends: Vec<(usize, usize)>,
}

/// `{"text": …, "temporal": "durable", "evidence_turns": [...]}` with the fields in `order` (a
/// permutation of 0 text, 1 temporal, 2 evidence).
fn element(text: &str, cited: &[usize], labels: &[String], order: &[usize]) -> Element {
    let mut json = String::from("{");
    let (mut text_end, mut label_ends) = (0, Vec::new());
    for (position, field) in order.iter().enumerate() {
        if position > 0 {
            json.push_str(", ");
        }
        match field {
            0 => {
                json.push_str(&format!("\"text\": \"{text}\""));
                text_end = json.len();
            }
            1 => json.push_str("\"temporal\": \"durable\""),
            _ => {
                json.push_str("\"evidence_turns\": [");
                for (index, &turn) in cited.iter().enumerate() {
                    if index > 0 {
                        json.push_str(", ");
                    }
                    json.push_str(&format!("\"{}\"", labels[turn]));
                    label_ends.push((json.len(), turn));
                }
                json.push(']');
            }
        }
    }
    json.push('}');
    Element {
        json,
        text_end,
        label_ends,
    }
}

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
    fn a_cut_answer_keeps_what_finished_and_asks_for_a_continuation(
        (n_turns, items) in (1usize..8).prop_flat_map(|n| (Just(n), items(n))),
        order in Just(vec![0usize, 1, 2]).prop_shuffle(),
        pretty in any::<bool>(),
        fenced in any::<bool>(),
        stop_reason in stop_reason(),
        cut_fraction in 0.0f64..=1.0,
    ) {
        let labels: Vec<String> = (0..n_turns).map(|turn| format!("D1:{turn}")).collect();
        let turn_ids: Vec<MessageId> = (0..n_turns).map(|_| MessageId::new_v7()).collect();
        let elements: Vec<Element> = items.iter().map(|(text, cited)| element(text, cited, &labels, &order)).collect();
        let jsons: Vec<String> = elements.iter().map(|element| element.json.clone()).collect();
        let answer = answer(&jsons, pretty, fenced);
        let mut cut = ((answer.text.len() as f64) * cut_fraction) as usize;
        while !answer.text.is_char_boundary(cut) {
            cut -= 1;
        }
        let raw = &answer.text[..cut];
        let turns: BTreeMap<String, MessageId> = labels.iter().cloned().zip(turn_ids.iter().copied()).collect();
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
        // (b) The element the text ended inside: what it finished saying, if its text closed.
        if let Some(&(start, _)) = answer.elements.get(n_closed).filter(|(start, end)| *start < cut && cut < *end) {
            let partial = &elements[n_closed];
            let truncated = output.dropped.iter().any(|drop| drop.index == n_closed && drop.reason == DropReason::Truncated);
            let text_closed = start + partial.text_end <= cut;
            prop_assert_eq!(truncated, !text_closed, "{:?}", raw);
            if let Some(position) = output.item_indices.iter().position(|&index| index == n_closed) {
                let finished: BTreeSet<MessageId> = partial
                    .label_ends
                    .iter()
                    .filter(|(label_end, _)| start + label_end <= cut)
                    .map(|(_, turn)| turn_ids[*turn])
                    .collect();
                let evidence: BTreeSet<MessageId> = output.items[position].evidence.iter().copied().collect();
                prop_assert_eq!(evidence, finished, "only the labels that closed, in {:?}", raw);
            }
        } else {
            prop_assert_eq!(output.count_dropped(DropReason::Truncated), 0, "{:?}", raw);
        }

        // (c) A continuation exactly when the JSON began and never closed, whatever the stop reason.
        let unterminated = answer.open < cut && cut < answer.close_end;
        prop_assert_eq!(output.cut_off, unterminated, "stop {:?}, {:?}", stop_reason, raw);
    }
}
