//! The embedder named by `[embeddings]`, loaded on first need and released when idle, and the
//! vector steps every command shares: embed off the async threads (each text once, recent ones
//! from memory), and a user's exact index with any missing vectors filled.
//!
//! Loading is lazy because most commands (`segments`, `show`, `import`) never embed, and loading
//! MiniLM reads 90 MB. Commands that will embed call [`Vectors::check`] up front, which verifies
//! the model files without loading them, so a missing model is reported at start-up, not in the
//! middle of a run. Loading never installs anything: MiniLM's files are checked against their
//! pinned SHA-256 and a missing or altered file is an error naming `memsift model install`.
//!
//! The daemon spends most of its life idle, and a loaded MiniLM is most of its resident memory,
//! so `Daemon::tick` calls [`Vectors::unload_if_idle`], which drops an embedder unused for
//! `[embeddings] idle_unload_secs`; the next work loads it again. An embedder in use (any caller
//! still holding it) is never released.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use anyhow::Context;
use chrono::{DateTime, Utc};
use memsift_core::config::{EmbeddingBackend, EmbeddingsConfig};
use memsift_core::{Clock, MemoryId, MessageId, SegmentId, UserId};
use memsift_embed::model::{ModelError, default_model_dir, verify};
use memsift_embed::{Embedder, HashingEmbedder, HttpEmbedder, MiniLmEmbedder, StaticEmbedder};
use memsift_llm::ClientOptions;
use memsift_store::Store;

use crate::held::{IndexHolder, MemoryVectors, ModelKey, TurnVectors};

/// Vectors of recent texts kept in memory: an item embedded ahead for a page of answers, then
/// again by its own apply, and a text repeated across answers, are each embedded once.
pub const RECENT_VECTORS: usize = 4096;

/// Why a text is embedded. Each is counted apart (`memsift_texts_embedded_total{purpose}`, the
/// last lines of `run --timings`), so a change that embeds the same text twice, or embeds for a
/// new reason, shows in the figures before it shows in the bill.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EmbedPurpose {
    /// A stored turn, for search's turn index (and planning's similar memories, which read it).
    Turn,
    /// An answer's item, once, at apply: dedupe compares it and the memory written keeps it.
    Item,
    /// A search's query.
    Query,
    /// An active memory that had no vector of this model (imported, or written by another model).
    Memory,
}

impl EmbedPurpose {
    /// Every purpose, in the order they are reported.
    pub const ALL: [EmbedPurpose; 4] = [
        EmbedPurpose::Turn,
        EmbedPurpose::Item,
        EmbedPurpose::Query,
        EmbedPurpose::Memory,
    ];

    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            EmbedPurpose::Turn => "turn",
            EmbedPurpose::Item => "item",
            EmbedPurpose::Query => "query",
            EmbedPurpose::Memory => "memory",
        }
    }
}

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

/// The embedder (loaded on first need, released when idle), and the per-user vector indexes built
/// from its vectors, which live in the read side's [`IndexHolder`].
pub struct Vectors {
    config: EmbeddingsConfig,
    clock: Arc<dyn Clock>,
    held: Arc<IndexHolder>,
    state: Mutex<State>,
    // Serialises loading, so two callers needing the embedder at once load it once.
    loading: tokio::sync::Mutex<()>,
    n_loads: AtomicU64,
    // Texts handed to the embedder (cache misses), per `EmbedPurpose`.
    n_embedded: [AtomicU64; EmbedPurpose::ALL.len()],
    // The HTTP embedder drives its async client through this handle from blocking threads.
    runtime: Option<tokio::runtime::Handle>,
}

struct State {
    loaded: Option<Arc<Loaded>>,
    last_used: DateTime<Utc>,
    // An embedder handed over by `use_embedder` cannot be rebuilt from the config: it stays.
    supplied: bool,
}

struct Loaded {
    embedder: Arc<dyn Embedder>,
    recent: Mutex<Recent>,
}

