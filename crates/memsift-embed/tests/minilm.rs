//! Tests that need the real all-MiniLM-L6-v2 files; kept apart so the crate's other tests do not.
//!
//! The model directory is `MEMSIFT_MODEL_DIR`, else `~/.local/share/memsift/models/all-MiniLM-L6-v2`;
//! when the files are missing or altered the tests install them with the pinned, verified install
//! `memsift model install` and `scripts/install-model.sh` use, so `cargo test --workspace` works on
//! a fresh machine. If that fails they fail, never skip.

use std::path::PathBuf;
use std::sync::OnceLock;

use memsift_embed::{
    Embedder, MINILM_DIMENSION, MINILM_MODEL_ID, MiniLmEmbedder, StaticEmbedder, cosine, distill_static_vocab_slice,
};

fn model_dir() -> PathBuf {
    let dest = memsift_embed::model::default_model_dir();
    match memsift_embed::model::install(&dest) {
        Ok(installed) => installed.dir,
        Err(error) => panic!("the MiniLM model is needed at {}: {error}", dest.display()),
    }
}

/// Loaded once: each load reads 90 MB.
fn minilm() -> &'static MiniLmEmbedder {
    static MODEL: OnceLock<MiniLmEmbedder> = OnceLock::new();
    MODEL.get_or_init(|| MiniLmEmbedder::load(&model_dir()).expect("the model loads"))
}

fn pair_cosine(embedder: &dyn Embedder, a: &str, b: &str) -> f32 {
    let vectors = embedder.embed(&[a, b]).unwrap();
    cosine(&vectors[0], &vectors[1])
}

#[test]
fn the_reference_cosines_match_sentence_transformers() {
    let model = minilm();
    assert_eq!(model.model_id(), MINILM_MODEL_ID);
    assert_eq!(model.dimension(), MINILM_DIMENSION);
    for (a, b, expected) in [
        ("The new movie is awesome", "The new movie is so great", 0.8939),
        ("The cat sits outside", "The dog plays in the garden", 0.2838),
        ("A man is playing guitar", "A woman watches TV", -0.0327),
    ] {
        let measured = pair_cosine(model, a, b);
        assert!(
            (measured - expected).abs() < 5e-4,
            "cos({a:?}, {b:?}) = {measured}, expected {expected}"
        );
    }
}

#[test]
fn hello_world_matches_the_published_vector() {
    let vector = &minilm().embed(&["hello world"]).unwrap()[0];
    let expected = [-0.03448_f32, 0.03102, 0.00673, 0.02611, -0.03936];
    for (index, (got, want)) in vector.iter().zip(expected).enumerate() {
        assert!((got - want).abs() < 5e-5, "component {index}: {got} vs {want}");
    }
    let norm: f32 = vector.iter().map(|x| x * x).sum::<f32>().sqrt();
    assert!((norm - 1.0).abs() < 1e-5);
}

#[test]
fn a_vector_does_not_depend_on_what_else_is_in_the_batch() {
    // With the tokenizer's fixed padding, or an unmasked mean, a short text's vector would change
    // with the longest text in its batch.
    let model = minilm();
    let alone = model.embed(&["I like tea"]).unwrap().remove(0);
    let batched = model
        .embed(&[
            "My sister moved to Lisbon last spring and now works remotely for a small design studio",
            "I like tea",
        ])
        .unwrap()
        .remove(1);
    assert!(cosine(&alone, &batched) > 0.99999, "{}", cosine(&alone, &batched));
}

#[test]
fn a_static_table_distilled_from_a_vocab_slice_loads_and_embeds() {
    let model = minilm();
    let out = tempfile::tempdir().unwrap();
    // The first 3000 ids cover the special tokens and common short words; enough to check the
    // pipeline end to end without the 35 s full distillation.
    let report = distill_static_vocab_slice(model, out.path(), 64, 3000).unwrap();
    assert_eq!(report.rows, 3000);
    assert_eq!(report.dimension, 64);
    assert!(report.model_id.contains("slice3000"), "{}", report.model_id);

    let table = StaticEmbedder::load(out.path()).unwrap();
    assert_eq!(table.model_id(), report.model_id);
    assert_eq!(table.dimension(), 64);
    let vectors = table.embed(&["the man is here", "the man was there", "!!!"]).unwrap();
    let norm: f32 = vectors[0].iter().map(|x| x * x).sum::<f32>().sqrt();
    assert!((norm - 1.0).abs() < 1e-4, "{norm}");
    assert!(
        cosine(&vectors[0], &vectors[1]) > 0.3,
        "{}",
        cosine(&vectors[0], &vectors[1])
    );
    // Same texts, same table: deterministic.
    assert_eq!(table.embed(&["the man is here"]).unwrap()[0], vectors[0]);
}
