//! all-MiniLM-L6-v2 in-process with candle: the quality embedder.
//!
//! Reproduces sentence-transformers: WordPiece, BERT forward pass, mean over the tokens the
//! attention mask keeps, L2 normalize. The shipped `tokenizer.json` pads every input to a fixed
//! 128 tokens; mean-pooling over that padding makes every pair score ~0.9, so this module turns
//! the tokenizer's padding off and pads each batch only to its longest member, with a mask.

use std::path::{Path, PathBuf};

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config};
use tokenizers::{Tokenizer, TruncationParams};

use crate::{EmbedError, Embedder, check_not_empty};

/// The model id stored with MiniLM vectors.
pub const MINILM_MODEL_ID: &str = "all-MiniLM-L6-v2";
/// MiniLM's output dimension.
pub const MINILM_DIMENSION: usize = 384;

/// sentence-transformers truncates this model at 256 word pieces (`sentence_bert_config.json`),
/// not at the tokenizer file's 128.
const DEFAULT_MAX_TOKENS: usize = 256;
/// Sequences per forward pass: large enough to amortise the call, small enough that one long
/// text does not pad many short ones far.
const BATCH_SIZE: usize = 32;

/// all-MiniLM-L6-v2 loaded from a model directory (`model.safetensors`, `tokenizer.json`, `config.json`).
pub struct MiniLmEmbedder {
    model: BertModel,
    tokenizer: Tokenizer,
    device: Device,
    dimension: usize,
    dir: PathBuf,
}

impl std::fmt::Debug for MiniLmEmbedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MiniLmEmbedder")
            .field("dir", &self.dir)
            .field("dimension", &self.dimension)
            .finish_non_exhaustive()
    }
}

impl MiniLmEmbedder {
    /// Loads the model from `dir` (the wheel's `model/` folder) onto the CPU.
    pub fn load(dir: &Path) -> Result<Self, EmbedError> {
        let device = Device::Cpu;
        let config_path = dir.join("config.json");
        let config_text = read_to_string(&config_path)?;
        let config: Config = serde_json::from_str(&config_text).map_err(|error| EmbedError::ModelFile {
            path: config_path.display().to_string(),
            detail: error.to_string(),
        })?;
        let dimension = serde_json::from_str::<serde_json::Value>(&config_text)
            .ok()
            .and_then(|value| value.get("hidden_size")?.as_u64())
            .map_or(MINILM_DIMENSION, |size| size as usize);

        let weights_path = dir.join("model.safetensors");
        let tensors =
            candle_core::safetensors::load(&weights_path, &device).map_err(|error| EmbedError::ModelFile {
                path: weights_path.display().to_string(),
                detail: error.to_string(),
            })?;
        let model =
            BertModel::load(VarBuilder::from_tensors(tensors, DType::F32, &device), &config).map_err(|error| {
                EmbedError::ModelFile {
                    path: weights_path.display().to_string(),
                    detail: error.to_string(),
                }
            })?;

        let tokenizer = load_tokenizer(dir, max_tokens(dir))?;
        Ok(Self {
            model,
            tokenizer,
            device,
            dimension,
            dir: dir.to_owned(),
        })
    }

    /// The directory the model was loaded from.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The tokenizer, with padding off (distillation reads its vocabulary).
    pub(crate) fn tokenizer(&self) -> &Tokenizer {
        &self.tokenizer
    }

    /// Mean-pooled, L2-normalized outputs for already tokenized sequences (special tokens included).
    pub(crate) fn embed_token_ids(
        &self,
        sequences: &[Vec<u32>],
        batch_size: usize,
    ) -> Result<Vec<Vec<f32>>, EmbedError> {
        let mut vectors = Vec::with_capacity(sequences.len());
        for batch in sequences.chunks(batch_size.max(1)) {
            vectors.extend(self.forward_batch(batch).map_err(inference)?);
        }
        Ok(vectors)
    }