impl std::fmt::Debug for Vectors {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let loaded = self
            .state()
            .loaded
            .as_ref()
            .map(|loaded| loaded.embedder.model_id().to_owned());
        f.debug_struct("Vectors")
            .field("backend", &self.config.backend)
            .field("loaded", &loaded)
            .finish()
    }
}

impl Vectors {
    /// Vectors from the configured backend, loaded when first needed; `clock` dates each use for
    /// [`Vectors::unload_if_idle`]; the per-user indexes are kept in `held`.
    pub fn new(config: &EmbeddingsConfig, clock: Arc<dyn Clock>, held: Arc<IndexHolder>) -> Self {
        let now = clock.now();
        Self {
            config: config.clone(),
            clock,
            held,
            state: Mutex::new(State {
                loaded: None,
                last_used: now,
                supplied: false,
            }),
            loading: tokio::sync::Mutex::new(()),
            n_loads: AtomicU64::new(0),
            n_embedded: [const { AtomicU64::new(0) }; EmbedPurpose::ALL.len()],
            runtime: tokio::runtime::Handle::try_current().ok(),
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .expect("the vectors' state lock is never poisoned: nothing panics while holding it")
    }

    /// Uses `embedder` instead of the configured one (the demo's labelled fallback, tests), for
    /// good: it is never released. Only before first use: an error once another embedder has
    /// made vectors through this value.
    pub fn use_embedder(&self, embedder: Arc<dyn Embedder>) -> anyhow::Result<()> {
        let mut state = self.state();
        if state.loaded.is_some() || self.n_loads.load(Ordering::SeqCst) > 0 {
            anyhow::bail!("an embedder is already in use; choose the embedder before any work runs");
        }
        state.loaded = Some(Arc::new(Loaded::new(embedder)));
        state.supplied = true;
        Ok(())
    }

    /// Checks that the configured embedder can be loaded, without loading it: MiniLM's files
    /// against their pins, the static table's files, the endpoint's key.
    pub fn check(&self) -> Result<(), EmbedderUnavailable> {
        if self.state().supplied {
            return Ok(());
        }
        let load_error = |detail: String| EmbedderUnavailable::Load {
            backend: backend_name(&self.config),
            detail,
        };
        match self.config.backend {
            EmbeddingBackend::Minilm => verify(&minilm_dir(&self.config))?,
            EmbeddingBackend::Static => {
                let dir = self.config.model_dir.clone().unwrap_or_else(default_model_dir);
                for name in ["config.json", "model.safetensors", "tokenizer.json"] {
                    if !dir.join(name).is_file() {
                        return Err(load_error(format!(
                            "no {name} in {}; run `memsift distill` into it or set [embeddings] model_dir",
                            dir.display()
                        )));
                    }
                }
            }
            EmbeddingBackend::OpenaiCompatible => {
                if self.runtime.is_none() {
                    return Err(load_error("no async runtime to drive the HTTP client".to_owned()));
                }
                api_key(&self.config).map_err(load_error)?;
            }
            EmbeddingBackend::Hashing => {}
        }
        Ok(())
    }

    /// The embedder, loaded (on a blocking thread) if it is not loaded now.
    pub async fn embedder(&self) -> Result<Arc<dyn Embedder>, EmbedderUnavailable> {
        Ok(Arc::clone(&self.loaded().await?.embedder))
    }

    /// The loaded embedder and its caches, loading them first if needed; each call counts as a use.
    async fn loaded(&self) -> Result<Arc<Loaded>, EmbedderUnavailable> {
        if let Some(loaded) = self.touch() {
            return Ok(loaded);
        }
        let _loading = self.loading.lock().await;
        if let Some(loaded) = self.touch() {
            return Ok(loaded);
        }
        let config = self.config.clone();
        let runtime = self.runtime.clone();
        let started = std::time::Instant::now();
        // Reading and checking 90 MB of weights is no work for the task that serves the API.
        let embedder = tokio::task::spawn_blocking(move || build_embedder(&config, runtime))
            .await
            .map_err(|error| EmbedderUnavailable::Load {
                backend: backend_name(&self.config),
                detail: format!("the loading task ended abnormally: {error}"),
            })??;
        let loaded = Arc::new(Loaded::new(embedder));
        self.n_loads.fetch_add(1, Ordering::SeqCst);
        tracing::info!(
            model = loaded.embedder.model_id(),
            elapsed_ms = started.elapsed().as_millis() as u64,
            "Loaded the embedder."
        );
        let mut state = self.state();
        state.loaded = Some(Arc::clone(&loaded));
        state.last_used = self.clock.now();
        Ok(loaded)
    }

    /// The loaded embedder, dated as used now; `None` when it is not loaded.
    fn touch(&self) -> Option<Arc<Loaded>> {
        let now = self.clock.now();
        let mut state = self.state();
        let loaded = state.loaded.clone()?;
        state.last_used = state.last_used.max(now);
        Some(loaded)
    }

    /// Releases the embedder (and the indexes and recent vectors made with it) when it has not
    /// been used for `[embeddings] idle_unload_secs` before `now` and nobody holds it; returns
    /// whether it did. With the setting at 0, or an embedder handed over by
    /// [`Vectors::use_embedder`], it keeps it.
    pub fn unload_if_idle(&self, now: DateTime<Utc>) -> bool {
        let idle_after = self.config.idle_unload_secs;
        if idle_after == 0 {
            return false;
        }
        let released = {
            let mut state = self.state();
            let idle = now - state.last_used >= chrono::Duration::seconds(idle_after as i64);
            let held = state
                .loaded
                .as_ref()
                .is_some_and(|loaded| Arc::strong_count(loaded) > 1 || Arc::strong_count(&loaded.embedder) > 1);
            if state.supplied || !idle || held {
                return false;
            }
            state.loaded.take()
        };
        // Dropped outside the lock: freeing the model's tensors takes a moment.
        let Some(released) = released else { return false };
        // Nothing was searched or written for as long: the indexes go with the model.
        self.held.clear();
        tracing::info!(
            model = released.embedder.model_id(),
            idle_unload_secs = idle_after,
            "Released the embedder after it went unused; the next work loads it again."
        );
        drop(released);
        true
    }

    /// Whether an embedder is loaded now (`memsift_embedder_loaded`).
    pub fn is_loaded(&self) -> bool {
        self.state().loaded.is_some()
    }

    /// How many times this process loaded the embedder (`memsift_embedder_loads_total`).
    pub fn n_loads(&self) -> u64 {
        self.n_loads.load(Ordering::SeqCst)
    }

    /// How many texts this process handed to the embedder for `purpose` (recent ones found in
    /// memory are not counted: they cost nothing).
    pub fn n_embedded(&self, purpose: EmbedPurpose) -> u64 {
        self.n_embedded[purpose as usize].load(Ordering::SeqCst)
    }

    /// Embeds `texts` for `purpose` on a blocking thread (a forward pass must not stall the async
    /// workers), one vector per text in order. Each distinct text is embedded once per call, and
    /// one of the last [`RECENT_VECTORS`] texts not at all.
    pub async fn embed(&self, texts: Vec<String>, purpose: EmbedPurpose) -> anyhow::Result<Vec<Vec<f32>>> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let loaded = self.loaded().await?;
        let mut found: HashMap<&str, Arc<[f32]>> = HashMap::new();
        let mut missing: Vec<&str> = Vec::new();
        {
            let mut recent = loaded.recent();
            let mut asked = std::collections::HashSet::new();
            for text in &texts {
                if !asked.insert(text.as_str()) {
                    continue;
                }
                match recent.get(text) {
                    Some(vector) => {
                        found.insert(text, vector);
                    }
                    None => missing.push(text),
                }
            }
        }
        if !missing.is_empty() {
            let embedder = Arc::clone(&loaded.embedder);
            let owned: Vec<String> = missing.iter().map(|text| (*text).to_owned()).collect();
            let vectors = tokio::task::spawn_blocking(move || {
                let refs: Vec<&str> = owned.iter().map(String::as_str).collect();
                embedder.embed(&refs)
            })
            .await
            .context("the embedding task ended abnormally")?
            .context("embedding failed")?;
            anyhow::ensure!(
                vectors.len() == missing.len(),
                "the embedder returned {} vectors for {} texts",
                vectors.len(),
                missing.len()
            );
            self.n_embedded[purpose as usize].fetch_add(missing.len() as u64, Ordering::SeqCst);
            let mut recent = loaded.recent();
            for (text, vector) in missing.into_iter().zip(vectors) {
                let vector: Arc<[f32]> = vector.into();
                recent.insert(text, Arc::clone(&vector));
                found.insert(text, vector);
            }
        }
        let out = texts.iter().map(|text| found[text.as_str()].to_vec()).collect();
        self.touch();
        Ok(out)
    }

