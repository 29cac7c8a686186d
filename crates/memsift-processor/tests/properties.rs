//! Property tests: `process` never panics, conserves elements, and the fast exact key equals memsift-core's.

use memsift_core::text::dedupe_key;
use std::collections::HashSet;

use memsift_processor::{ParsePath, ProcessInput, StopReason, candidate_keys, parse_response, process};
use proptest::prelude::*;
use serde_json::{Value, json};

fn valid_response(texts: &[String]) -> String {
    let items: Vec<Value> = texts
        .iter()
        .enumerate()
        .map(|(index, text)| {
            json!({
                "text": text, "confidence": 0.8, "happens_at": null, "expires_at": "2025-01-01",
                "sensitive": index % 2 == 0, "temporal": "durable", "relationship_type": null,
                "related_memory_ids": ["abcd1234"], "consolidates_memory_ids": [],
                "linking_hints": [index.saturating_sub(1)], "entities": [{"name": "Caroline", "kind": "PERSON"}],
                "evidence_turns": ["D1:3"],
            })
        })
        .collect();
    Value::Array(items).to_string()
}

fn assert_conserved(raw: &str, stop_reason: Option<StopReason>) {
    let input = ProcessInput {
        raw_text: raw,
        stop_reason,
        ..ProcessInput::default()
    };
    let output = process(&input);
    assert_eq!(
        output.items.len() + output.dropped.len(),
        output.elements_parsed,
        "{raw:?}"
    );
    for item in &output.items {
        assert!(item.linking_hints.iter().all(|&hint| hint < output.items.len()));
        assert!((0.0..=1.0).contains(&item.confidence));
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, .. ProptestConfig::default() })]

    #[test]
    fn arbitrary_text_never_panics(raw in ".{0,300}") {
        assert_conserved(&raw, None);
    }

    #[test]
    fn the_parser_alone_never_panics_on_wrapped_noise(
        prose in ".{0,40}",
        body in r#"[\[\]{}",:'a-z0-9 \n\\`<>/*“”]{0,200}"#,
        wrapper in 0usize..4,
    ) {
        // The wrappers steer the noise into the pre-pass and the repairer, which plain noise rarely reaches.
        let raw = match wrapper {
            0 => body.clone(),
            1 => format!("{prose}\n```json\n{body}"),
            2 => format!("<thinking>{prose}</thinking>{body}"),
            _ => format!("{prose} [{body}"),
        };
        let parsed = parse_response(&raw);
        prop_assert!(parsed.path != ParsePath::Unparseable || parsed.elements.is_empty());
    }

    #[test]
    fn json_like_noise_never_panics(raw in r#"[\[\]{}",:'a-z0-9 \n\\`<>/*]{0,200}"#) {
        assert_conserved(&raw, Some(StopReason::MaxTokens));
    }

    #[test]
    fn truncations_of_valid_output_never_panic_and_never_keep_the_cut_item(
        texts in prop::collection::vec("[A-Za-z ]{12,60}", 1..6),
        cut_fraction in 0.0f64..1.0,
        fenced in any::<bool>(),
    ) {
        let full = valid_response(&texts);
        let raw = if fenced { format!("```json\n{full}\n```") } else { full };
        let mut cut = ((raw.len() as f64) * cut_fraction) as usize;
        while !raw.is_char_boundary(cut) {
            cut -= 1;
        }
        let truncated = &raw[..cut];
        assert_conserved(truncated, None);
        // Whatever survives from a cut response is a whole text of the original, never a prefix of one.
        let output = process(&ProcessInput { raw_text: truncated, ..ProcessInput::default() });
        for item in &output.items {
            prop_assert!(texts.iter().any(|text| memsift_core::text::collapse_whitespace(text) == item.text),
                "kept a partial text {:?} from {:?}", item.text, truncated);
        }
    }

    #[test]
    fn reading_only_the_candidate_keys_answers_as_reading_every_key(
        // A small space of sentences, so the answer's items and the stored keys often meet.
        texts in prop::collection::vec("(Ana|Bo) (lives|lived|works) in (Oslo|Lima|Rome)( now)?[.!]?", 1..8),
        stored in prop::collection::vec("(Ana|Bo) (lives|lived|works) in (Oslo|Lima|Rome)( now)?[.!]?", 0..8),
        unrelated in prop::collection::vec("[a-z ]{3,20}", 0..5),
    ) {
        let raw = valid_response(&texts);
        let every_key: HashSet<String> = stored.iter().map(|text| dedupe_key(text)).chain(unrelated).collect();
        let input = ProcessInput { raw_text: &raw, existing_keys: every_key.clone(), ..ProcessInput::default() };
        let candidates = candidate_keys(&input);
        let read: HashSet<String> = every_key.iter().filter(|key| candidates.contains(*key)).cloned().collect();
        prop_assert_eq!(process(&input), process(&ProcessInput { existing_keys: read, ..input.clone() }));
    }

    #[test]
    fn the_fast_exact_key_matches_core(text in "[ -~]{0,80}|\\PC{0,40}") {
        let raw = Value::Array(vec![json!({"text": format!("{text} padding words")})]).to_string();
        let output = process(&ProcessInput { raw_text: &raw, ..ProcessInput::default() });
        for item in &output.items {
            prop_assert_eq!(&item.dedupe_key, &dedupe_key(&item.text));
        }
    }
}