    fn forward_batch(&self, batch: &[Vec<u32>]) -> candle_core::Result<Vec<Vec<f32>>> {
        let longest = batch.iter().map(Vec::len).max().unwrap_or(0).max(1);
        let mut ids = Vec::with_capacity(batch.len() * longest);
        let mut mask = Vec::with_capacity(batch.len() * longest);
        for sequence in batch {
            ids.extend_from_slice(sequence);
            ids.extend(std::iter::repeat_n(0_u32, longest - sequence.len()));
            mask.extend(std::iter::repeat_n(1_u32, sequence.len()));
            mask.extend(std::iter::repeat_n(0_u32, longest - sequence.len()));
        }
        let shape = (batch.len(), longest);
        let ids = Tensor::from_vec(ids, shape, &self.device)?;
        let mask = Tensor::from_vec(mask, shape, &self.device)?;
        let token_types = ids.zeros_like()?;
        let hidden = self.model.forward(&ids, &token_types, Some(&mask))?;
        // Mean over the real tokens only: padded positions carry hidden states too.
        let mask = mask.to_dtype(DType::F32)?.unsqueeze(2)?;
        let summed = hidden.broadcast_mul(&mask)?.sum(1)?;
        let counts = mask.sum(1)?;
        let mean = summed.broadcast_div(&counts)?;
        let norms = mean.sqr()?.sum_keepdim(1)?.sqrt()?;
        mean.broadcast_div(&norms)?.to_vec2::<f32>()
    }
}

impl Embedder for MiniLmEmbedder {
    fn model_id(&self) -> &str {
        MINILM_MODEL_ID
    }

    fn dimension(&self) -> usize {
        self.dimension
    }

    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        check_not_empty(texts)?;
        let encodings = self
            .tokenizer
            .encode_batch(texts.to_vec(), true)
            .map_err(|error| EmbedError::Tokenizer(error.to_string()))?;
        // Batches of similar lengths waste less on padding; the original order is restored below.
        let mut order: Vec<usize> = (0..texts.len()).collect();
        order.sort_by_key(|&index| encodings[index].get_ids().len());
        let sorted: Vec<Vec<u32>> = order.iter().map(|&index| encodings[index].get_ids().to_vec()).collect();
        let vectors = self.embed_token_ids(&sorted, BATCH_SIZE)?;
        let mut in_order = vec![Vec::new(); texts.len()];
        for (vector, index) in vectors.into_iter().zip(order) {
            in_order[index] = vector;
        }
        Ok(in_order)
    }
}

/// The tokenizer with its fixed padding removed and truncation at `max_tokens`.
pub(crate) fn load_tokenizer(dir: &Path, max_tokens: usize) -> Result<Tokenizer, EmbedError> {
    let path = dir.join("tokenizer.json");
    let mut tokenizer = Tokenizer::from_file(&path).map_err(|error| EmbedError::ModelFile {
        path: path.display().to_string(),
        detail: error.to_string(),
    })?;
    tokenizer.with_padding(None);
    tokenizer
        .with_truncation(Some(TruncationParams {
            max_length: max_tokens,
            ..TruncationParams::default()
        }))
        .map_err(|error| EmbedError::Tokenizer(error.to_string()))?;
    Ok(tokenizer)
}

fn max_tokens(dir: &Path) -> usize {
    std::fs::read_to_string(dir.join("sentence_bert_config.json"))
        .ok()
        .and_then(|text| serde_json::from_str::<serde_json::Value>(&text).ok())
        .and_then(|value| value.get("max_seq_length")?.as_u64())
        .map_or(DEFAULT_MAX_TOKENS, |length| length as usize)
}

pub(crate) fn read_to_string(path: &Path) -> Result<String, EmbedError> {
    std::fs::read_to_string(path).map_err(|error| EmbedError::ModelFile {
        path: path.display().to_string(),
        detail: error.to_string(),
    })
}

pub(crate) fn inference(error: candle_core::Error) -> EmbedError {
    EmbedError::Inference(error.to_string())
}