    /// The model key of the loaded embedder.
    fn model_key(loaded: &Loaded) -> ModelKey {
        ModelKey {
            model_id: loaded.embedder.model_id().into(),
            dimension: loaded.embedder.dimension(),
        }
    }

    /// `user_id`'s exact memory index, current with the database. Active memories that lack a
    /// vector of this model (imported, written before embeddings were on, or made by another
    /// model) are embedded and stored first, so the index covers every active memory and dedupe
    /// stays exact.
    pub async fn fresh_index(&self, store: &Store, user_id: UserId) -> anyhow::Result<Arc<MemoryVectors>> {
        let version = store.vectors().memory_version(user_id).await?;
        self.memory_index_at(store, user_id, version).await
    }

    /// [`Vectors::fresh_index`] at a memory version the caller read.
    pub async fn memory_index_at(
        &self,
        store: &Store,
        user_id: UserId,
        version: i64,
    ) -> anyhow::Result<Arc<MemoryVectors>> {
        let key = Self::model_key(&*self.loaded().await?);
        let part = self
            .held
            .current::<MemoryVectors>(store, user_id, &key, version)
            .await?;
        if part.needs_embedding.is_empty() {
            return Ok(part);
        }
        let memories = store
            .segments()
            .active_memory_texts(user_id, &part.needs_embedding)
            .await?;
        let vectors = self
            .embed(
                memories.iter().map(|(_, text)| text.clone()).collect(),
                EmbedPurpose::Memory,
            )
            .await?;
        let written: Vec<_> = memories.into_iter().map(|(id, _)| id).zip(vectors).collect();
        let version = store
            .vectors()
            .set_memory_embeddings(user_id, &key.model_id, &written)
            .await?;
        tracing::info!(%user_id, n_memories = written.len(), model = &*key.model_id, "Embedded memories that had no vector of this model.");
        // A memory archived or written meanwhile is picked up by the next call; one more read is enough.
        self.held.current::<MemoryVectors>(store, user_id, &key, version).await
    }

