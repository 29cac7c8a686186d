//! The four parts of a user's held read state, each read, built and brought forward by the one
//! protocol of [`super::IndexHolder::current`].

use std::collections::HashMap;
use std::sync::Arc;

use memsift_core::{MemoryId, MessageId, UserId};
use memsift_store::{MemoryTexts, MemoryVector, StampState, Store, TurnText};

use super::exact::{ExactIndex, ExactIndexError};
use super::{HeldPart, Part, UserParts};
use crate::lexicon::Lexicon;

/// The embedding model a vector part was built for: vectors of another model or dimension are
/// never compared with its own.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModelKey {
    /// The model id stored with each vector.
    pub model_id: Arc<str>,
    /// Its vectors' length.
    pub dimension: usize,
}

/// A user's active memories' vectors of one model.
#[derive(Clone, Debug)]
pub struct MemoryVectors {
    key: ModelKey,
    version: i64,
    /// The index of every active memory whose vector is of this model.
    pub index: ExactIndex<MemoryId>,
    /// Memories read with no vector of this model (imported, or made by another model) when this
    /// part was built or last brought forward: embed these.
    pub needs_embedding: Vec<MemoryId>,
}

impl MemoryVectors {
    /// Inserts each row that has a usable vector of this model, removes the others and returns
    /// their ids.
    fn take_rows(&mut self, rows: Vec<MemoryVector>) -> Vec<MemoryId> {
        let mut needs_embedding = Vec::new();
        for row in rows {
            let matches =
                row.model_id.as_deref() == Some(&*self.key.model_id) && row.dimension == Some(self.key.dimension);
            match row.vector {
                Some(vector) if matches && self.index.insert(row.memory_id, &vector).is_ok() => {}
                _ => {
                    self.index.remove(&row.memory_id);
                    needs_embedding.push(row.memory_id);
                }
            }
        }
        needs_embedding
    }

    /// Records this process's own write of `written` in one transaction that moved the memory
    /// version to `new_version`; false when that cannot be kept in step (another writer moved
    /// the version in between, or a vector does not fit), and the part must be read again.
    pub fn record(&mut self, written: &[(MemoryId, &[f32])], new_version: i64) -> bool {
        let inserted = written
            .iter()
            .all(|(memory_id, vector)| self.index.insert(*memory_id, vector).is_ok());
        if !inserted || new_version != self.version + 1 {
            return false;
        }
        self.version = new_version;
        true
    }

    /// The memory version it reflects.
    pub fn version(&self) -> i64 {
        self.version
    }

    /// The model its vectors are of.
    pub fn model_id(&self) -> &str {
        &self.key.model_id
    }

    /// The `k` memories nearest `vector` by cosine, best first; an error for a vector this index
    /// cannot compare (another length, NaN or infinity), which would otherwise match nothing and
    /// let a duplicate through dedupe unseen.
    pub fn nearest(&self, vector: &[f32], k: usize) -> Result<Vec<(MemoryId, f32)>, ExactIndexError> {
        if vector.len() != self.key.dimension {
            return Err(ExactIndexError::Dimension {
                expected: self.key.dimension,
                got: vector.len(),
            });
        }
        if vector.iter().any(|value| !value.is_finite()) {
            return Err(ExactIndexError::NotFinite);
        }
        Ok(self.index.search(vector, k))
    }
}

impl Part for MemoryVectors {
    type Rows = (Vec<MemoryVector>, Vec<MemoryId>);
    type Key = ModelKey;
    const NAME: &'static str = "memory_vectors";

    fn slot(user: &mut UserParts) -> &mut Option<HeldPart<Self>> {
        &mut user.memory_vectors
    }

    fn version(&self) -> i64 {
        self.version
    }

    fn key(&self) -> &ModelKey {
        &self.key
    }

    fn bytes(&self) -> usize {
        self.index.bytes() + self.needs_embedding.capacity() * std::mem::size_of::<MemoryId>()
    }

    async fn read(
        store: &Store,
        user_id: UserId,
        _key: &ModelKey,
        since: Option<i64>,
    ) -> anyhow::Result<(StampState, Self::Rows)> {
        Ok(match since {
            Some(since) => {
                let read = store.vectors().memory_vectors_since(user_id, since).await?;
                (read.state, (read.changed, read.gone))
            }
            None => {
                let read = store.vectors().user_memory_vectors(user_id).await?;
                let state = StampState {
                    version: read.version,
                    floor: 0,
                };
                (state, (read.rows, Vec::new()))
            }
        })
    }

