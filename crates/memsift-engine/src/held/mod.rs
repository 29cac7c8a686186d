//! Everything the read side keeps in memory per user, in one holder under one memory budget.
//!
//! A user's held state is four parts: the exact index of their memory vectors, the exact index of
//! their turn vectors, the lexicon over their memories (with which turns each memory cites) and
//! the lexicon over their turns. Each part is a cache of rows in the database, and a daemon
//! cannot see another daemon's writes, so each remembers the user's stamp version it was read at
//! (memory version for the memory parts, turn version for the turn parts) and one protocol keeps
//! them all current: when the version moved, read what the database stamped since and bring the
//! part forward; when the floor says rows went away since (deletion, erasure), read it whole.
//!
//! The parts of every user held together stay under `[search] held_mb`: holding a new part
//! drops the least recently used users first. A user whose parts alone pass the budget is
//! answered from parts built for that search and not held (counted in `oversize`): slower, never
//! more memory. So a daemon that answers ten thousand users holds the ones searched lately, not
//! everyone it ever searched. An erasure in this process drops the user's parts, and a part whose
//! rows were read before it is answered from but not held.

mod exact;
mod parts;

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use memsift_core::UserId;
use memsift_store::{StampState, Store};

pub use exact::{ExactIndex, ExactIndexError, dot};
pub use parts::{MemoryVectors, MemoryWords, ModelKey, TurnVectors, TurnWords};

/// The default memory budget: room for about 200 users of 1,000 memories and their turns
/// (MiniLM vectors and both lexicons) on a small VM.
pub const DEFAULT_HELD_MB: u64 = 256;

/// One part of a user's held state: how it is read, built, brought forward and measured.
pub trait Part: Send + Sync + Sized + 'static {
    /// What the database gives to build it or bring it forward.
    type Rows: Send + 'static;
    /// What else a part must match to be reused (the embedding model for vector parts).
    type Key: Clone + PartialEq + Send + Sync + 'static;
    /// Its name in the metrics.
    const NAME: &'static str;

    /// Its place in a user's held state.
    fn slot(user: &mut UserParts) -> &mut Option<HeldPart<Self>>;
    /// The stamp version it reflects.
    fn version(&self) -> i64;
    /// The key it was built for.
    fn key(&self) -> &Self::Key;
    /// The bytes it holds.
    fn bytes(&self) -> usize;
    /// The rows stamped after `since` (every row with `None`), with the stamp state read before
    /// them.
    fn read(
        store: &Store,
        user_id: UserId,
        key: &Self::Key,
        since: Option<i64>,
    ) -> impl Future<Output = anyhow::Result<(StampState, Self::Rows)>> + Send;
    /// The part of `rows` (every row) at `version`.
    fn build(key: &Self::Key, version: i64, rows: Self::Rows) -> Self;
    /// `base` brought forward to `version` by `rows` (those stamped since its version): what
    /// [`Part::build`] over every row would give.
    fn forward(base: Arc<Self>, version: i64, rows: Self::Rows) -> Self;
}

/// A held part and the bytes it was measured at.
pub struct HeldPart<P> {
    part: Arc<P>,
    bytes: usize,
}

/// One user's held parts and when they were last used.
#[derive(Default)]
pub struct UserParts {
    memory_vectors: Option<HeldPart<MemoryVectors>>,
    turn_vectors: Option<HeldPart<TurnVectors>>,
    memory_words: Option<HeldPart<MemoryWords>>,
    turn_words: Option<HeldPart<TurnWords>>,
    used: u64,
}

impl UserParts {
    fn bytes(&self) -> usize {
        self.memory_vectors.as_ref().map_or(0, |held| held.bytes)
            + self.turn_vectors.as_ref().map_or(0, |held| held.bytes)
            + self.memory_words.as_ref().map_or(0, |held| held.bytes)
            + self.turn_words.as_ref().map_or(0, |held| held.bytes)
    }
}

#[derive(Default)]
struct Shelves {
    users: HashMap<UserId, UserParts>,
    uses: u64,
    bytes: usize,
    /// Per part: how many were read whole, and how many brought forward.
    made: HashMap<&'static str, (u64, u64)>,
    /// Users already named in an oversize warning: such a user's every search is oversize, and
    /// one line per search would bury the log.
    warned_oversize: HashSet<UserId>,
    /// How many times each user was forgotten (erased): a part whose read began before the last
    /// time is not held, or an erasure racing a search would leave the erased words held.
    forgotten: HashMap<UserId, u64>,
}

/// What the holder has done since the process started (`/metrics`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct HeldStats {
    /// The budget, in bytes.
    pub budget_bytes: u64,
    /// Bytes held now.
    pub held_bytes: u64,
    /// Users with anything held now.
    pub users: u64,
    /// Parts found current.
    pub hits: u64,
    /// Parts read whole.
    pub builds: u64,
    /// Parts brought forward by what changed.
    pub forwards: u64,
    /// Users dropped to stay under the budget.
    pub evictions: u64,
    /// Parts not held because their user alone passes the budget.
    pub oversize: u64,
}

