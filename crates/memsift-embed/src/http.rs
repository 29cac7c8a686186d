//! An OpenAI-compatible `/v1/embeddings` endpoint, for deployments that have one.
//!
//! The blocking [`Embedder::embed`] drives the async client on the runtime handle given at
//! construction, so it must run off that runtime's worker threads (`spawn_blocking`, like every
//! embedder); async callers use [`HttpEmbedder::embed_async`] directly.

use memsift_llm::openai::EmbeddingsRequest;
use memsift_llm::{ClientOptions, OpenAiClient};
use tokio::runtime::Handle;

use crate::{EmbedError, Embedder, check_not_empty, l2_normalize};

/// Inputs per request; OpenAI accepts up to 2048, and smaller requests retry more cheaply.
const REQUEST_BATCH: usize = 256;

/// Embeddings from an OpenAI-compatible server.
#[derive(Debug)]
pub struct HttpEmbedder {
    client: OpenAiClient,
    model: String,
    model_id: String,
    dimension: usize,
    request_dimensions: Option<u32>,
    runtime: Handle,
}

impl HttpEmbedder {
    /// An embedder for `options.model`, whose vectors have `dimension` entries. When
    /// `request_dimensions` is true the request asks the server to shorten to `dimension`
    /// (models that support it); otherwise a server answering another length is an error.
    ///
    /// The model id stored with the vectors is `openai-compatible:MODEL`, so a local model that
    /// happens to share a name with MiniLM is never mixed with the in-process one.
    pub fn new(
        options: ClientOptions,
        dimension: usize,
        request_dimensions: bool,
        runtime: Handle,
    ) -> Result<Self, EmbedError> {
        let model = options.model.clone();
        let client = OpenAiClient::new(options)?;
        Ok(Self {
            client,
            model_id: format!("openai-compatible:{model}"),
            model,
            dimension,
            request_dimensions: request_dimensions.then(|| u32::try_from(dimension).unwrap_or(u32::MAX)),
            runtime,
        })
    }

    /// The async form of [`Embedder::embed`].
    pub async fn embed_async(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        check_not_empty(texts)?;
        let mut vectors = Vec::with_capacity(texts.len());
        for batch in texts.chunks(REQUEST_BATCH) {
            let response = self
                .client
                .embeddings(&EmbeddingsRequest {
                    model: self.model.clone(),
                    input: batch.iter().map(|text| (*text).to_owned()).collect(),
                    dimensions: self.request_dimensions,
                })
                .await?;
            if response.data.len() != batch.len() {
                return Err(self.bad_output(format!("{} vectors for {} texts", response.data.len(), batch.len())));
            }
            for embedding in response.data {
                let mut vector = embedding.embedding;
                if vector.len() != self.dimension {
                    return Err(self.bad_output(format!(
                        "a vector of {} dimensions, configured {}",
                        vector.len(),
                        self.dimension
                    )));
                }
                // Most servers normalize already; doing it here makes that a guarantee.
                l2_normalize(&mut vector);
                vectors.push(vector);
            }
        }
        Ok(vectors)
    }

    fn bad_output(&self, detail: String) -> EmbedError {
        EmbedError::BadOutput {
            model_id: self.model_id.clone(),
            detail,
        }
    }
}

impl Embedder for HttpEmbedder {
    fn model_id(&self) -> &str {
        &self.model_id
    }

    fn dimension(&self) -> usize {
        self.dimension
    }

    /// Blocks on the runtime handle; panics if called on one of that runtime's worker threads
    /// (tokio's rule for `Handle::block_on`), so call it from `spawn_blocking`.
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        self.runtime.block_on(self.embed_async(texts))
    }
}
