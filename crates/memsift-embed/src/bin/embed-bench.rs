//! Embedding throughput (sentences per second) of each embedder on ~200 memory-like sentences.
//!
//! `cargo run --release -p memsift-embed --bin embed-bench -- [--model-dir DIR] [--static-dir DIR]`
//! MiniLM runs when a model directory is given or `MEMSIFT_MODEL_DIR` is set. The static tier runs
//! from `--static-dir`, or is distilled first into that directory when it holds no table yet.
//! Prints figures only: nothing here asserts on time.

use std::path::PathBuf;
use std::time::Instant;

use memsift_embed::{Embedder, HashingEmbedder, MiniLmEmbedder, StaticEmbedder, cosine, distill_static};

const SUBJECTS: [&str; 20] = [
    "The user",
    "Ana",
    "My sister Clara",
    "Her husband Tom",
    "The user's manager",
    "Our neighbour Raj",
    "The user's son Leo",
    "My friend Mei",
    "The landlord",
    "Grandma Rosa",
    "The user's partner",
    "Dr. Okafor",
    "The cat Miso",
    "The team lead",
    "My cousin Jonas",
    "The user's daughter",
    "Their dentist",
    "The piano teacher",
    "Coach Alvarez",
    "The new roommate",
];

const FACTS: [&str; 10] = [
    "is vegetarian and avoids eating meat at family dinners",
    "moved to Lisbon last spring and works remotely for a startup",
    "is allergic to peanuts and always carries an epinephrine pen",
    "prefers to be contacted by email rather than by phone",
    "runs a half marathon every October and trains on weekends",
    "has a dentist appointment next Tuesday at 3 pm",
    "is learning Japanese and practises for twenty minutes a day",
    "drinks oat milk in coffee and dislikes sweet drinks",
    "plans a trip to Kyoto in April to see the cherry blossoms",
    "is saving for a house and wants to keep monthly spending under 2000 euros",
];

fn sentences() -> Vec<String> {
    SUBJECTS
        .iter()
        .flat_map(|subject| FACTS.iter().map(move |fact| format!("{subject} {fact}.")))
        .collect()
}

/// Sentences per second over `rounds` passes, after one warm-up pass.
fn throughput(embedder: &dyn Embedder, texts: &[&str], rounds: usize) -> f64 {
    embedder.embed(texts).expect("warm-up embedding succeeds");
    let start = Instant::now();
    for _ in 0..rounds {
        embedder.embed(texts).expect("embedding succeeds");
    }
    (texts.len() * rounds) as f64 / start.elapsed().as_secs_f64()
}

fn report(embedder: &dyn Embedder, texts: &[&str], rounds: usize) {
    let rate = throughput(embedder, texts, rounds);
    println!(
        "embedder={} dim={} sentences={} rounds={rounds} sentences_per_s={rate:.0}",
        embedder.model_id(),
        embedder.dimension(),
        texts.len()
    );
}

fn reference_cosines(embedder: &dyn Embedder) {
    for (a, b) in [
        ("The new movie is awesome", "The new movie is so great"),
        ("The cat sits outside", "The dog plays in the garden"),
        ("A man is playing guitar", "A woman watches TV"),
    ] {
        let vectors = embedder.embed(&[a, b]).expect("embedding succeeds");
        println!(
            "  {}: cos({a:?}, {b:?}) = {:.4}",
            embedder.model_id(),
            cosine(&vectors[0], &vectors[1])
        );
    }
}

fn main() {
    let mut model_dir = std::env::var_os("MEMSIFT_MODEL_DIR").map(PathBuf::from);
    let mut static_dir: Option<PathBuf> = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--model-dir" => model_dir = args.next().map(PathBuf::from),
            "--static-dir" => static_dir = args.next().map(PathBuf::from),
            other => {
                eprintln!("unknown argument {other}; usage: embed-bench [--model-dir DIR] [--static-dir DIR]");
                std::process::exit(2);
            }
        }
    }
    let owned = sentences();
    let texts: Vec<&str> = owned.iter().map(String::as_str).collect();

    report(&HashingEmbedder::new(), &texts, 200);

    let Some(model_dir) = model_dir else {
        println!("MiniLM and static skipped: set MEMSIFT_MODEL_DIR (run scripts/install-model.sh)");
        return;
    };
    let load_start = Instant::now();
    let minilm = MiniLmEmbedder::load(&model_dir).expect("the model directory loads");
    println!("minilm_load_ms={:.0}", load_start.elapsed().as_secs_f64() * 1e3);
    report(&minilm, &texts, 3);
    reference_cosines(&minilm);

    let Some(static_dir) = static_dir else {
        println!("static skipped: pass --static-dir DIR (distilled there if empty)");
        return;
    };
    if !static_dir.join("model.safetensors").is_file() {
        let start = Instant::now();
        let distilled = distill_static(&minilm, &static_dir, minilm.dimension()).expect("distillation succeeds");
        println!(
            "distilled {} rows into {} in {:.1} s",
            distilled.rows,
            distilled.dir.display(),
            start.elapsed().as_secs_f64()
        );
    }
    let static_model = StaticEmbedder::load(&static_dir).expect("the static table loads");
    report(&static_model, &texts, 500);
    reference_cosines(&static_model);
}