    /// `user_id`'s turn vectors of this model, current at the turn version the caller read.
    pub async fn turn_index_at(
        &self,
        store: &Store,
        user_id: UserId,
        version: i64,
    ) -> anyhow::Result<Arc<TurnVectors>> {
        let key = Self::model_key(&*self.loaded().await?);
        self.held.current::<TurnVectors>(store, user_id, &key, version).await
    }

    /// Drops every in-memory copy of what `user_id` wrote, after an erasure: everything the
    /// holder keeps of theirs, and the recent-vector cache whole (it is keyed by hashes of texts
    /// of every user, so which are theirs is not known; it fills again from the next texts).
    pub fn forget_user(&self, user_id: UserId) {
        self.held.forget(user_id);
        if let Some(loaded) = self.state().loaded.clone() {
            *loaded.recent() = Recent::default();
        }
    }

    /// How many texts' vectors the recent-vector cache holds (0 while the embedder is released).
    pub fn n_recent(&self) -> usize {
        self.state().loaded.as_ref().map_or(0, |loaded| loaded.recent().len())
    }

    /// Moves `user_id`'s held memory index forward over vectors this process just wrote at
    /// `memory_version`; it is dropped (and read again when next needed) when another writer
    /// moved the version in between.
    pub fn record_embeddings(&self, user_id: UserId, written: &[(MemoryId, &[f32])], memory_version: i64) {
        self.held
            .update::<MemoryVectors>(user_id, |part| part.record(written, memory_version));
    }
}

