//! Every kept item rests on something its person said: a generator over items and their
//! `evidence_turns` (none, an empty list, unknown labels, assistant turns, user turns, in any mix
//! and form) checks that an item is kept exactly when it cites a user turn of the chunk, that its
//! evidence is exactly those user turns, and that every other item is dropped as
//! `missing_evidence`, recorded like any other drop.

use std::collections::{BTreeMap, BTreeSet};

use memsift_core::MessageId;
use memsift_processor::{DropReason, ProcessInput, process};
use proptest::prelude::*;
use serde_json::{Value, json};

/// Distinct facts, far apart for the fuzzy dedupe, one per item.
const FACTS: [&str; 8] = [
    "Caroline adopted a beagle named Max.",
    "Melanie plays the clarinet in a jazz band.",
    "Jon opened a dance studio downtown.",
    "Gina is allergic to peanuts and shellfish.",
    "Tim collects vintage fountain pens.",
    "Ana moved her office to Porto last spring.",
    "Noah volunteers at the river cleanup every Sunday.",
    "Rosa is learning Japanese for her trip to Kyoto.",
];

/// The chunk: `t0`..`t5`, the odd ones the assistant's.
const N_TURNS: usize = 6;

/// One citation an item may carry.
#[derive(Clone, Debug)]
enum Cite {
    /// A turn of the chunk, by index.
    Turn(usize),
    /// A label the chunk does not have.
    Unknown(String),
    /// Not a string at all.
    Number(i64),
}

/// How the item writes its `evidence_turns`.
#[derive(Clone, Debug)]
enum Field {
    Absent,
    Null,
    List(Vec<Cite>),
    /// A single label where a list belongs, which the processor reads as a list of one.
    Scalar(Cite),
}

fn cite() -> impl Strategy<Value = Cite> {
    prop_oneof![
        4 => (0..N_TURNS).prop_map(Cite::Turn),
        1 => "[a-z]{1,3}[0-9]{1,2}".prop_map(Cite::Unknown),
        1 => any::<i64>().prop_map(Cite::Number),
    ]
}

fn field() -> impl Strategy<Value = Field> {
    prop_oneof![
        1 => Just(Field::Absent),
        1 => Just(Field::Null),
        6 => proptest::collection::vec(cite(), 0..4).prop_map(Field::List),
        2 => cite().prop_map(Field::Scalar),
    ]
}

fn label(turn: usize) -> String {
    format!("t{turn}")
}

fn cite_json(cite: &Cite, padded: bool) -> Value {
    match cite {
        // Models pad labels now and then; a padded label is still the turn.
        Cite::Turn(turn) if padded => json!(format!(" {} ", label(*turn))),
        Cite::Turn(turn) => json!(label(*turn)),
        Cite::Unknown(text) if text.starts_with('t') && text[1..].parse::<usize>().is_ok_and(|n| n < N_TURNS) => {
            json!(format!("x{text}"))
        }
        Cite::Unknown(text) => json!(text),
        Cite::Number(n) => json!(n),
    }
}

/// The user turns an item's field cites.
fn user_turns(field: &Field) -> BTreeSet<usize> {
    let cites: Vec<&Cite> = match field {
        Field::Absent | Field::Null => Vec::new(),
        Field::List(list) => list.iter().collect(),
        Field::Scalar(one) => vec![one],
    };
    cites
        .into_iter()
        .filter_map(|cite| match cite {
            Cite::Turn(turn) if turn % 2 == 0 => Some(*turn),
            _ => None,
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    #[test]
    fn an_item_is_kept_exactly_when_it_cites_a_user_turn(
        fields in proptest::collection::vec((field(), any::<bool>()), 1..=FACTS.len()),
    ) {
        let messages: Vec<MessageId> = (0..N_TURNS).map(|_| MessageId::new_v7()).collect();
        let turns: BTreeMap<String, MessageId> =
            (0..N_TURNS).map(|turn| (label(turn), messages[turn])).collect();
        let assistant_turns: BTreeSet<String> = (0..N_TURNS).filter(|t| t % 2 == 1).map(label).collect();
        let items: Vec<Value> = fields
            .iter()
            .enumerate()
            .map(|(index, (field, padded))| {
                let mut item = json!({"text": FACTS[index]});
                match field {
                    Field::Absent => {}
                    Field::Null => item["evidence_turns"] = Value::Null,
                    Field::List(list) => {
                        item["evidence_turns"] = list.iter().map(|cite| cite_json(cite, *padded)).collect();
                    }
                    Field::Scalar(one) => item["evidence_turns"] = cite_json(one, *padded),
                }
                item
            })
            .collect();
        let raw = Value::Array(items).to_string();
        let output = process(&ProcessInput { raw_text: &raw, turns, assistant_turns, ..ProcessInput::default() });
        prop_assert_eq!(output.items.len() + output.dropped.len(), fields.len());
        let mut kept = output.items.iter();
        for (index, (field, _)) in fields.iter().enumerate() {
            let cited = user_turns(field);
            if cited.is_empty() {
                let drop = output.dropped.iter().find(|drop| drop.index == index);
                prop_assert_eq!(drop.map(|drop| drop.reason), Some(DropReason::MissingEvidence), "{:?}", field);
            } else {
                let item = kept.next().expect("a kept item");
                let evidence: BTreeSet<MessageId> = item.evidence.iter().copied().collect();
                let expected: BTreeSet<MessageId> = cited.iter().map(|turn| messages[*turn]).collect();
                prop_assert_eq!(evidence, expected, "{:?}", field);
            }
        }
    }
}
