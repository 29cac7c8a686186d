//! Behaviour of `process` and the vector stage: drop reasons, repairs, id and hint remapping, dedupe thresholds.

use std::collections::BTreeMap;

use memsift_core::status::Temporal;
use memsift_core::{MemoryId, MessageId};
use memsift_processor::{
    DropReason, ParsePath, ProcessInput, ProcessOutput, StopReason, VECTOR_DUPLICATE_THRESHOLD, cosine,
    dedupe_by_vectors, fuzzy_ratio, process,
};
use serde_json::{Value, json};

const KNOWN_TEXT: &str = "Caroline volunteers at the animal shelter every Saturday morning.";

fn memory_id(n: u128) -> MemoryId {
    MemoryId::from_uuid(uuid_from(n))
}

fn message_id(n: u128) -> MessageId {
    MessageId::from_uuid(uuid_from(n))
}

fn uuid_from(n: u128) -> uuid::Uuid {
    uuid::Uuid::from_u128(0x0190_0000_0000_7000_8000_0000_0000_0000 | n)
}

/// A request with two context memories (short ids `ctx00001`, `ctx00002`) and two turns (`t1`, `t2`).
fn input(raw: &str) -> ProcessInput<'_> {
    let mut context = BTreeMap::new();
    context.insert("ctx00001".to_owned(), (memory_id(1), KNOWN_TEXT.to_owned()));
    context.insert(
        "ctx00002".to_owned(),
        (memory_id(2), "Melanie plays the clarinet in a band.".to_owned()),
    );
    let mut turns = BTreeMap::new();
    turns.insert("t1".to_owned(), message_id(11));
    turns.insert("t2".to_owned(), message_id(12));
    ProcessInput {
        raw_text: raw,
        context,
        turns,
        ..ProcessInput::default()
    }
}

/// The items as a model answers them; an item that names no evidence cites the user turn `t1`,
/// since an item without a citation of a user turn is dropped (`evidence.rs` covers that rule).
fn items_json(items: &[Value]) -> String {
    let cited = items
        .iter()
        .map(|item| {
            let mut item = item.clone();
            if let Some(fields) = item.as_object_mut() {
                fields.entry("evidence_turns").or_insert_with(|| json!(["t1"]));
            }
            item
        })
        .collect();
    Value::Array(cited).to_string()
}

/// The data-driven check: which texts are kept (in order) and which response indices are dropped for what.
fn check(name: &str, input: &ProcessInput<'_>, kept: &[&str], dropped: &[(usize, DropReason)]) -> ProcessOutput {
    let output = process(input);
    let kept_texts: Vec<&str> = output.items.iter().map(|item| item.text.as_str()).collect();
    assert_eq!(kept_texts, kept, "{name}: kept texts; drops were {:?}", output.dropped);
    let drops: Vec<(usize, DropReason)> = output.dropped.iter().map(|drop| (drop.index, drop.reason)).collect();
    assert_eq!(drops, dropped, "{name}: drops");
    assert_eq!(
        output.items.len() + output.dropped.len(),
        output.elements_parsed,
        "{name}: conservation"
    );
    assert_eq!(output.item_indices.len(), output.items.len(), "{name}: item indices");
    output
}

#[test]
fn every_drop_reason_is_recorded_and_the_rest_is_kept() {
    let long = "x".repeat(2001);
    let raw = items_json(&[
        json!(42),
        json!({"confidence": 0.5}),
        json!({"text": 12345678901u64}),
        json!({"text": "   \n  "}),
        json!({"text": "too short"}),
        json!({"text": long}),
        json!({"text": "Melanie is learning to paint landscapes."}),
        json!({"text": "melanie is learning to paint landscapes!"}),
        json!({"text": "Melanie is learning to paint landscape."}),
        json!({"text": "Caroline volunteers at the animal shelter every Saturday morning"}),
        json!({"text": "Caroline keeps an old diary from school."}),
    ]);
    let mut request = input(&raw);
    request
        .existing_keys
        .insert("caroline keeps an old diary from school".to_owned());
    let output = check(
        "reasons",
        &request,
        &["Melanie is learning to paint landscapes."],
        &[
            (0, DropReason::WrongType),
            (1, DropReason::MissingText),
            (2, DropReason::MissingText),
            (3, DropReason::MissingText),
            (4, DropReason::TooShort),
            (5, DropReason::TooLong),
            (7, DropReason::DuplicateInResponse),
            (8, DropReason::NearDuplicateInResponse),
            (9, DropReason::NearDuplicateOfKnown),
            (10, DropReason::DuplicateOfExisting),
        ],
    );
    let in_response = &output.dropped[6];
    assert_eq!(
        (in_response.duplicate_of_index, in_response.score),
        (Some(6), Some(1.0))
    );
    let near = &output.dropped[7];
    assert_eq!(near.duplicate_of_index, Some(6));
    assert!(near.score.is_some_and(|score| (0.95..1.0).contains(&score)), "{near:?}");
    let known = &output.dropped[8];
    assert_eq!(known.duplicate_of, Some(memory_id(1)));
    assert!(
        output.dropped[0]
            .detail
            .as_deref()
            .is_some_and(|detail| detail.contains("number"))
    );
    assert_eq!(output.parse_path, ParsePath::Strict);
}

