//! The embedder named by `[embeddings]`, loaded on first use, and the vector steps every command
//! shares: embed off the async threads, and a user's exact index with any missing vectors filled.
//!
//! Loading is lazy because most commands (`segments`, `show`, `import`) never embed, and loading
//! MiniLM reads 90 MB. Commands that will embed call [`Vectors::embedder`] up front so a missing
//! model is reported at start-up, not in the middle of a run. Loading never installs anything:
//! MiniLM's files are checked against their pinned SHA-256 and a missing or altered file is an
//! error naming `memsift model install`.

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use anyhow::Context;
use memsift_core::UserId;
use memsift_core::config::{EmbeddingBackend, EmbeddingsConfig};
use memsift_embed::model::{ModelError, default_model_dir, verify};
use memsift_embed::{Embedder, HashingEmbedder, HttpEmbedder, MiniLmEmbedder, StaticEmbedder};
use memsift_llm::ClientOptions;
use memsift_store::{Store, VectorCache, VectorIndex};

/// Why the configured embedder could not be made ready.
#[derive(Debug, thiserror::Error)]
pub enum EmbedderUnavailable {
    /// MiniLM's files are missing or differ from their pins.
    #[error(transparent)]
    Model(#[from] ModelError),
    /// The model or the endpoint could not be loaded or reached.
    #[error("cannot load the {backend} embedder: {detail}")]
    Load {
        /// The configured backend.
        backend: String,
        /// What went wrong.
        detail: String,
    },
}

/// The embedder (made on first use) and the per-user vector indexes built from its vectors.
pub struct Vectors {
    config: EmbeddingsConfig,
    loaded: OnceLock<Loaded>,
    // The HTTP embedder drives its async client through this handle from blocking threads.
    runtime: Option<tokio::runtime::Handle>,
}

struct Loaded {
    embedder: Arc<dyn Embedder>,
    cache: VectorCache,
}

impl std::fmt::Debug for Vectors {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Vectors")
            .field("backend", &self.config.backend)
            .field(
                "loaded",
                &self.loaded.get().map(|loaded| loaded.embedder.model_id().to_owned()),
            )
            .finish()
    }
}

impl Vectors {
    /// Vectors from the configured backend, loaded when first needed.
    pub fn new(config: &EmbeddingsConfig) -> Self {
        Self {
            config: config.clone(),
            loaded: OnceLock::new(),
            runtime: tokio::runtime::Handle::try_current().ok(),
        }
    }

    /// Uses `embedder` instead of the configured one (the demo's labelled fallback, tests). Only
    /// before first use: an error once another embedder has made vectors through this value.
    pub fn use_embedder(&self, embedder: Arc<dyn Embedder>) -> anyhow::Result<()> {
        let cache = VectorCache::new(embedder.model_id(), embedder.dimension());
        self.loaded
            .set(Loaded { embedder, cache })
            .map_err(|_| anyhow::anyhow!("an embedder is already in use; choose the embedder before any work runs"))
    }

    /// The embedder, loading (and for MiniLM installing) it on first call.
    pub fn embedder(&self) -> Result<Arc<dyn Embedder>, EmbedderUnavailable> {
        Ok(Arc::clone(&self.loaded()?.embedder))
    }

    /// The per-user index cache of the embedder's model.
    pub fn cache(&self) -> Result<&VectorCache, EmbedderUnavailable> {
        Ok(&self.loaded()?.cache)
    }

    fn loaded(&self) -> Result<&Loaded, EmbedderUnavailable> {
        if let Some(loaded) = self.loaded.get() {
            return Ok(loaded);
        }
        let embedder = build_embedder(&self.config, self.runtime.clone())?;
        let cache = VectorCache::new(embedder.model_id(), embedder.dimension());
        // Two callers may race to load; the loser's copy is dropped and both use the winner's.
        let _ = self.loaded.set(Loaded { embedder, cache });
        Ok(self.loaded.get().expect("set just above"))
    }

    /// Embeds `texts` on a blocking thread (a forward pass must not stall the async workers).
    pub async fn embed(&self, texts: Vec<String>) -> anyhow::Result<Vec<Vec<f32>>> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let embedder = self.embedder()?;
        tokio::task::spawn_blocking(move || {
            let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
            embedder.embed(&refs)
        })
        .await
        .context("the embedding task ended abnormally")?
        .context("embedding failed")
    }

    /// `user_id`'s exact index, current with the database. Active memories that lack a vector of
    /// this model (imported, written before embeddings were on, or made by another model) are
    /// embedded and stored first, so the index covers every active memory and dedupe stays exact.
    pub async fn fresh_index(&self, store: &Store, user_id: UserId) -> anyhow::Result<Arc<VectorIndex>> {
        let cache = self.cache()?;
        let (index, missing) = cache.fresh(store, user_id).await?;
        if missing.is_empty() {
            return Ok(index);
        }
        let memories = store.active_memory_texts(user_id, &missing).await?;
        let vectors = self
            .embed(memories.iter().map(|(_, text)| text.clone()).collect())
            .await?;
        let written: Vec<_> = memories.into_iter().map(|(id, _)| id).zip(vectors).collect();
        store.set_memory_embeddings(user_id, cache.model_id(), &written).await?;
        tracing::info!(%user_id, n_memories = written.len(), model = cache.model_id(), "Embedded memories that had no vector of this model.");
        // A memory archived or written meanwhile is picked up by the next call; one reload is enough.
        Ok(cache.fresh(store, user_id).await?.0)
    }
}

