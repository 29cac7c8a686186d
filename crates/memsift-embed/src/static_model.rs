//! The fast static tier: a per-token table distilled from MiniLM (model2vec-style), for bulk work.
//!
//! Inference is a table lookup: tokenize, average the token rows, normalize — hundreds of thousands
//! of sentences a second, against ~100 for the transformer. The price is word order and context,
//! which a bag of token vectors cannot see, so it ranks less well than the transformer.
//!
//! The directory layout is model2vec's (`model.safetensors` with an `embeddings` tensor,
//! `tokenizer.json`, `config.json`), so other model2vec readers can load what memsift distills.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use candle_core::{DType, Device, Tensor};
use tokenizers::Tokenizer;

use crate::minilm::{MiniLmEmbedder, inference, read_to_string};
use crate::{EmbedError, Embedder, check_not_empty, l2_normalize};

/// Sequences per forward pass while distilling: each is only `[CLS] token [SEP]`, so a large batch
/// amortises the per-call cost without much memory.
const DISTILL_BATCH: usize = 512;
/// Rounds of subspace iteration for PCA; the leading components of a 384-d covariance settle
/// well within this.
const PCA_ROUNDS: usize = 60;

/// A distilled static table loaded from a directory.
pub struct StaticEmbedder {
    model_id: String,
    tokenizer: Tokenizer,
    /// `rows × dimension`, row-major; token ids at or past `rows` have no entry (a sliced table).
    table: Vec<f32>,
    rows: usize,
    dimension: usize,
    unknown_id: Option<u32>,
    dir: PathBuf,
}

impl std::fmt::Debug for StaticEmbedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StaticEmbedder")
            .field("model_id", &self.model_id)
            .field("rows", &self.rows)
            .field("dimension", &self.dimension)
            .field("dir", &self.dir)
            .finish_non_exhaustive()
    }
}

/// What a distillation wrote.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DistillReport {
    /// The directory.
    pub dir: PathBuf,
    /// The model id the static embedder will report.
    pub model_id: String,
    /// Table rows (vocabulary ids covered).
    pub rows: usize,
    /// Vector length.
    pub dimension: usize,
}

impl StaticEmbedder {
    /// Loads a distilled table from `dir`.
    pub fn load(dir: &Path) -> Result<Self, EmbedError> {
        let config_path = dir.join("config.json");
        let config: serde_json::Value =
            serde_json::from_str(&read_to_string(&config_path)?).map_err(|error| EmbedError::ModelFile {
                path: config_path.display().to_string(),
                detail: error.to_string(),
            })?;
        let weights_path = dir.join("model.safetensors");
        let model_file = |detail: String| EmbedError::ModelFile {
            path: weights_path.display().to_string(),
            detail,
        };
        let mut tensors = candle_core::safetensors::load(&weights_path, &Device::Cpu)
            .map_err(|error| model_file(error.to_string()))?;
        let embeddings = tensors
            .remove("embeddings")
            .ok_or_else(|| model_file("no `embeddings` tensor".to_owned()))?;
        let (rows, dimension) = embeddings.dims2().map_err(|error| model_file(error.to_string()))?;
        let table = embeddings
            .to_dtype(DType::F32)
            .and_then(|tensor| tensor.flatten_all())
            .and_then(|tensor| tensor.to_vec1::<f32>())
            .map_err(|error| model_file(error.to_string()))?;

        let tokenizer_path = dir.join("tokenizer.json");
        let mut tokenizer = Tokenizer::from_file(&tokenizer_path).map_err(|error| EmbedError::ModelFile {
            path: tokenizer_path.display().to_string(),
            detail: error.to_string(),
        })?;
        // A bag of rows has no length limit and must not average padding in.
        tokenizer.with_padding(None);
        tokenizer
            .with_truncation(None)
            .map_err(|error| EmbedError::Tokenizer(error.to_string()))?;
        let unknown_id = tokenizer.token_to_id("[UNK]");
        let model_id = config
            .get("memsift_model_id")
            .and_then(serde_json::Value::as_str)
            .map_or_else(|| format!("static-{}-{dimension}", dir_name(dir)), str::to_owned);
        Ok(Self {
            model_id,
            tokenizer,
            table,
            rows,
            dimension,
            unknown_id,
            dir: dir.to_owned(),
        })
    }

    /// The directory the table was loaded from.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn embed_ids(&self, ids: &[u32]) -> Vec<f32> {
        let mut vector = vec![0.0_f32; self.dimension];
        for &id in ids {
            // Unknown tokens carry no meaning of their own, and ids past a sliced table have no row.
            if Some(id) == self.unknown_id || id as usize >= self.rows {
                continue;
            }
            let row = &self.table[id as usize * self.dimension..(id as usize + 1) * self.dimension];
            for (sum, value) in vector.iter_mut().zip(row) {
                *sum += value;
            }
        }
        // Averaging before normalizing changes nothing after the L2 step, so only normalize.
        l2_normalize(&mut vector);
        vector
    }
}