#[test]
fn known_texts_beyond_the_context_are_deduped_against_too() {
    let raw = items_json(&[json!({"text": "Jon opened a dance studio downtown last year."})]);
    let mut request = input(&raw);
    request
        .known_texts
        .push((memory_id(7), "Jon opened a dance studio downtown last year".to_owned()));
    let output = check("known", &request, &[], &[(0, DropReason::NearDuplicateOfKnown)]);
    assert_eq!(output.dropped[0].duplicate_of, Some(memory_id(7)));
}

fn with_substitutions(base: &str, n: usize) -> String {
    base.chars()
        .enumerate()
        .map(|(at, c)| if at < n { if c == 'q' { 'z' } else { 'q' } } else { c })
        .collect()
}

#[test]
fn the_fuzzy_threshold_is_inclusive_at_exactly_095() {
    let base: String = "abcdefghij".repeat(10);
    assert_eq!(base.chars().count(), 100);
    let five = with_substitutions(&base, 5);
    let six = with_substitutions(&base, 6);
    assert!((fuzzy_ratio(&base, &five) - 0.95).abs() < 1e-12);
    assert!((fuzzy_ratio(&base, &six) - 0.94).abs() < 1e-12);

    let raw = items_json(&[json!({"text": base}), json!({"text": five}), json!({"text": six})]);
    check(
        "in response",
        &input(&raw),
        &[base.as_str(), six.as_str()],
        &[(1, DropReason::NearDuplicateInResponse)],
    );

    for (text, dropped) in [(five.as_str(), true), (six.as_str(), false)] {
        let raw = items_json(&[json!({"text": text})]);
        let mut request = input(&raw);
        request.known_texts.push((memory_id(9), base.clone()));
        let output = process(&request);
        assert_eq!(
            output.count_dropped(DropReason::NearDuplicateOfKnown),
            usize::from(dropped),
            "{text}"
        );
    }
}

#[test]
fn fuzzy_matching_ignores_case_and_spacing_but_not_punctuation_free_rewording() {
    let raw = items_json(&[json!({"text": "CAROLINE   volunteers at the animal shelter every saturday morning."})]);
    check("case", &input(&raw), &[], &[(0, DropReason::NearDuplicateOfKnown)]);
    let raw = items_json(&[json!({"text": "Caroline stopped volunteering at the animal shelter."})]);
    check(
        "different",
        &input(&raw),
        &["Caroline stopped volunteering at the animal shelter."],
        &[],
    );
}

#[test]
fn an_item_that_consolidates_known_memories_is_never_a_duplicate() {
    let raw = items_json(&[
        json!({"text": KNOWN_TEXT, "consolidates_memory_ids": ["ctx00001"]}),
        json!({"text": KNOWN_TEXT, "consolidates_memory_ids": ["nope0000"]}),
    ]);
    let output = check(
        "consolidates",
        &input(&raw),
        &[KNOWN_TEXT],
        &[(1, DropReason::DuplicateInResponse)],
    );
    assert_eq!(output.items[0].consolidates_memory_ids, vec![memory_id(1)]);
    assert_eq!(output.repairs.unknown_ids, 1);
}

#[test]
fn short_ids_map_back_and_unknown_ones_are_counted() {
    let full_second = memory_id(2).to_string();
    let raw = items_json(&[json!({
        "text": "Melanie switched from clarinet to saxophone.",
        "relationship_type": " Supersedes ",
        "related_memory_ids": ["ctx00002", "CTX00001", full_second, "deadbeef", 7, "ctx00002"],
    })]);
    let output = check(
        "ids",
        &input(&raw),
        &["Melanie switched from clarinet to saxophone."],
        &[],
    );
    let item = &output.items[0];
    assert_eq!(item.related_memory_ids, vec![memory_id(2), memory_id(1)]);
    assert_eq!(item.relationship_type.as_deref(), Some("supersedes"));
    assert_eq!(output.repairs.unknown_ids, 2);

    let raw = items_json(&[
        json!({"text": "Melanie switched from clarinet to saxophone.", "relationship_type": "supports"}),
        json!({"text": "Melanie bought a new saxophone reed.", "related_memory_ids": "ctx00002"}),
    ]);
    let output = process(&input(&raw));
    assert_eq!(output.items[0].relationship_type, None);
    assert_eq!(output.repairs.bad_relationship_type, 1);
    assert_eq!(output.items[1].related_memory_ids, vec![memory_id(2)]);
}

