//! The 22 LLM-output samples the parser was first chosen on, as a regression test of reading damaged and cut output.

use memsift_processor::{ParsePath, parse_response};
use serde_json::{Value, json};

struct Sample {
    name: &'static str,
    raw: &'static str,
    expected: Value,
    cut_off: bool,
}

fn samples() -> Vec<Sample> {
    let one = json!([{"text": "a"}]);
    vec![
        Sample {
            name: "01 fenced json",
            raw: "```json\n[{\"text\": \"a\"}]\n```",
            expected: one.clone(),
            cut_off: false,
        },
        Sample {
            name: "02 prose + fence + prose",
            raw: "Here you go:\n```json\n[{\"text\": \"a\"}]\n```\nHope that helps, {really}!",
            expected: one.clone(),
            cut_off: false,
        },
        Sample {
            name: "03 prose, no fence",
            raw: "Sure! [{\"text\": \"a\"}] Let me know: anything else, just ask.",
            expected: one.clone(),
            cut_off: false,
        },
        Sample {
            name: "04 trailing commas",
            raw: "[{\"text\": \"a\", \"n\": 1,},]",
            expected: json!([{"text": "a", "n": 1}]),
            cut_off: false,
        },
        Sample {
            name: "05 single quotes",
            raw: "[{'text': 'a b', 'temporal': 'durable'}]",
            expected: json!([{"text": "a b", "temporal": "durable"}]),
            cut_off: false,
        },
        Sample {
            name: "06 unquoted keys",
            raw: "[{text: \"a\", confidence: 0.5}]",
            expected: json!([{"text": "a", "confidence": 0.5}]),
            cut_off: false,
        },
        Sample {
            name: "07 comments",
            raw: "[ // the only memory\n{\"text\": \"a\" /* [sic] */}]",
            expected: one.clone(),
            cut_off: false,
        },
        Sample {
            name: "08 python literals",
            raw: "[{\"text\": \"a\", \"sensitive\": True, \"flag\": False, \"happens_at\": None}]",
            expected: json!([{"text": "a", "sensitive": true, "flag": false, "happens_at": null}]),
            cut_off: false,
        },
        Sample {
            name: "09 missing comma",
            raw: "[{\"text\": \"a\"} {\"text\": \"b\"}]",
            expected: json!([{"text": "a"}, {"text": "b"}]),
            cut_off: false,
        },
        Sample {
            name: "10 raw newline in string",
            raw: "[{\"text\": \"line one\nline two\"}]",
            expected: json!([{"text": "line one\nline two"}]),
            cut_off: false,
        },
        Sample {
            name: "11 unescaped inner quotes",
            raw: "[{\"text\": \"He said \"hi\" to me\"}]",
            expected: json!([{"text": "He said \"hi\" to me"}]),
            cut_off: false,
        },
        Sample {
            name: "12 truncated mid-string",
            raw: "[{\"text\": \"abc\", \"n\": 1}, {\"text\": \"trunc",
            expected: json!([{"text": "abc", "n": 1}, {"text": "trunc"}]),
            cut_off: true,
        },
        Sample {
            name: "13 truncated mid-key",
            raw: "[{\"text\": \"abc\"}, {\"text\": \"def\", \"conf",
            // The cut key survives as a key with no value; the item is dropped as truncated by `process` anyway.
            expected: json!([{"text": "abc"}, {"text": "def", "conf": null}]),
            cut_off: true,
        },
        Sample {
            name: "14 truncated fence",
            raw: "```json\n[{\"text\": \"a\"}, {\"text\": \"b\"",
            expected: json!([{"text": "a"}, {"text": "b"}]),
            cut_off: true,
        },
        Sample {
            name: "15 smart quotes",
            raw: "[{\u{201c}text\u{201d}: \u{201c}a\u{201d}}]",
            expected: one.clone(),
            cut_off: false,
        },
        Sample {
            name: "16 thinking block and fence",
            raw: "<thinking>Which [facts] matter? {none} maybe</thinking>\n```json\n[{\"text\": \"a\"}]\n```",
            expected: one.clone(),
            cut_off: false,
        },
        Sample {
            name: "17 valid unicode untouched",
            raw: "[{\"text\": \"Zoë likes café ☕ — 日本 \\u00e9\"}]",
            expected: json!([{"text": "Zoë likes café ☕ — 日本 é"}]),
            cut_off: false,
        },
        Sample {
            name: "18 truncated after colon",
            raw: "[{\"text\": \"a\", \"confidence\":",
            expected: json!([{"text": "a", "confidence": null}]),
            cut_off: true,
        },
        Sample {
            name: "19 extra closing brace",
            raw: "[{\"text\": \"a\"}]}",
            expected: one.clone(),
            cut_off: false,
        },
        Sample {
            name: "20 truncated mid-number in array",
            raw: "[{\"text\": \"a\", \"linking_hints\": [1, 23",
            expected: json!([{"text": "a", "linking_hints": [1, 23]}]),
            cut_off: true,
        },
        Sample {
            name: "21 single-quoted value with a comma",
            raw: "[{'text': 'a, b and c', 'n': 2}]",
            expected: json!([{"text": "a, b and c", "n": 2}]),
            cut_off: false,
        },
        Sample {
            name: "22 valid JSON with a fence and braces inside a string",
            raw: "[{\"text\": \"wrap it in ```json {} ``` please\"}]",
            expected: json!([{"text": "wrap it in ```json {} ``` please"}]),
            cut_off: false,
        },
    ]
}