impl Embedder for StaticEmbedder {
    fn model_id(&self) -> &str {
        &self.model_id
    }

    fn dimension(&self) -> usize {
        self.dimension
    }

    /// Unit vectors; all zeros for a text with no token in the table (nothing to match on).
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        check_not_empty(texts)?;
        let encodings = self
            .tokenizer
            .encode_batch(texts.to_vec(), false)
            .map_err(|error| EmbedError::Tokenizer(error.to_string()))?;
        Ok(encodings
            .iter()
            .map(|encoding| self.embed_ids(encoding.get_ids()))
            .collect())
    }
}

/// Distills a static table from MiniLM over its whole vocabulary into `out_dir`.
///
/// Each vocabulary id is embedded as `[CLS] token [SEP]`, the vocabulary mean is subtracted (it is
/// a direction every token shares, which would pull all sentences together), PCA reduces to `dims`
/// when that is below the model's dimension, and each row is weighted by `ln(1 + id)`, a Zipf proxy
/// that quiets the frequent tokens WordPiece numbers first. ~35 s on 2 cores in release.
pub fn distill_static(model: &MiniLmEmbedder, out_dir: &Path, dims: usize) -> Result<DistillReport, EmbedError> {
    let vocab = model.tokenizer().get_vocab_size(true);
    distill(
        model,
        out_dir,
        dims,
        vocab,
        format!("static-{}-{dims}", crate::MINILM_MODEL_ID),
    )
}

/// [`distill_static`] over the first `rows` vocabulary ids only (tests, quick experiments); later
/// ids get no row, and the model id says it is a slice so it is never taken for the full table.
pub fn distill_static_vocab_slice(
    model: &MiniLmEmbedder,
    out_dir: &Path,
    dims: usize,
    rows: usize,
) -> Result<DistillReport, EmbedError> {
    let vocab = model.tokenizer().get_vocab_size(true);
    let rows = rows.min(vocab);
    distill(
        model,
        out_dir,
        dims,
        rows,
        format!("static-{}-{dims}-slice{rows}", crate::MINILM_MODEL_ID),
    )
}

fn distill(
    model: &MiniLmEmbedder,
    out_dir: &Path,
    dims: usize,
    rows: usize,
    model_id: String,
) -> Result<DistillReport, EmbedError> {
    let source_dim = model.dimension();
    if dims == 0 || dims > source_dim {
        return Err(EmbedError::BadOutput {
            model_id,
            detail: format!("a table of {dims} dimensions; choose 1 to {source_dim}"),
        });
    }
    let tokenizer = model.tokenizer();
    let special = |token: &str| {
        tokenizer.token_to_id(token).ok_or_else(|| {
            EmbedError::Tokenizer(format!(
                "the vocabulary has no {token} token; distillation needs a BERT WordPiece tokenizer"
            ))
        })
    };
    let (cls, sep) = (special("[CLS]")?, special("[SEP]")?);
    let sequences: Vec<Vec<u32>> = (0..rows as u32).map(|id| vec![cls, id, sep]).collect();
    let vectors = model.embed_token_ids(&sequences, DISTILL_BATCH)?;

    let mut table: Vec<f32> = vectors.into_iter().flatten().collect();
    center(&mut table, source_dim);
    let (mut table, dimension) = if dims < source_dim {
        (pca(&table, rows, source_dim, dims)?, dims)
    } else {
        (table, source_dim)
    };
    for (id, row) in table.chunks_exact_mut(dimension).enumerate() {
        let weight = (1.0 + id as f32).ln();
        for value in row {
            *value *= weight;
        }
    }

    std::fs::create_dir_all(out_dir).map_err(|error| write_error(out_dir, error))?;
    let embeddings = Tensor::from_vec(table, (rows, dimension), &Device::Cpu)
        .and_then(|tensor| tensor.to_dtype(DType::F16))
        .map_err(inference)?;
    let weights_path = out_dir.join("model.safetensors");
    candle_core::safetensors::save(&HashMap::from([("embeddings", embeddings)]), &weights_path)
        .map_err(|error| write_error(&weights_path, error))?;

    let mut tokenizer = tokenizer.clone();
    tokenizer.with_padding(None);
    tokenizer
        .with_truncation(None)
        .map_err(|error| EmbedError::Tokenizer(error.to_string()))?;
    let tokenizer_path = out_dir.join("tokenizer.json");
    tokenizer
        .save(&tokenizer_path, false)
        .map_err(|error| write_error(&tokenizer_path, error))?;

    let config = serde_json::json!({
        "model_type": "model2vec",
        "architectures": ["StaticModel"],
        "hidden_dim": dimension,
        "normalize": true,
        "apply_pca": if dimension < source_dim { serde_json::json!(dimension) } else { serde_json::Value::Null },
        "apply_zipf": true,
        "memsift_model_id": model_id,
        "memsift_source_model": crate::MINILM_MODEL_ID,
        "memsift_rows": rows,
    });
    let config_path = out_dir.join("config.json");
    std::fs::write(&config_path, format!("{config:#}\n")).map_err(|error| write_error(&config_path, error))?;
    Ok(DistillReport {
        dir: out_dir.to_owned(),
        model_id,
        rows,
        dimension,
    })
}