#[test]
fn linking_hints_follow_the_surviving_items() {
    let raw = items_json(&[
        json!({"text": "Jon lost his job at the bank.", "linking_hints": [1, 2, 0, true, 2.0, 99, 2, -1]}),
        json!({"text": "short"}),
        json!({"text": "Jon decided to open a dance studio.", "linking_hints": [0, 1]}),
        json!({"text": "Jon's dance studio opened in June.", "linking_hints": [2, 0]}),
    ]);
    let output = check(
        "hints",
        &input(&raw),
        &[
            "Jon lost his job at the bank.",
            "Jon decided to open a dance studio.",
            "Jon's dance studio opened in June.",
        ],
        &[(1, DropReason::TooShort)],
    );
    let hints: Vec<Vec<usize>> = output.items.iter().map(|item| item.linking_hints.clone()).collect();
    assert_eq!(hints, vec![vec![1], vec![0], vec![1, 0]]);
    // Self (0), true, 2.0, 99 and -1 on the first item.
    assert_eq!(output.repairs.bad_linking_hints, 5);
    assert_eq!(output.item_indices, vec![0, 2, 3]);
}

#[test]
fn a_cut_element_is_dropped_and_closed_ones_kept_whatever_the_stop_reason() {
    let complete = items_json(&[
        json!({"text": "Caroline moved to a new apartment."}),
        json!({"text": "Caroline adopted a second dog."}),
    ]);
    let mut request = input(&complete);
    // Stopped at max_tokens right after the array closed: nothing of any element was cut.
    request.stop_reason = Some(StopReason::MaxTokens);
    check(
        "max tokens after the last element closed",
        &request,
        &["Caroline moved to a new apartment.", "Caroline adopted a second dog."],
        &[],
    );
    let one = items_json(&[json!({"text": "Caroline adopted a second dog."})]);
    let one_open = one.trim_end().trim_end_matches(']');
    let mut request = input(one_open);
    request.stop_reason = Some(StopReason::MaxTokens);
    check(
        "one complete element, then the limit",
        &request,
        &["Caroline adopted a second dog."],
        &[],
    );
    let mut request = input(&complete);
    request.stop_reason = Some(StopReason::EndTurn);
    check(
        "end turn",
        &request,
        &["Caroline moved to a new apartment.", "Caroline adopted a second dog."],
        &[],
    );

    let cut = "[{\"text\": \"Caroline moved to a new apartment.\", \"evidence_turns\": [\"t1\"]}, {\"text\": \"Caroline adopted a sec";
    let output = check(
        "cut off",
        &input(cut),
        &["Caroline moved to a new apartment."],
        &[(1, DropReason::Truncated)],
    );
    assert!(output.cut_off);
    assert_eq!(output.parse_path, ParsePath::Repaired);
    let mut request = input(cut);
    request.stop_reason = Some(StopReason::MaxTokens);
    check(
        "both",
        &request,
        &["Caroline moved to a new apartment."],
        &[(1, DropReason::Truncated)],
    );
}

#[test]
fn an_unparseable_response_keeps_nothing_and_says_so() {
    let output = check("prose", &input("I could not find anything."), &[], &[]);
    assert!(output.unparseable);
    assert_eq!(output.parse_path, ParsePath::Unparseable);
    let output = check("empty", &input("[]"), &[], &[]);
    assert!(!output.unparseable);
}