    fn build(key: &ModelKey, version: i64, (rows, _): Self::Rows) -> Self {
        let mut part = MemoryVectors {
            key: key.clone(),
            version,
            index: ExactIndex::new(key.dimension),
            needs_embedding: Vec::new(),
        };
        part.needs_embedding = part.take_rows(rows);
        part
    }

    fn forward(base: Arc<Self>, version: i64, (changed, gone): Self::Rows) -> Self {
        let mut part = Arc::try_unwrap(base).unwrap_or_else(|shared| (*shared).clone());
        for memory_id in &gone {
            part.index.remove(memory_id);
        }
        part.version = version;
        part.needs_embedding = part.take_rows(changed);
        part
    }
}

/// A user's stored turns' vectors of one model, by message id.
#[derive(Clone, Debug)]
pub struct TurnVectors {
    key: ModelKey,
    version: i64,
    /// The index of every turn with a vector of this model.
    pub index: ExactIndex<MessageId>,
}

impl Part for TurnVectors {
    type Rows = Vec<(MessageId, Vec<f32>)>;
    type Key = ModelKey;
    const NAME: &'static str = "turn_vectors";

    fn slot(user: &mut UserParts) -> &mut Option<HeldPart<Self>> {
        &mut user.turn_vectors
    }

    fn version(&self) -> i64 {
        self.version
    }

    fn key(&self) -> &ModelKey {
        &self.key
    }

    fn bytes(&self) -> usize {
        self.index.bytes()
    }

    async fn read(
        store: &Store,
        user_id: UserId,
        key: &ModelKey,
        since: Option<i64>,
    ) -> anyhow::Result<(StampState, Self::Rows)> {
        let read = store.vectors().user_turn_vectors(user_id, &key.model_id, since).await?;
        Ok((read.state, read.rows))
    }

    fn build(key: &ModelKey, version: i64, rows: Self::Rows) -> Self {
        let base = TurnVectors {
            key: key.clone(),
            version,
            index: ExactIndex::new(key.dimension),
        };
        Self::forward(Arc::new(base), version, rows)
    }

    fn forward(base: Arc<Self>, version: i64, rows: Self::Rows) -> Self {
        let mut part = Arc::try_unwrap(base).unwrap_or_else(|shared| (*shared).clone());
        part.version = version;
        for (id, vector) in rows {
            // A blank turn's empty vector (or one of another length) is never a match.
            if part.index.insert(id, &vector).is_err() {
                part.index.remove(&id);
            }
        }
        part
    }
}

/// A user's memory lexicon and which turns each memory cites (the turn lists credit memories
/// through the turns they cite, and a memory citing none stands as its own evidence).
#[derive(Debug)]
pub struct MemoryWords {
    /// BM25 over each active memory's text and what its evidence said.
    pub lexicon: Lexicon<MemoryId>,
    cites: HashMap<MemoryId, Vec<MessageId>>,
    cited_by: HashMap<MessageId, Vec<MemoryId>>,
}

impl MemoryWords {
    /// The active memories that cite `turn`, oldest citation first.
    pub fn citing(&self, turn: &MessageId) -> &[MemoryId] {
        self.cited_by.get(turn).map_or(&[], Vec::as_slice)
    }

    /// The turns `memory` cites, in the order they were said.
    pub fn cited_by_memory(&self, memory: &MemoryId) -> &[MessageId] {
        self.cites.get(memory).map_or(&[], Vec::as_slice)
    }

    /// Whether `memory` (active) cites no turn: written by an operator or imported bare.
    pub fn cites_nothing(&self, memory: &MemoryId) -> bool {
        !self.cites.contains_key(memory)
    }

    /// Replaces the citations of `changed` and of `gone` with `evidence` (of changed memories).
    fn recite(&mut self, changed: &[MemoryId], gone: &[MemoryId], evidence: Vec<(MemoryId, MessageId)>) {
        for memory in changed.iter().chain(gone) {
            for turn in self.cites.remove(memory).unwrap_or_default() {
                if let Some(citing) = self.cited_by.get_mut(&turn) {
                    citing.retain(|other| other != memory);
                    if citing.is_empty() {
                        self.cited_by.remove(&turn);
                    }
                }
            }
        }
        let active: std::collections::HashSet<&MemoryId> = changed.iter().collect();
        for (memory, turn) in evidence {
            if !active.contains(&memory) {
                continue;
            }
            let cites = self.cites.entry(memory).or_default();
            if cites.contains(&turn) {
                continue;
            }
            cites.push(turn);
            self.cited_by.entry(turn).or_default().push(memory);
        }
    }
}