/// Every user's held parts, under one budget.
pub struct IndexHolder {
    budget: usize,
    shelves: Mutex<Shelves>,
    hits: AtomicU64,
    evictions: AtomicU64,
    oversize: AtomicU64,
}

impl std::fmt::Debug for IndexHolder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IndexHolder").field("stats", &self.stats()).finish()
    }
}

impl IndexHolder {
    /// A holder that keeps at most `budget_bytes`.
    pub fn new(budget_bytes: usize) -> Self {
        IndexHolder {
            budget: budget_bytes,
            shelves: Mutex::new(Shelves::default()),
            hits: AtomicU64::new(0),
            evictions: AtomicU64::new(0),
            oversize: AtomicU64::new(0),
        }
    }

    /// A holder of `[search] held_mb` megabytes.
    pub fn with_megabytes(megabytes: u64) -> Self {
        Self::new(usize::try_from(megabytes.saturating_mul(1 << 20)).unwrap_or(usize::MAX))
    }

    fn lock(&self) -> MutexGuard<'_, Shelves> {
        // The worst a panic can leave is a stale part, which the version check catches.
        self.shelves.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// `user_id`'s part `P` for `key`, current at `version` (the user's stamp version read by the
    /// caller, before this call): the held one when it is at `version`; else the held one brought
    /// forward by what was stamped since, unless the floor read with those rows refuses it or none
    /// is held, when it is read whole. The part returned may be newer than `version`, never older.
    pub async fn current<P: Part>(
        &self,
        store: &Store,
        user_id: UserId,
        key: &P::Key,
        version: i64,
    ) -> anyhow::Result<Arc<P>> {
        let (held, ticket) = {
            let mut shelves = self.lock();
            let ticket = shelves.forgotten.get(&user_id).copied().unwrap_or(0);
            shelves.uses += 1;
            let uses = shelves.uses;
            let held = shelves.users.get_mut(&user_id).and_then(|user| {
                user.used = uses;
                P::slot(user)
                    .as_ref()
                    .filter(|held| held.part.key() == key)
                    .map(|held| Arc::clone(&held.part))
            });
            (held, ticket)
        };
        if let Some(part) = held.as_ref().filter(|part| part.version() >= version) {
            self.hits.fetch_add(1, Ordering::Relaxed);
            return Ok(Arc::clone(part));
        }
        let mut base = held;
        let (mut state, mut rows) = P::read(store, user_id, key, base.as_ref().map(|part| part.version())).await?;
        // The floor read with the rows decides: one read before them could miss a removal.
        if base.as_ref().is_some_and(|part| !state.can_extend(part.version())) {
            base = None;
            (state, rows) = P::read(store, user_id, key, None).await?;
        }
        {
            let mut shelves = self.lock();
            let made = shelves.made.entry(P::NAME).or_default();
            if base.is_some() {
                made.1 += 1;
            } else {
                made.0 += 1;
            }
            if let Some(base) = &base {
                // Taken off the shelf, so that unless a search still reads it, it is brought
                // forward in place instead of copied.
                let taken = shelves.users.get_mut(&user_id).and_then(|user| {
                    let slot = P::slot(user);
                    slot.as_ref()
                        .is_some_and(|held| Arc::ptr_eq(&held.part, base))
                        .then(|| slot.take())
                        .flatten()
                });
                if let Some(taken) = taken {
                    shelves.bytes -= taken.bytes;
                }
            }
        }
        let key = key.clone();
        // Stemming ten thousand texts or copying a large index is no work for the async threads.
        let part = tokio::task::spawn_blocking(move || match base {
            Some(base) => P::forward(base, state.version, rows),
            None => P::build(&key, state.version, rows),
        })
        .await?;
        let part = Arc::new(part);
        self.hold(user_id, Arc::clone(&part), ticket);
        Ok(part)
    }

