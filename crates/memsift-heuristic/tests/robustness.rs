//! Robustness of the heuristic lane: odd and random input never panics, and (when the shared
//! LoCoMo copy is present) real conversations extract without breaking the output invariants.

use std::path::Path;

use chrono::{DateTime, NaiveDateTime, TimeZone, Utc};
use memsift_core::contract::{ExtractedItem, Turn};
use memsift_core::status::Role;
use memsift_heuristic::{extract, extract_json};

fn user_turn(label: String, content: String) -> Turn {
    Turn {
        label,
        role: Role::User,
        speaker: None,
        content,
        at: Utc.with_ymd_and_hms(2024, 2, 29, 23, 59, 59).unwrap(),
    }
}

/// The invariants every output must keep, whatever the input.
fn assert_well_formed(items: &[ExtractedItem], labels: &[String]) {
    let mut texts: Vec<&str> = items.iter().map(|i| i.text.as_str()).collect();
    for item in items {
        assert!(item.text.chars().count() >= 10, "short text {:?}", item.text);
        assert!(!item.evidence_turns.is_empty());
        assert!(item.evidence_turns.iter().all(|label| labels.contains(label)));
        assert!((0.0..=1.0).contains(&item.confidence));
        if let Some(day) = &item.happens_at {
            assert!(chrono::NaiveDate::parse_from_str(day, "%Y-%m-%d").is_ok(), "{day}");
        }
    }
    let before = texts.len();
    texts.sort_unstable();
    texts.dedup();
    assert_eq!(before, texts.len(), "duplicate texts");
}

/// A small deterministic generator (xorshift64*) so the test needs no extra crate and any
/// failure reproduces exactly.
struct Generator(u64);

impl Generator {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn pick<'a>(&mut self, choices: &[&'a str]) -> &'a str {
        choices[(self.next() % choices.len() as u64) as usize]
    }
}

/// Fragments chosen to hit rule boundaries: pronouns, date words, punctuation, multi-byte text.
const FRAGMENTS: &[&str] = &[
    "I ",
    "I'm ",
    "my ",
    "me ",
    "live in ",
    "work at ",
    "love ",
    "hate ",
    "don't ",
    "never ",
    "always ",
    "call me ",
    "allergic to ",
    "named ",
    "dog ",
    "sister ",
    "Boston",
    "São Paulo",
    "Anna",
    "Rex",
    "next Monday",
    "tomorrow",
    "on Friday",
    "May 31",
    "February 30",
    "2026-02-29",
    "in 999 days",
    "every Monday",
    ".",
    "!",
    "?",
    ",",
    ";",
    "\n",
    " and ",
    " but ",
    "'",
    "’",
    "\"",
    "(",
    ")",
    "[",
    "]",
    "{",
    "}",
    "-",
    "—",
    "🙂",
    "👍🏽",
    "👨‍👩‍👧",
    "\u{0}",
    "\u{200B}",
    "\u{301}",
    "e\u{301}",
    "日本語",
    "עברית",
    "Ω",
    "ß",
    "İ",
    "  ",
    "\t",
    "3.12",
    "99999999999999999999",
    "is ",
    "a ",
    "the ",
    "s",
    "'s ",
    "I",
    "i",
    "M",
    "Y",
    "{S}",
    "{P}",
    "[",
    "$1",
    "\\",
    "%s",
];

#[test]
fn random_and_odd_strings_never_panic() {
    let mut generator = Generator(0x9E37_79B9_7F4A_7C15);
    for case in 0..3_000 {
        let length = generator.next() % 40;
        let content: String = (0..length).map(|_| generator.pick(FRAGMENTS)).collect();
        let turns = vec![user_turn(format!("t{case}"), content.clone())];
        let items = extract(&turns);
        assert_well_formed(&items, &[format!("t{case}")]);
        assert_eq!(extract(&turns), items, "not deterministic for {content:?}");
        let _ = extract_json(&turns);
    }
}

#[test]
fn huge_and_degenerate_inputs_never_panic() {
    let huge = "I live in Boston and I love jazz. ".repeat(20_000);
    let long_sentence = "I love ".to_owned() + &"very ".repeat(50_000);
    let inputs = [
        huge,
        long_sentence,
        "\u{0}".repeat(1_000),
        "🙂".repeat(10_000),
        ".".repeat(10_000),
        "I'm ".repeat(10_000),
        String::from("\u{FEFF}I live in Zürich\u{FEFF}"),
    ];
    for (index, content) in inputs.into_iter().enumerate() {
        let label = format!("h{index}");
        let items = extract(&[user_turn(label.clone(), content)]);
        assert_well_formed(&items, &[label]);
    }
}

/// A small file in the LoCoMo benchmark's shape, written for this project (`fixtures/`).
fn locomo_path() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/locomo-format.json")
}

/// Parses LoCoMo session times such as `1:56 pm on 8 May, 2023`.
fn locomo_time(text: &str) -> Option<DateTime<Utc>> {
    let normalised = text.trim().to_uppercase();
    NaiveDateTime::parse_from_str(&normalised, "%I:%M %p ON %d %B, %Y")
        .ok()
        .map(|time| time.and_utc())
}

#[test]
fn locomo_shaped_conversations_extract_without_breaking_invariants() {
    let path = locomo_path();
    let raw = std::fs::read_to_string(&path).unwrap_or_else(|error| panic!("{}: {error}", path.display()));
    let samples: Vec<serde_json::Value> = serde_json::from_str(&raw).expect("locomo8.json is a JSON list");
    let (mut turn_count, mut item_count, mut sessions) = (0_usize, 0_usize, 0_usize);
    for sample in &samples {
        let Some(conversation) = sample.get("conversation").and_then(|c| c.as_object()) else {
            continue;
        };
        for session in 1..100 {
            let Some(messages) = conversation
                .get(&format!("session_{session}"))
                .and_then(|s| s.as_array())
            else {
                continue;
            };
            let at = conversation
                .get(&format!("session_{session}_date_time"))
                .and_then(|t| t.as_str())
                .and_then(locomo_time)
                .expect("every LoCoMo session has a parseable date");
            let turns: Vec<Turn> = messages
                .iter()
                .map(|message| Turn {
                    label: message["dia_id"].as_str().unwrap_or_default().to_owned(),
                    role: Role::User,
                    speaker: message["speaker"].as_str().map(str::to_owned),
                    content: message["text"].as_str().unwrap_or_default().to_owned(),
                    at,
                })
                .collect();
            let labels: Vec<String> = turns.iter().map(|turn| turn.label.clone()).collect();
            let items = extract(&turns);
            assert_well_formed(&items, &labels);
            turn_count += turns.len();
            item_count += items.len();
            sessions += 1;
        }
    }
    println!(
        "LoCoMo: {} conversations, {sessions} sessions, {turn_count} turns -> {item_count} items",
        samples.len()
    );
    assert_eq!(sessions, 3, "every session of the fixture is read");
}