impl Part for MemoryWords {
    type Rows = MemoryTexts;
    type Key = ();
    const NAME: &'static str = "memory_words";

    fn slot(user: &mut UserParts) -> &mut Option<HeldPart<Self>> {
        &mut user.memory_words
    }

    fn version(&self) -> i64 {
        self.lexicon.version()
    }

    fn key(&self) -> &() {
        &()
    }

    fn bytes(&self) -> usize {
        // Each map slot: its key, its list's header and one control byte; then the lists' ids.
        let slot = std::mem::size_of::<(MemoryId, Vec<MessageId>)>() + 1;
        let cites: usize = self.cites.capacity() * slot
            + self.cites.values().map(|turns| turns.capacity()).sum::<usize>() * std::mem::size_of::<MessageId>();
        let cited_by: usize = self.cited_by.capacity() * slot
            + self
                .cited_by
                .values()
                .map(|memories| memories.capacity())
                .sum::<usize>()
                * std::mem::size_of::<MemoryId>();
        self.lexicon.bytes() + cites + cited_by
    }

    async fn read(
        store: &Store,
        user_id: UserId,
        _key: &(),
        since: Option<i64>,
    ) -> anyhow::Result<(StampState, MemoryTexts)> {
        Ok(store.search().memory_texts_since(user_id, since).await?)
    }

    fn build(_key: &(), version: i64, texts: MemoryTexts) -> Self {
        let changed: Vec<MemoryId> = texts.changed.iter().map(|(id, _, _)| *id).collect();
        let mut part = MemoryWords {
            lexicon: Lexicon::build(version, texts.changed),
            cites: HashMap::new(),
            cited_by: HashMap::new(),
        };
        part.recite(&changed, &[], texts.evidence);
        part
    }

    fn forward(base: Arc<Self>, version: i64, texts: MemoryTexts) -> Self {
        let changed: Vec<MemoryId> = texts.changed.iter().map(|(id, _, _)| *id).collect();
        let lexicon = base
            .lexicon
            .merged(version, Lexicon::build(version, texts.changed), &texts.gone);
        let (cites, cited_by) = match Arc::try_unwrap(base) {
            Ok(base) => (base.cites, base.cited_by),
            Err(shared) => (shared.cites.clone(), shared.cited_by.clone()),
        };
        let mut part = MemoryWords {
            lexicon,
            cites,
            cited_by,
        };
        part.recite(&changed, &texts.gone, texts.evidence);
        part
    }
}

/// A user's turn lexicon (by message id).
#[derive(Debug)]
pub struct TurnWords {
    /// BM25 over each turn, its speaker and its neighbours.
    pub lexicon: Lexicon<MessageId>,
}

impl Part for TurnWords {
    type Rows = Vec<TurnText>;
    type Key = ();
    const NAME: &'static str = "turn_words";

    fn slot(user: &mut UserParts) -> &mut Option<HeldPart<Self>> {
        &mut user.turn_words
    }

    fn version(&self) -> i64 {
        self.lexicon.version()
    }

    fn key(&self) -> &() {
        &()
    }

    fn bytes(&self) -> usize {
        self.lexicon.bytes()
    }

    async fn read(
        store: &Store,
        user_id: UserId,
        _key: &(),
        since: Option<i64>,
    ) -> anyhow::Result<(StampState, Vec<TurnText>)> {
        Ok(store.search().turn_texts_since(user_id, since).await?)
    }

    fn build(_key: &(), version: i64, turns: Vec<TurnText>) -> Self {
        TurnWords {
            lexicon: Lexicon::of_turns(version, &turns),
        }
    }

    fn forward(base: Arc<Self>, version: i64, turns: Vec<TurnText>) -> Self {
        // Turns leave only by erasure, which moves the floor: a forward only replaces and adds.
        TurnWords {
            lexicon: base.lexicon.merged(version, Lexicon::of_turns(version, &turns), &[]),
        }
    }
}