/// Stored turns embedded per call of [`Vectors::index_turns`]. Large enough that the embedder's
/// length-sorted batches pad little (at 32, one forward batch of turns of every length, LoCoMo's
/// turns took twice the CPU), small enough that a caller checking for other work between pages
/// waits a few seconds at most (MiniLM: about 3 s on 2 cores).
pub const TURN_PAGE: i64 = 256;

impl Vectors {
    /// The stored vectors of `turns` (messages of `segment_id`), in their order, when every one
    /// has a vector of the configured embedder's model; `None` otherwise. Reads what search
    /// indexing stored and embeds nothing; the embedder is loaded only when every turn has some
    /// vector, to learn whether it is of its model.
    pub async fn stored_turn_vectors(
        &self,
        store: &Store,
        segment_id: SegmentId,
        turns: &[MessageId],
    ) -> anyhow::Result<Option<Vec<Vec<f32>>>> {
        if !self.config.embed_turns || turns.is_empty() {
            return Ok(None);
        }
        let stored = store.vectors().segment_turn_vectors(segment_id).await?;
        let mut by_turn: HashMap<MessageId, (String, Vec<f32>)> = stored
            .into_iter()
            .map(|(id, model_id, vector)| (id, (model_id, vector)))
            .collect();
        if !turns.iter().all(|turn| by_turn.contains_key(turn)) {
            return Ok(None);
        }
        let loaded = self.loaded().await?;
        let model_id = loaded.embedder.model_id();
        Ok(turns
            .iter()
            .map(|turn| {
                by_turn
                    .remove(turn)
                    .filter(|(model, _)| model == model_id)
                    .map(|(_, vector)| vector)
            })
            .collect())
    }

    /// Embeds up to `limit` stored turns that have no vector yet, oldest first, and stores their
    /// vectors; returns how many. Nothing to do (and the embedder not loaded) when `[embeddings]
    /// embed_turns` is off.
    pub async fn index_turns(&self, store: &Store, limit: i64) -> anyhow::Result<u64> {
        if !self.config.embed_turns || limit <= 0 {
            return Ok(0);
        }
        let turns = store.vectors().turns_needing_embedding(limit).await?;
        if turns.is_empty() {
            return Ok(0);
        }
        // A turn with no text has nothing to find it by: it is stored with an empty vector, which
        // marks it done and which no search matches.
        let (blank, said): (Vec<_>, Vec<_>) = turns.into_iter().partition(|turn| turn.content.trim().is_empty());
        let vectors = self
            .embed(
                said.iter().map(|turn| turn.content.clone()).collect(),
                EmbedPurpose::Turn,
            )
            .await?;
        let model_id = self.loaded().await?.embedder.model_id().to_owned();
        let mut written: Vec<_> = said.into_iter().zip(vectors).collect();
        written.extend(blank.into_iter().map(|turn| (turn, Vec::new())));
        store.vectors().set_turn_embeddings(&model_id, &written).await?;
        Ok(written.len() as u64)
    }
}

impl Loaded {
    fn new(embedder: Arc<dyn Embedder>) -> Self {
        Self {
            embedder,
            recent: Mutex::new(Recent::default()),
        }
    }

    fn recent(&self) -> MutexGuard<'_, Recent> {
        self.recent
            .lock()
            .expect("the recent vectors' lock is never poisoned: nothing panics while holding it")
    }
}