#[test]
fn dates_are_read_in_the_users_offset_and_bad_ones_clear_only_the_field() {
    let raw = items_json(&[
        json!({"text": "Dentist appointment on Friday morning.", "happens_at": "2024-05-03T10:00:00",
               "expires_at": "2024-05-03"}),
        json!({"text": "Jon starts his new job next week.", "happens_at": "next week", "expires_at": 17}),
        json!({"text": "Flight to Lisbon leaves at noon.", "happens_at": "2024-05-03T12:00:00Z",
               "expires_at": "null"}),
    ]);
    let mut request = input(&raw);
    request.timezone_offset_minutes = 120;
    let output = check(
        "dates",
        &request,
        &[
            "Dentist appointment on Friday morning.",
            "Jon starts his new job next week.",
            "Flight to Lisbon leaves at noon.",
        ],
        &[],
    );
    let at = |index: usize| output.items[index].happens_at.map(|at| at.to_rfc3339());
    assert_eq!(at(0).as_deref(), Some("2024-05-03T08:00:00+00:00"));
    assert_eq!(
        output.items[0].expires_at.map(|at| at.to_rfc3339()).as_deref(),
        Some("2024-05-02T22:00:00+00:00")
    );
    assert_eq!(at(1), None);
    assert_eq!(at(2).as_deref(), Some("2024-05-03T12:00:00+00:00"));
    assert_eq!(output.items[2].expires_at, None);
    assert_eq!(output.repairs.bad_dates, 2);
}

#[test]
fn scalar_fields_are_normalized() {
    let raw = items_json(&[
        json!({"text": "Item with a word for confidence.", "confidence": "high", "sensitive": "TRUE",
               "temporal": "DURABLE"}),
        json!({"text": "Item with a boolean confidence.", "confidence": true, "sensitive": "maybe",
               "temporal": "sometimes"}),
        json!({"text": "Item with too much confidence.", "confidence": 1.7, "sensitive": false, "temporal": 3}),
        json!({"text": "Item with negative confidence.", "confidence": -1, "temporal": "unknown"}),
    ]);
    let output = process(&input(&raw));
    let confidences: Vec<f64> = output.items.iter().map(|item| item.confidence).collect();
    assert_eq!(confidences, vec![0.9, 0.9, 1.0, 0.0]);
    let sensitive: Vec<bool> = output.items.iter().map(|item| item.sensitive).collect();
    assert_eq!(sensitive, vec![true, false, false, false]);
    let temporal: Vec<Temporal> = output.items.iter().map(|item| item.temporal).collect();
    assert_eq!(
        temporal,
        vec![
            Temporal::Durable,
            Temporal::Unknown,
            Temporal::Unknown,
            Temporal::Unknown
        ]
    );
    assert_eq!(output.repairs.bad_confidence, 4);
    assert_eq!(output.repairs.bad_sensitive, 1);
    assert_eq!(output.repairs.bad_temporal, 2);
}

#[test]
fn private_phrases_mark_items_sensitive_whatever_the_model_said() {
    let raw = items_json(&[
        json!({"text": "Caroline lives in Boston with her partner.", "sensitive": false}),
        json!({"text": "Jon was diagnosed with asthma as a child."}),
        json!({"text": "Melanie says my husband loves hiking.", "sensitive": false}),
        json!({"text": "Caroline likes iced coffee with oat milk.", "sensitive": false}),
    ]);
    let output = process(&input(&raw));
    let sensitive: Vec<bool> = output.items.iter().map(|item| item.sensitive).collect();
    assert_eq!(sensitive, vec![true, true, true, false]);
    assert_eq!(output.repairs.sensitive_by_phrase, 3);
}

#[test]
fn entities_and_evidence_are_cleaned() {
    let raw = items_json(&[json!({
        "text": "Caroline met Jon at the Acme office in Boston.",
        "entities": [
            {"name": "  Caroline  ", "kind": "PERSON"},
            {"name": "caroline", "kind": "person"},
            {"name": "X", "kind": "person"},
            "Boston",
            {"name": "Acme", "type": "company"},
            {"kind": "pet"},
            {"name": "Jon", "kind": "wizard"},
        ],
        "evidence_turns": ["t1", "t9", "t1", " t2 ", 3],
    })]);
    let output = process(&input(&raw));
    let item = &output.items[0];
    let entities: Vec<(&str, &str)> = item
        .entities
        .iter()
        .map(|(name, kind)| (name.as_str(), kind.as_str()))
        .collect();
    assert_eq!(
        entities,
        vec![
            ("Caroline", "person"),
            ("Boston", "other"),
            ("Acme", "organization"),
            ("Jon", "other")
        ]
    );
    assert_eq!(output.repairs.bad_entities, 2);
    assert_eq!(item.evidence, vec![message_id(11), message_id(12)]);
    assert_eq!(output.repairs.evidence_outside_chunk, 2);
}

#[test]
fn texts_are_trimmed_collapsed_and_stripped_of_control_characters() {
    let raw = items_json(&[json!({"text": "  Likes\u{0} green\n\n tea\u{200B}  a lot "})]);
    let output = process(&input(&raw));
    assert_eq!(output.items[0].text, "Likes green tea a lot");
    assert_eq!(output.items[0].dedupe_key, "likes green tea a lot");
    assert_eq!(output.repairs.control_characters, 1);
}

