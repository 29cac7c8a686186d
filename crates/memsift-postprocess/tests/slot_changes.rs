//! A change of where someone lives, works or studies, said in any of the ways people say it and
//! extracted by the heuristic lane, ends with the older value superseded.
//!
//! The generator picks a person, a slot, two values and a phrasing of the change ("I moved last
//! week, I now live in Porto.", "These days I work at Acme."), writes the two user turns weeks
//! apart, extracts each with `memsift_heuristic` the way the offline lane does, and hands the two
//! memories to the relationship stage's steps in either order of arrival: oriented newer first,
//! asked of the offline judge, read back by the parser. The older-said memory must be the one
//! marked superseded, and the newer one must keep its value.

mod common;

use chrono::{Duration, TimeZone, Utc};
use common::archived;
use memsift_core::MemoryId;
use memsift_core::contract::Turn;
use memsift_core::status::Role;
use memsift_postprocess::MemoryText;
use proptest::prelude::*;

const PEOPLE: &[&str] = &["Nina", "Noah", "Caroline", "Melanie", "Jon"];

/// A slot: how its first value is stated, the ways a later value is stated (`{}` is the value), and
/// the values it takes.
struct SlotCase {
    first: &'static str,
    changes: &'static [&'static str],
    values: &'static [&'static str],
}

const SLOTS: &[SlotCase] = &[
    SlotCase {
        first: "I live in {}.",
        changes: &[
            "I moved last week, I now live in {}.",
            "I live in {} now.",
            "I now live in {}.",
            "We moved to {} last month.",
            "These days I live in {}.",
            "I relocated to {} in the spring.",
        ],
        values: &["Lisbon", "Porto", "Berlin", "Madrid", "Oslo", "Boston"],
    },
    SlotCase {
        first: "I work at {}.",
        changes: &[
            "I switched jobs, I now work at {}.",
            "I work at {} now.",
            "These days I work for {}.",
            "I started a new job, I work at {} now.",
        ],
        values: &["Fernwood Labs", "Acme", "Globex", "Initech", "Hooli"],
    },
    SlotCase {
        first: "I study at {}.",
        changes: &["I changed schools, I now study at {}.", "I study at {} now."],
        values: &["Lisbon University", "Stanford", "Oxford", "Porto Polytechnic"],
    },
];

/// The memories the heuristic lane writes for one user turn said at `day`.
fn extracted(name: &str, text: &str, day: i64) -> Vec<String> {
    let turn = Turn {
        label: format!("D{day}:1"),
        role: Role::User,
        speaker: Some(name.to_owned()),
        content: text.to_owned(),
        at: Utc.with_ymd_and_hms(2026, 1, 1, 12, 0, 0).unwrap() + Duration::days(day),
    };
    memsift_heuristic::extract(std::slice::from_ref(&turn))
        .into_iter()
        .map(|item| item.text)
        .collect()
}

/// The one memory of `texts` that names `value`.
fn naming(texts: &[String], value: &str) -> Option<MemoryText> {
    let mut naming = texts.iter().filter(|text| text.contains(value));
    let text = naming.next()?.clone();
    Some(MemoryText {
        id: MemoryId::new_v7(),
        text,
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn a_later_value_of_a_slot_supersedes_the_earlier_in_either_order_of_arrival(
        person in 0..PEOPLE.len(),
        slot in 0..SLOTS.len(),
        picks in (0usize..64, 0usize..64, 0usize..64),
        first_day in 0i64..100,
        weeks in 1i64..40,
        reversed in any::<bool>(),
    ) {
        let (name, case) = (PEOPLE[person], &SLOTS[slot]);
        let old_value = case.values[picks.0 % case.values.len()];
        let new_value = case.values[(picks.0 + 1 + picks.1 % (case.values.len() - 1)) % case.values.len()];
        prop_assume!(!old_value.contains(new_value) && !new_value.contains(old_value));
        let change = case.changes[picks.2 % case.changes.len()];
        let new_day = first_day + 7 * weeks;
        let old_texts = extracted(name, &case.first.replace("{}", old_value), first_day);
        let new_texts = extracted(name, &change.replace("{}", new_value), new_day);
        let old = naming(&old_texts, old_value);
        let new = naming(&new_texts, new_value);
        prop_assert!(old.is_some() && new.is_some(), "extracted {:?} and {:?}", old_texts, new_texts);
        let (old, new) = (old.unwrap(), new.unwrap());
        let said = [(old.id, first_day), (new.id, new_day)];
        let (first, second) = if reversed { (&new, &old) } else { (&old, &new) };
        prop_assert_eq!(archived(first, second, &said), Some(old.id), "{:?} then {:?}", old.text, new.text);
    }

    #[test]
    fn two_people_or_two_slots_supersede_nothing(
        people in (0..PEOPLE.len(), 0..PEOPLE.len()),
        slots in (0..SLOTS.len(), 0..SLOTS.len()),
        values in (0usize..64, 0usize..64),
    ) {
        prop_assume!(people.0 != people.1 || slots.0 != slots.1);
        let (a, b) = (&SLOTS[slots.0], &SLOTS[slots.1]);
        let a_value = a.values[values.0 % a.values.len()];
        let b_value = b.values[values.1 % b.values.len()];
        let older = naming(&extracted(PEOPLE[people.0], &a.first.replace("{}", a_value), 1), a_value);
        let newer = naming(&extracted(PEOPLE[people.1], &b.first.replace("{}", b_value), 60), b_value);
        prop_assert!(older.is_some() && newer.is_some());
        let (older, newer) = (older.unwrap(), newer.unwrap());
        let said = [(older.id, 1), (newer.id, 60)];
        prop_assert_eq!(archived(&older, &newer, &said), None, "{:?} / {:?}", older.text, newer.text);
    }
}
