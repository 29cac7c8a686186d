//! Scratch timing of individual stages (not committed).
use std::time::Instant;
fn main() {
    let corpus = std::fs::read_to_string("/tmp/responses.jsonl").unwrap();
    let lines: Vec<serde_json::Value> = corpus
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .collect();
    let mut pairs = 0;
    let mut len_pass = 0;
    let mut full = 0;
    let mut maxs = 0.0f64;
    for line in &lines {
        let items: Vec<String> = memsift_processor::parse_response(line["response_text"].as_str().unwrap())
            .elements
            .iter()
            .filter_map(|e| e.get("text").and_then(|t| t.as_str()).map(str::to_owned))
            .collect();
        for (_, ctx) in line["context"].as_object().unwrap() {
            let c = memsift_processor::normalize_for_fuzzy(ctx.as_str().unwrap());
            for it in &items {
                let i = memsift_processor::normalize_for_fuzzy(it);
                pairs += 1;
                let (a, b) = (c.chars().count(), i.chars().count());
                if a.abs_diff(b) as f64 <= 0.05 * a.max(b) as f64 {
                    len_pass += 1;
                    if memsift_processor::FuzzyText::new(&c)
                        .similarity_at_least(&memsift_processor::FuzzyText::new(&i), 0.0)
                        .is_some()
                    {
                        full += 1;
                    }
                    maxs = maxs.max(memsift_processor::fuzzy_ratio(&c, &i));
                }
            }
        }
    }
    println!("pairs={pairs} len_pass={len_pass} max={maxs}");
    let t = Instant::now();
    let mut n = 0;
    for line in &lines {
        let text = line["response_text"].as_str().unwrap();
        n += memsift_processor::parse_response(text).elements.len();
    }
    println!("parse_response: {n} {:.4}s", t.elapsed().as_secs_f64());
}