fn unit(values: &[f32]) -> Vec<f32> {
    let norm = values.iter().map(|value| value * value).sum::<f32>().sqrt();
    values.iter().map(|value| value / norm).collect()
}

#[test]
fn the_vector_stage_drops_near_vectors_and_re_points_hints() {
    let raw = items_json(&[
        json!({"text": "Jon lost his job at the bank.", "linking_hints": [2, 3]}),
        json!({"text": "short"}),
        json!({"text": "Jon was let go by the bank.", "linking_hints": [0]}),
        json!({"text": "Jon now teaches salsa on weekends.", "linking_hints": [0]}),
        json!({"text": "Jon teaches salsa every weekend now.", "consolidates_memory_ids": ["ctx00002"]}),
        json!({"text": "Jon really enjoys teaching salsa classes."}),
    ]);
    let mut output = process(&input(&raw));
    assert_eq!(output.items.len(), 5);
    let vectors = vec![
        unit(&[1.0, 0.0, 0.0]),
        unit(&[0.95, 0.05, 0.0]),
        unit(&[0.0, 1.0, 0.0]),
        unit(&[0.0, 1.0, 0.0]),
        unit(&[0.0, 0.0, 1.0]),
    ];
    let neighbours = vec![
        vec![(memory_id(1), 0.5)],
        vec![],
        vec![],
        vec![(memory_id(2), 0.99)],
        vec![(memory_id(1), 0.91), (memory_id(2), VECTOR_DUPLICATE_THRESHOLD)],
    ];
    let (kept, drops) = dedupe_by_vectors(&output.items, &vectors, &neighbours, VECTOR_DUPLICATE_THRESHOLD);
    assert_eq!(kept, vec![0, 2, 3]);
    let summary: Vec<(usize, Option<usize>, Option<MemoryId>)> = drops
        .iter()
        .map(|drop| (drop.index, drop.duplicate_of_index, drop.duplicate_of))
        .collect();
    assert_eq!(summary, vec![(1, Some(0), None), (4, None, Some(memory_id(2)))]);
    assert!(
        drops
            .iter()
            .all(|drop| drop.reason == DropReason::DuplicateByVector && drop.score.is_some())
    );

    output.apply_vector_stage(&vectors, &neighbours, VECTOR_DUPLICATE_THRESHOLD);
    let texts: Vec<&str> = output.items.iter().map(|item| item.text.as_str()).collect();
    assert_eq!(
        texts,
        vec![
            "Jon lost his job at the bank.",
            "Jon now teaches salsa on weekends.",
            "Jon teaches salsa every weekend now."
        ]
    );
    assert_eq!(output.item_indices, vec![0, 3, 4]);
    let hints: Vec<Vec<usize>> = output.items.iter().map(|item| item.linking_hints.clone()).collect();
    assert_eq!(hints, vec![vec![1], vec![0], vec![]]);
    let vector_drops: Vec<(usize, Option<usize>)> = output
        .dropped
        .iter()
        .filter(|drop| drop.reason == DropReason::DuplicateByVector)
        .map(|drop| (drop.index, drop.duplicate_of_index))
        .collect();
    assert_eq!(vector_drops, vec![(2, Some(0)), (5, None)]);
    assert_eq!(output.items.len() + output.dropped.len(), output.elements_parsed);
}

#[test]
fn cosine_matches_the_dot_product_of_unit_vectors() {
    let a = unit(&[1.0, 2.0, 3.0]);
    let b = unit(&[3.0, 2.0, 1.0]);
    let dot: f32 = a.iter().zip(&b).map(|(x, y)| x * y).sum();
    assert!((cosine(&a, &b) - dot).abs() < 1e-6);
}

#[test]
fn a_near_duplicate_that_differs_by_an_accent_is_found() {
    // Non-ASCII and ASCII texts are summarized by different code paths; their histograms must agree on spaces,
    // or the bound rules this pair (ratio 0.98) out before the ratio is computed.
    let raw = items_json(&[json!({"text": "Zoë volunteers at the animal shelter every Saturday."})]);
    let mut request = input(&raw);
    request.known_texts.push((
        memory_id(8),
        "Zoe volunteers at the animal shelter every Saturday.".to_owned(),
    ));
    let output = check("accent", &request, &[], &[(0, DropReason::NearDuplicateOfKnown)]);
    assert_eq!(output.dropped[0].duplicate_of, Some(memory_id(8)));
}