/// The vectors of the [`RECENT_VECTORS`] most recently used texts, keyed by the SHA-256 of the
/// text: the cache holds no text, so an erased user's words are not kept in it (and
/// [`Vectors::forget_user`] empties it, so their vectors are not either).
#[derive(Default)]
struct Recent {
    by_text: HashMap<TextKey, (u64, Arc<[f32]>)>,
    // Use stamp → text key, oldest first: the next to evict.
    by_use: BTreeMap<u64, TextKey>,
    next_use: u64,
}

/// The SHA-256 of a text: equal texts, equal keys, and a collision is out of reach.
type TextKey = [u8; 32];

fn text_key(text: &str) -> TextKey {
    use sha2::Digest;
    sha2::Sha256::digest(text.as_bytes()).into()
}

impl Recent {
    fn get(&mut self, text: &str) -> Option<Arc<[f32]>> {
        let stamp = self.next_use;
        let (used, vector) = self.by_text.get_mut(&text_key(text))?;
        let key = self.by_use.remove(used).expect("every entry has its stamp");
        *used = stamp;
        let vector = Arc::clone(vector);
        self.by_use.insert(stamp, key);
        self.next_use += 1;
        Some(vector)
    }

    fn insert(&mut self, text: &str, vector: Arc<[f32]>) {
        let stamp = self.next_use;
        self.next_use += 1;
        let key = text_key(text);
        if let Some((used, _)) = self.by_text.insert(key, (stamp, vector)) {
            self.by_use.remove(&used);
        }
        self.by_use.insert(stamp, key);
        while self.by_text.len() > RECENT_VECTORS {
            let Some((_, oldest)) = self.by_use.pop_first() else {
                break;
            };
            self.by_text.remove(&oldest);
        }
    }

    fn len(&self) -> usize {
        self.by_text.len()
    }
}

fn backend_name(config: &EmbeddingsConfig) -> String {
    format!("{:?}", config.backend).to_lowercase()
}

/// The endpoint's key, if one is configured.
fn api_key(config: &EmbeddingsConfig) -> Result<Option<secrecy::SecretString>, String> {
    match (&config.api_key_env, &config.api_key_file) {
        (Some(variable), _) => Some(memsift_llm::key_from_env("embeddings", variable)),
        (None, Some(path)) => Some(memsift_llm::key_from_file("embeddings", path)),
        (None, None) => None,
    }
    .transpose()
    .map_err(|error| error.to_string())
}

/// Builds the configured embedder; MiniLM only from files that match their pins.
pub fn build_embedder(
    config: &EmbeddingsConfig,
    runtime: Option<tokio::runtime::Handle>,
) -> Result<Arc<dyn Embedder>, EmbedderUnavailable> {
    let load_error = |detail: String| EmbedderUnavailable::Load {
        backend: backend_name(config),
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
            let api_key = api_key(config).map_err(load_error)?;
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
    let embedder = vectors.embedder().await?;
    let mut report = ReembedReport {
        model_id: embedder.model_id().to_owned(),
        ..ReembedReport::default()
    };
    let mut users = std::collections::HashSet::new();
    let mut after = None;
    loop {
        let batch = store
            .vectors()
            .memories_needing_embedding(embedder.model_id(), embedder.dimension(), after, page.max(1))
            .await?;
        let Some(last) = batch.last() else { break };
        after = Some(last.memory_id);
        let embedded = vectors
            .embed(
                batch.iter().map(|memory| memory.text.clone()).collect(),
                EmbedPurpose::Memory,
            )
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
                .vectors()
                .set_memory_embeddings(user_id, embedder.model_id(), &written)
                .await?;
            users.insert(user_id);
        }
        report.n_memories += batch.len() as u64;
        report.n_replaced += batch.iter().filter(|memory| memory.current_model.is_some()).count() as u64;
        progress(report.n_memories);
    }
    report.n_users = users.len() as u64;
    Ok(report)
}