fn center(table: &mut [f32], dimension: usize) {
    let rows = table.len() / dimension;
    if rows == 0 {
        return;
    }
    let mut mean = vec![0.0_f64; dimension];
    for row in table.chunks_exact(dimension) {
        for (sum, value) in mean.iter_mut().zip(row) {
            *sum += f64::from(*value);
        }
    }
    for row in table.chunks_exact_mut(dimension) {
        for (value, sum) in row.iter_mut().zip(&mean) {
            *value -= (*sum / rows as f64) as f32;
        }
    }
}

/// Projects centered `rows × dimension` data onto its top `dims` principal directions, found by
/// subspace iteration on the covariance (no eigen-solver crate needed for a 384×384 matrix).
fn pca(table: &[f32], rows: usize, dimension: usize, dims: usize) -> Result<Vec<f32>, EmbedError> {
    let data = Tensor::from_slice(table, (rows, dimension), &Device::Cpu).map_err(inference)?;
    let covariance = data.t().and_then(|t| t.matmul(&data)).map_err(inference)?;
    // A fixed, full-rank start keeps distillation reproducible.
    let mut basis: Vec<f32> = (0..dimension * dims)
        .map(|index| ((index * 7919 + 13) % 1009) as f32 / 1009.0 - 0.5)
        .collect();
    orthonormalize_columns(&mut basis, dimension, dims);
    for _ in 0..PCA_ROUNDS {
        let current = Tensor::from_slice(&basis, (dimension, dims), &Device::Cpu).map_err(inference)?;
        basis = covariance
            .matmul(&current)
            .and_then(|t| t.flatten_all())
            .and_then(|t| t.to_vec1::<f32>())
            .map_err(inference)?;
        orthonormalize_columns(&mut basis, dimension, dims);
    }
    let basis = Tensor::from_slice(&basis, (dimension, dims), &Device::Cpu).map_err(inference)?;
    data.matmul(&basis)
        .and_then(|t| t.flatten_all())
        .and_then(|t| t.to_vec1::<f32>())
        .map_err(inference)
}

/// Modified Gram–Schmidt over the columns of a row-major `rows × columns` matrix.
fn orthonormalize_columns(matrix: &mut [f32], rows: usize, columns: usize) {
    for column in 0..columns {
        for previous in 0..column {
            let dot: f32 = (0..rows)
                .map(|row| matrix[row * columns + column] * matrix[row * columns + previous])
                .sum();
            for row in 0..rows {
                matrix[row * columns + column] -= dot * matrix[row * columns + previous];
            }
        }
        let norm = (0..rows)
            .map(|row| matrix[row * columns + column].powi(2))
            .sum::<f32>()
            .sqrt();
        if norm > 0.0 {
            for row in 0..rows {
                matrix[row * columns + column] /= norm;
            }
        }
    }
}

fn write_error(path: &Path, error: impl ToString) -> EmbedError {
    EmbedError::Write {
        path: path.display().to_string(),
        detail: error.to_string(),
    }
}

fn dir_name(dir: &Path) -> String {
    dir.file_name()
        .map_or_else(|| "model".to_owned(), |name| name.to_string_lossy().into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pca_keeps_the_dominant_direction() {
        // Points spread along (1, 1, 0) with a little noise on the other axes.
        let mut table = Vec::new();
        for step in 0..50 {
            let t = step as f32 - 25.0;
            let wobble = if step % 2 == 0 { 0.1 } else { -0.1 };
            table.extend_from_slice(&[t, t + wobble, wobble]);
        }
        center(&mut table, 3);
        let projected = pca(&table, 50, 3, 1).unwrap();
        // The projection onto the main axis preserves almost all of the spread.
        let kept: f32 = projected.iter().map(|x| x * x).sum();
        let total: f32 = table.iter().map(|x| x * x).sum();
        assert!(kept / total > 0.99, "{kept} of {total}");
    }

    #[test]
    fn gram_schmidt_makes_orthonormal_columns() {
        let mut matrix = vec![1.0, 1.0, 0.0, 1.0, 1.0, 1.0];
        orthonormalize_columns(&mut matrix, 3, 2);
        let column = |c: usize| [matrix[c], matrix[2 + c], matrix[4 + c]];
        let dot = |a: [f32; 3], b: [f32; 3]| a.iter().zip(&b).map(|(x, y)| x * y).sum::<f32>();
        assert!((dot(column(0), column(0)) - 1.0).abs() < 1e-5);
        assert!((dot(column(1), column(1)) - 1.0).abs() < 1e-5);
        assert!(dot(column(0), column(1)).abs() < 1e-5);
    }
}
