//! Deterministic feature hashing: the test double, never a silent default.
//!
//! Purely lexical: it knows no synonyms and scores unrelated sentences that share words at
//! 0.2–0.4, so it serves tests and a labelled last-resort demo, not semantic search.

use crate::{EmbedError, Embedder, check_not_empty, l2_normalize};

/// The model id stored with hashing vectors, so they are never mistaken for a real model's.
pub const HASHING_MODEL_ID: &str = "hashing-384-v1";
/// The number of buckets.
pub const HASHING_DIMENSION: usize = 384;

/// Word unigrams plus character 3–5-grams of `<word>`, FNV-1a into 384 signed buckets.
#[derive(Clone, Copy, Debug, Default)]
pub struct HashingEmbedder;

impl HashingEmbedder {
    /// The embedder (it has no state).
    pub fn new() -> Self {
        HashingEmbedder
    }

    fn embed_text(text: &str) -> Vec<f32> {
        let mut vector = vec![0.0_f32; HASHING_DIMENSION];
        let lower = text.to_lowercase();
        for word in lower
            .split(|c: char| !c.is_alphanumeric())
            .filter(|word| !word.is_empty())
        {
            add_feature(&mut vector, b"w:", word.as_bytes());
            let marked: Vec<char> = std::iter::once('<')
                .chain(word.chars())
                .chain(std::iter::once('>'))
                .collect();
            for width in 3..=5 {
                for gram in marked.windows(width) {
                    let gram: String = gram.iter().collect();
                    add_feature(&mut vector, b"c:", gram.as_bytes());
                }
            }
        }
        l2_normalize(&mut vector);
        vector
    }
}

/// Adds ±1 to the feature's bucket; the sign bit halves the bias collisions would add.
fn add_feature(vector: &mut [f32], namespace: &[u8], feature: &[u8]) {
    let hash = fnv1a(namespace.iter().chain(feature));
    let bucket = (hash % HASHING_DIMENSION as u64) as usize;
    let sign = if hash >> 63 == 0 { 1.0 } else { -1.0 };
    vector[bucket] += sign;
}

fn fnv1a<'a>(bytes: impl Iterator<Item = &'a u8>) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in bytes {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash
}

impl Embedder for HashingEmbedder {
    fn model_id(&self) -> &str {
        HASHING_MODEL_ID
    }

    fn dimension(&self) -> usize {
        HASHING_DIMENSION
    }

    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        check_not_empty(texts)?;
        Ok(texts.iter().map(|text| Self::embed_text(text)).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cosine;

    #[test]
    fn vectors_are_deterministic_unit_length_and_lexical() {
        let embedder = HashingEmbedder::new();
        let vectors = embedder
            .embed(&[
                "I adopted a cat named Miso",
                "i ADOPTED a cat named miso!",
                "The quarterly tax filing is due in April",
            ])
            .unwrap();
        assert_eq!(vectors[0].len(), HASHING_DIMENSION);
        let norm: f32 = vectors[0].iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-5, "{norm}");
        assert!(
            (cosine(&vectors[0], &vectors[1]) - 1.0).abs() < 1e-5,
            "case and punctuation do not matter"
        );
        assert!(cosine(&vectors[0], &vectors[2]) < 0.5);
        assert_eq!(embedder.embed(&["I adopted a cat named Miso"]).unwrap()[0], vectors[0]);
    }

    #[test]
    fn the_model_id_says_it_is_a_double() {
        let embedding = HashingEmbedder::new().embed_one("hello").unwrap();
        assert_eq!(embedding.model_id, "hashing-384-v1");
        assert_eq!(embedding.dimension(), 384);
    }

    #[test]
    fn empty_texts_are_rejected_with_their_position() {
        let error = HashingEmbedder::new().embed(&["fine", "  "]).unwrap_err();
        assert!(matches!(error, EmbedError::EmptyText { index: 1 }), "{error}");
    }
}