#[test]
fn all_22_samples_parse_to_the_expected_values() {
    let mut failures = Vec::new();
    for sample in samples() {
        let parsed = parse_response(sample.raw);
        let got = Value::Array(parsed.elements.iter().map(|element| element.to_json()).collect());
        if got != sample.expected || parsed.cut_off != sample.cut_off {
            failures.push(format!(
                "{}: got {got} (cut_off {}, path {:?}), expected {} (cut_off {})",
                sample.name, parsed.cut_off, parsed.path, sample.expected, sample.cut_off
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of 22 samples failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn the_path_taken_is_recorded() {
    let cases = [
        ("[{\"text\": \"a\"}]", ParsePath::Strict),
        ("{\"memories\": [{\"text\": \"a\"}]}", ParsePath::Strict),
        ("```json\n[{\"text\": \"a\"}]\n```", ParsePath::Prepass),
        ("Sure: [{\"text\": \"a\"}] done.", ParsePath::Prepass),
        ("[{\"text\": \"a\",},]", ParsePath::Repaired),
        ("[{'text': 'a'}]", ParsePath::Repaired),
        ("", ParsePath::Empty),
        ("  \n ", ParsePath::Empty),
        ("<thinking>nothing worth keeping</thinking>", ParsePath::Empty),
        ("I found nothing worth remembering.", ParsePath::Unparseable),
        ("42", ParsePath::Unparseable),
        (
            "[{\"text\": \"a\"}, (and one more:) {\"text\": \"b\"}]",
            ParsePath::Salvaged,
        ),
        ("[{\"text\": \"a\"}, [truncated]", ParsePath::Salvaged),
        ("[{\"text\": \"a\"}, {\"text\": \"b\"", ParsePath::Repaired),
    ];
    for (raw, expected) in cases {
        assert_eq!(parse_response(raw).path, expected, "{raw:?}");
    }
}

#[test]
fn shapes_other_than_an_array_are_accepted() {
    let single = parse_response("{\"text\": \"a single memory\"}");
    assert_eq!(single.elements.len(), 1);
    let wrapped = parse_response("{\"memories\": [{\"text\": \"x\"}, {\"text\": \"y\"}]}");
    assert_eq!(wrapped.elements.len(), 2);
    let empty = parse_response("{\"memories\": null}");
    assert!(empty.elements.is_empty());
    let double_encoded = parse_response("\"[{\\\"text\\\": \\\"a\\\"}]\"");
    assert_eq!(double_encoded.elements.len(), 1);
    assert_eq!(parse_response("[]").elements.len(), 0);
}

#[test]
fn notes_inside_a_list_are_passed_over_and_only_an_unclosed_element_counts_as_cut() {
    let texts = |raw: &str| -> Vec<String> {
        parse_response(raw)
            .elements
            .iter()
            .map(|element| element.to_json()["text"].as_str().unwrap_or("?").to_owned())
            .collect()
    };
    assert_eq!(
        texts("[{\"text\": \"a\"}, (and one more:) {\"text\": \"b\"}]"),
        ["a", "b"]
    );

    let cut_between = parse_response("[{\"text\": \"a\"}, [truncated]");
    assert_eq!(cut_between.elements.len(), 1);
    assert!(cut_between.cut_off && !cut_between.last_element_cut);

    let cut_inside = parse_response("[{\"text\": \"a\"}, {\"text\": \"b\", \"conf\n(output truncated)");
    assert_eq!(cut_inside.elements.len(), 2);
    assert!(cut_inside.cut_off && cut_inside.last_element_cut);
}