/// Builds the configured embedder; MiniLM only from files that match their pins.
pub fn build_embedder(
    config: &EmbeddingsConfig,
    runtime: Option<tokio::runtime::Handle>,
) -> Result<Arc<dyn Embedder>, EmbedderUnavailable> {
    let load_error = |detail: String| EmbedderUnavailable::Load {
        backend: format!("{:?}", config.backend).to_lowercase(),
        detail,
    };
    Ok(match config.backend {
        EmbeddingBackend::Minilm => {
            let dir = minilm_dir(config);
            verify(&dir)?;
            Arc::new(MiniLmEmbedder::load(&dir).map_err(|error| load_error(error.to_string()))?)
        }
        EmbeddingBackend::Static => {
            let dir = config.model_dir.clone().unwrap_or_else(default_model_dir);
            Arc::new(StaticEmbedder::load(&dir).map_err(|error| load_error(error.to_string()))?)
        }
        EmbeddingBackend::OpenaiCompatible => {
            let runtime = runtime.ok_or_else(|| load_error("no async runtime to drive the HTTP client".to_owned()))?;
            let api_key = match (&config.api_key_env, &config.api_key_file) {
                (Some(variable), _) => Some(memsift_llm::key_from_env("embeddings", variable)),
                (None, Some(path)) => Some(memsift_llm::key_from_file("embeddings", path)),
                (None, None) => None,
            }
            .transpose()
            .map_err(|error| load_error(error.to_string()))?;
            let options = ClientOptions::new(
                config.endpoint.clone(),
                api_key,
                config.model.clone().unwrap_or_default(),
            );
            let dimension = config.dimension.unwrap_or_default() as usize;
            Arc::new(
                HttpEmbedder::new(options, dimension, false, runtime).map_err(|error| load_error(error.to_string()))?,
            )
        }
        EmbeddingBackend::Hashing => {
            tracing::warn!("Embeddings use the hashing test double: duplicates are found by shared words only.");
            Arc::new(HashingEmbedder::new())
        }
    })
}

/// Where MiniLM's files are: `[embeddings] model_dir`, else `MEMSIFT_MODEL_DIR`, else the default.
pub fn minilm_dir(config: &EmbeddingsConfig) -> PathBuf {
    config.model_dir.clone().unwrap_or_else(default_model_dir)
}

/// What `memsift reembed` did.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct ReembedReport {
    /// The model the vectors now come from.
    pub model_id: String,
    /// Memories given a vector of that model.
    pub n_memories: u64,
    /// Of those, memories whose old vector came from another model or dimension.
    pub n_replaced: u64,
    /// Users whose indexes were rebuilt.
    pub n_users: u64,
}

/// Embeds every active memory whose vector is missing or was made by another model or dimension,
/// `page` memories per call; `progress` hears the running count. Safe to interrupt and rerun: each
/// page is committed per user, and a memory that has its vector leaves the set.
pub async fn reembed(
    store: &Store,
    vectors: &Vectors,
    page: i64,
    progress: &(dyn Fn(u64) + Sync),
) -> anyhow::Result<ReembedReport> {
    let embedder = vectors.embedder()?;
    let cache = vectors.cache()?;
    let mut report = ReembedReport {
        model_id: embedder.model_id().to_owned(),
        ..ReembedReport::default()
    };
    let mut users = std::collections::HashSet::new();
    let mut after = None;
    loop {
        let batch = store
            .memories_needing_embedding(embedder.model_id(), embedder.dimension(), after, page.max(1))
            .await?;
        let Some(last) = batch.last() else { break };
        after = Some(last.memory_id);
        let embedded = vectors
            .embed(batch.iter().map(|memory| memory.text.clone()).collect())
            .await?;
        let mut by_user: std::collections::HashMap<UserId, Vec<(memsift_core::MemoryId, Vec<f32>)>> =
            std::collections::HashMap::new();
        for (memory, vector) in batch.iter().zip(embedded) {
            by_user
                .entry(memory.user_id)
                .or_default()
                .push((memory.memory_id, vector));
        }
        for (user_id, written) in by_user {
            store
                .set_memory_embeddings(user_id, embedder.model_id(), &written)
                .await?;
            cache.forget(user_id);
            users.insert(user_id);
        }
        report.n_memories += batch.len() as u64;
        report.n_replaced += batch.iter().filter(|memory| memory.current_model.is_some()).count() as u64;
        progress(report.n_memories);
    }
    report.n_users = users.len() as u64;
    Ok(report)
}