    /// Holds `part` for `user_id` (unless a newer one of the same key is held), then drops the
    /// least recently used other users until everything held fits the budget; a user whose
    /// parts alone do not fit is not held at all, nor one forgotten since `ticket` was taken.
    fn hold<P: Part>(&self, user_id: UserId, part: Arc<P>, ticket: u64) {
        let bytes = part.bytes();
        let mut shelves = self.lock();
        if shelves.forgotten.get(&user_id).copied().unwrap_or(0) != ticket {
            // Erased since this part's rows were read: answer the search that read them, hold
            // nothing.
            return;
        }
        shelves.uses += 1;
        let uses = shelves.uses;
        let user = shelves.users.entry(user_id).or_default();
        user.used = uses;
        let slot = P::slot(user);
        if slot
            .as_ref()
            .is_some_and(|held| held.part.key() == part.key() && held.part.version() > part.version())
        {
            return;
        }
        let replaced = slot.replace(HeldPart { part, bytes }).map_or(0, |held| held.bytes);
        let user_bytes = user.bytes();
        shelves.bytes = shelves.bytes + bytes - replaced;
        if user_bytes > self.budget {
            if let Some(user) = shelves.users.remove(&user_id) {
                shelves.bytes -= user.bytes();
            }
            self.oversize.fetch_add(1, Ordering::Relaxed);
            if !shelves.warned_oversize.insert(user_id) {
                return;
            }
            tracing::warn!(
                %user_id,
                held_mb = user_bytes >> 20,
                budget_mb = self.budget >> 20,
                "One user's search indexes pass [search] held_mb: each of their searches reads them whole (said once per user; memsift_search_held_oversize_total counts them). Raise held_mb to hold them."
            );
            return;
        }
        while shelves.bytes > self.budget {
            let Some(oldest) = shelves
                .users
                .iter()
                .filter(|(id, _)| **id != user_id)
                .min_by_key(|(_, user)| user.used)
                .map(|(id, _)| *id)
            else {
                break;
            };
            if let Some(user) = shelves.users.remove(&oldest) {
                shelves.bytes -= user.bytes();
                self.evictions.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Changes `user_id`'s held part `P` in place with `change` (this process's own write), and
    /// measures it again; drops it when `change` says it cannot be kept in step.
    pub fn update<P: Part + Clone>(&self, user_id: UserId, change: impl FnOnce(&mut P) -> bool) {
        let mut shelves = self.lock();
        let Some(user) = shelves.users.get_mut(&user_id) else {
            return;
        };
        let Some(mut held) = P::slot(user).take() else { return };
        let before = held.bytes;
        let kept = change(Arc::make_mut(&mut held.part));
        let after = if kept {
            held.bytes = held.part.bytes();
            let bytes = held.bytes;
            *P::slot(user) = Some(held);
            bytes
        } else {
            0
        };
        shelves.bytes = shelves.bytes + after - before;
    }

    /// Drops everything held for `user_id` (erasure: no word or vector of theirs stays here).
    pub fn forget(&self, user_id: UserId) {
        let mut shelves = self.lock();
        *shelves.forgotten.entry(user_id).or_default() += 1;
        if let Some(user) = shelves.users.remove(&user_id) {
            shelves.bytes -= user.bytes();
        }
    }

    /// Drops everything held (the daemon went idle and released its embedder).
    pub fn clear(&self) {
        let mut shelves = self.lock();
        shelves.users.clear();
        shelves.bytes = 0;
    }

    /// Whether part `P` is held for `user_id`.
    pub fn holds<P: Part>(&self, user_id: UserId) -> bool {
        self.lock()
            .users
            .get_mut(&user_id)
            .is_some_and(|user| P::slot(user).is_some())
    }

    /// The part `P` held for `user_id`, whatever its version, without counting it as used.
    pub fn peek<P: Part>(&self, user_id: UserId) -> Option<Arc<P>> {
        let mut shelves = self.lock();
        let user = shelves.users.get_mut(&user_id)?;
        P::slot(user).as_ref().map(|held| Arc::clone(&held.part))
    }

    /// How many parts `P` this holder read whole, and how many it brought forward.
    pub fn made<P: Part>(&self) -> (u64, u64) {
        self.lock().made.get(P::NAME).copied().unwrap_or_default()
    }

    /// What is held and what was done.
    pub fn stats(&self) -> HeldStats {
        let (held_bytes, users, builds, forwards) = {
            let shelves = self.lock();
            let (builds, forwards) = shelves
                .made
                .values()
                .fold((0, 0), |(builds, forwards), made| (builds + made.0, forwards + made.1));
            (shelves.bytes, shelves.users.len(), builds, forwards)
        };
        HeldStats {
            budget_bytes: self.budget as u64,
            held_bytes: held_bytes as u64,
            users: users as u64,
            hits: self.hits.load(Ordering::Relaxed),
            builds,
            forwards,
            evictions: self.evictions.load(Ordering::Relaxed),
            oversize: self.oversize.load(Ordering::Relaxed),
        }
    }

    /// The bytes held, summed part by part (tests check the running total against it).
    pub fn measured_bytes(&self) -> usize {
        self.lock().users.values().map(UserParts::bytes).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_part_read_before_its_user_was_forgotten_is_not_held() {
        let holder = IndexHolder::new(1 << 20);
        let user = UserId::new_v7();
        let key = ModelKey {
            model_id: Arc::from("m"),
            dimension: 2,
        };
        let part = || {
            Arc::new(TurnVectors::build(
                &key,
                1,
                vec![(memsift_core::MessageId::new_v7(), vec![1.0, 0.0])],
            ))
        };
        let ticket = holder.lock().forgotten.get(&user).copied().unwrap_or(0);
        holder.forget(user);
        holder.hold(user, part(), ticket);
        assert!(!holder.holds::<TurnVectors>(user), "an erasure raced the read");
        assert_eq!(holder.stats().held_bytes, 0);
        let ticket = holder.lock().forgotten.get(&user).copied().unwrap_or(0);
        holder.hold(user, part(), ticket);
        assert!(holder.holds::<TurnVectors>(user), "a read after the erasure is held");
    }
}
