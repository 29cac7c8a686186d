//! The `Embedder` trait and its implementations: MiniLM in-process, a distilled static table, an
//! OpenAI-compatible endpoint, and a feature-hashing test double.
//!
//! **Why the trait is synchronous.** Three of the four embedders are CPU-bound (a transformer
//! forward pass, a table lookup, hashing), and a synchronous trait keeps them free of any runtime.
//! Callers on tokio run them through `tokio::task::spawn_blocking`, which is where a 100 ms forward
//! pass belongs anyway. The HTTP embedder drives its async client with the runtime handle it was
//! built with, so it too is called from `spawn_blocking` (or any thread outside the runtime) and
//! also offers `embed_async` for callers that are already async.
//!
//! Every vector an embedder returns is L2-normalized, so cosine similarity is a dot product, and
//! every embedder names its model and dimension so a stored vector can be checked against the
//! embedder that would compare with it.

#![deny(missing_docs)]

mod hashing;
mod http;
mod minilm;
pub mod model;
mod static_model;

pub use hashing::{HASHING_DIMENSION, HASHING_MODEL_ID, HashingEmbedder};
pub use http::HttpEmbedder;
pub use minilm::{MINILM_DIMENSION, MINILM_MODEL_ID, MiniLmEmbedder};
pub use static_model::{DistillReport, StaticEmbedder, distill_static, distill_static_vocab_slice};

/// Why embedding failed, and what to do about it.
#[derive(Debug, thiserror::Error)]
pub enum EmbedError {
    /// A model file is missing or unreadable.
    #[error("cannot read model file {path}: {detail}; run `memsift model install` or pass the right model directory")]
    ModelFile {
        /// The file.
        path: String,
        /// What went wrong.
        detail: String,
    },
    /// The tokenizer rejected the input or its file.
    #[error("tokenizer error: {0}")]
    Tokenizer(String),
    /// The tensor library failed (a malformed weights file, or a bug).
    #[error("model inference failed: {0}")]
    Inference(String),
    /// An input text is empty after trimming; there is nothing to embed.
    #[error("text #{index} is empty; drop empty texts before embedding")]
    EmptyText {
        /// Its position in the batch.
        index: usize,
    },
    /// The embeddings endpoint failed.
    #[error("embeddings endpoint failed: {0}")]
    Http(#[from] memsift_llm::LlmError),
    /// The endpoint or a model file answered with vectors of an unexpected shape.
    #[error("model `{model_id}` returned {detail}; check the configured model and dimension")]
    BadOutput {
        /// The model.
        model_id: String,
        /// What was wrong.
        detail: String,
    },
    /// Writing a distilled model failed.
    #[error("cannot write {path}: {detail}")]
    Write {
        /// The file.
        path: String,
        /// What went wrong.
        detail: String,
    },
}

/// Turns text into L2-normalized vectors of one model.
pub trait Embedder: Send + Sync {
    /// The model id stored next to every vector (`all-MiniLM-L6-v2`, `hashing-384-v1`, …).
    fn model_id(&self) -> &str;

    /// The length of every vector.
    fn dimension(&self) -> usize;

    /// One unit-length vector per text, in order. Blocking: call from `spawn_blocking` on tokio.
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError>;

    /// One text, tagged with the model that made it.
    fn embed_one(&self, text: &str) -> Result<Embedding, EmbedError> {
        let mut vectors = self.embed(&[text])?;
        let vector = vectors.pop().ok_or_else(|| EmbedError::BadOutput {
            model_id: self.model_id().to_owned(),
            detail: "no vector for one input".to_owned(),
        })?;
        Ok(Embedding {
            model_id: self.model_id().to_owned(),
            vector,
        })
    }
}

/// A vector together with the model that produced it; its dimension is the vector's length.
#[derive(Clone, Debug, PartialEq)]
pub struct Embedding {
    /// The model id.
    pub model_id: String,
    /// The unit-length vector.
    pub vector: Vec<f32>,
}

impl Embedding {
    /// The vector's length.
    pub fn dimension(&self) -> usize {
        self.vector.len()
    }

    /// The storage form: little-endian f32 bytes.
    pub fn to_le_bytes(&self) -> Vec<u8> {
        to_le_bytes(&self.vector)
    }
}

/// Encodes a vector as little-endian f32 bytes, the form `memories.embedding` stores.
pub fn to_le_bytes(vector: &[f32]) -> Vec<u8> {
    vector.iter().flat_map(|value| value.to_le_bytes()).collect()
}

/// Decodes little-endian f32 bytes; `None` when the length is not a multiple of 4.
pub fn from_le_bytes(bytes: &[u8]) -> Option<Vec<f32>> {
    if !bytes.len().is_multiple_of(4) {
        return None;
    }
    Some(
        bytes
            .chunks_exact(4)
            .map(|chunk| f32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]))
            .collect(),
    )
}

/// Scales `vector` to unit length in place; a zero vector stays zero (it has nothing to point at).
pub fn l2_normalize(vector: &mut [f32]) {
    let norm = vector.iter().map(|value| value * value).sum::<f32>().sqrt();
    if norm > 0.0 {
        for value in vector.iter_mut() {
            *value /= norm;
        }
    }
}

/// The dot product, which is the cosine for unit vectors.
pub fn cosine(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// Rejects empty texts up front so every embedder reports them the same way.
pub(crate) fn check_not_empty(texts: &[&str]) -> Result<(), EmbedError> {
    match texts.iter().position(|text| text.trim().is_empty()) {
        Some(index) => Err(EmbedError::EmptyText { index }),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_round_trip_little_endian() {
        let vector = vec![1.0_f32, -0.5, 0.25, f32::MIN_POSITIVE];
        let bytes = to_le_bytes(&vector);
        assert_eq!(bytes.len(), 16);
        assert_eq!(&bytes[..4], &1.0_f32.to_le_bytes());
        assert_eq!(from_le_bytes(&bytes), Some(vector));
        assert_eq!(from_le_bytes(&bytes[..5]), None);
    }

    #[test]
    fn normalizing_a_zero_vector_leaves_it_zero() {
        let mut zero = vec![0.0_f32; 4];
        l2_normalize(&mut zero);
        assert_eq!(zero, vec![0.0; 4]);
        let mut three_four = vec![3.0_f32, 4.0];
        l2_normalize(&mut three_four);
        assert_eq!(three_four, vec![0.6, 0.8]);
    }
}
