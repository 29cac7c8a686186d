//! The compact extraction contract: an answer that leaves out null, empty and default fields reads, through the
//! processor, exactly as the same items with every field spelled out; and the heuristic lane answers compactly.

use std::collections::{BTreeMap, HashSet};

use chrono::{TimeZone, Utc};
use memsift_core::contract::{DEFAULT_CONFIDENCE, ExtractedEntity, ExtractedItem, Turn};
use memsift_core::status::{Role, Temporal};
use memsift_core::{MemoryId, MessageId};
use memsift_processor::{ProcessInput, ProcessOutput, process};
use proptest::prelude::*;
use serde_json::{Value, json};

const SHORT_IDS: [&str; 2] = ["k7f2a9", "m3d81c"];
const LABELS: [&str; 3] = ["D1:1", "D1:2", "D1:3"];

fn items() -> impl Strategy<Value = Vec<ExtractedItem>> {
    let date = prop::option::of("2024-0[1-9]-1[0-9]");
    let item = (
        "[A-Z][a-z]{3,12}( [a-z]{2,9}){2,8}\\.",
        prop_oneof![Just(DEFAULT_CONFIDENCE), 0.0f64..=1.0],
        (date.clone(), date),
        any::<bool>(),
        prop::sample::select(vec![
            Temporal::OneOff,
            Temporal::Recurring,
            Temporal::Durable,
            Temporal::Unknown,
        ]),
        prop::option::of(prop::sample::select(vec!["supersedes", "conflicts", "causes"])),
        (
            prop::collection::vec(prop::sample::select(SHORT_IDS.to_vec()), 0..3),
            prop::collection::vec(prop::sample::select(SHORT_IDS.to_vec()), 0..2),
        ),
        prop::collection::vec(0usize..4, 0..3),
        prop::collection::vec(
            ("[A-Z][a-z]{2,8}", prop::sample::select(vec!["person", "place", "pet"])),
            0..3,
        ),
        prop::collection::vec(prop::sample::select(LABELS.to_vec()), 0..3),
    )
        .prop_map(
            |(
                text,
                confidence,
                (happens_at, expires_at),
                sensitive,
                temporal,
                relation,
                (related, merged),
                hints,
                entities,
                evidence,
            )| {
                ExtractedItem {
                    text,
                    confidence,
                    happens_at,
                    expires_at,
                    sensitive,
                    temporal,
                    relationship_type: relation.map(str::to_owned),
                    related_memory_ids: related.into_iter().map(str::to_owned).collect(),
                    consolidates_memory_ids: merged.into_iter().map(str::to_owned).collect(),
                    linking_hints: hints,
                    entities: entities
                        .into_iter()
                        .map(|(name, kind)| ExtractedEntity {
                            name,
                            kind: kind.to_owned(),
                        })
                        .collect(),
                    evidence_turns: evidence.into_iter().map(str::to_owned).collect(),
                }
            },
        );
    prop::collection::vec(item, 0..5)
}

fn processed(raw_text: &str) -> ProcessOutput {
    let memory = |n: u128| MemoryId::from_uuid(uuid_from(n));
    let context: BTreeMap<String, (MemoryId, String)> = SHORT_IDS
        .iter()
        .enumerate()
        .map(|(n, short)| {
            (
                short.to_string(),
                (memory(n as u128 + 1), format!("Known memory number {n}.")),
            )
        })
        .collect();
    let turns: BTreeMap<String, MessageId> = LABELS
        .iter()
        .enumerate()
        .map(|(n, label)| (label.to_string(), MessageId::from_uuid(uuid_from(n as u128 + 100))))
        .collect();
    process(&ProcessInput {
        raw_text,
        stop_reason: None,
        context,
        turns,
        assistant_turns: Default::default(),
        existing_keys: HashSet::new(),
        timezone_offset_minutes: 0,
        known_texts: Vec::new(),
    })
}

fn uuid_from(n: u128) -> uuid::Uuid {
    uuid::Uuid::from_u128(n)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn left_out_defaults_read_as_the_spelled_out_ones(items in items()) {
        let compact = serde_json::to_string(&items).unwrap();
        let full = Value::Array(items.iter().map(ExtractedItem::spelled_out).collect()).to_string();
        prop_assert!(compact.len() <= full.len());
        let (from_compact, from_full) = (processed(&compact), processed(&full));
        prop_assert_eq!(&from_compact.items, &from_full.items);
        prop_assert_eq!(&from_compact.dropped, &from_full.dropped);
        prop_assert_eq!(from_compact.repairs, from_full.repairs);
        prop_assert_eq!(from_compact.items.len() + from_compact.dropped.len(), items.len());
    }
}

#[test]
fn the_heuristic_lane_answers_in_the_compact_form() {
    let turn = |label: &str, content: &str| Turn {
        label: label.to_owned(),
        role: Role::User,
        speaker: None,
        content: content.to_owned(),
        at: Utc.with_ymd_and_hms(2024, 5, 8, 13, 56, 0).unwrap(),
    };
    let answer = memsift_heuristic::extract_json(&[
        turn("t1", "I live in Lisbon and I am allergic to peanuts."),
        turn("t2", "My dog is called Rex."),
    ]);
    let items: Vec<Value> = serde_json::from_str(&answer).unwrap();
    assert!(!items.is_empty(), "{answer}");
    for item in &items {
        for (field, value) in item.as_object().unwrap() {
            let is_default = value.is_null()
                || value == &json!([])
                || value == &json!(false)
                || value == &json!("unknown")
                || value == &json!(DEFAULT_CONFIDENCE);
            assert!(!is_default, "`{field}` is written at its default in {answer}");
        }
        assert!(
            item.get("text").is_some() && item.get("evidence_turns").is_some(),
            "{answer}"
        );
    }
}
