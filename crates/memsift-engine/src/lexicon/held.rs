//! The lexicons a process holds per user, each brought forward to the user's version before use
//! and the least recently searched dropped first once they pass a budget.

use std::collections::{BTreeSet, HashMap};
use std::hash::Hash;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use memsift_core::{MemoryId, UserId};
use memsift_store::{MemoryTexts, StampState, Store, TurnText};

use super::Lexicon;

/// How many memories the held lexicons may cover together before the least recently searched
/// users' are dropped (about 150 MB of postings; a dropped one is rebuilt at its next search).
pub const HELD_MEMORIES: usize = 100_000;

/// How many turns the held turn lexicons may cover together (a turn is shorter than a memory's
/// document, which carries its evidence turns too).
pub const HELD_TURNS: usize = 200_000;

/// Each user's lexicons (over memories, checked against the memory version; over turns, against
/// the turn version) before use, the least recently searched dropped first once they cover more
/// than [`HELD_MEMORIES`] memories or [`HELD_TURNS`] turns: a daemon that answers many users must
/// not keep every one it ever searched.
#[derive(Debug)]
pub struct Lexicons {
    memories: Shelf<MemoryId>,
    turns: Shelf<String>,
}

impl Default for Lexicons {
    fn default() -> Self {
        Lexicons {
            memories: Shelf::new(HELD_MEMORIES),
            turns: Shelf::new(HELD_TURNS),
        }
    }
}

/// The lexicons held, with when each was last used.
#[derive(Debug)]
struct Held<Id> {
    by_user: HashMap<UserId, (Arc<Lexicon<Id>>, u64)>,
    uses: u64,
}

impl<Id> Default for Held<Id> {
    fn default() -> Self {
        Held {
            by_user: HashMap::new(),
            uses: 0,
        }
    }
}

impl<Id: Clone + Ord> Held<Id> {
    /// The lexicon held for `user_id`, whatever its version.
    fn latest(&mut self, user_id: UserId) -> Option<Arc<Lexicon<Id>>> {
        self.uses += 1;
        let (lexicon, used) = self.by_user.get_mut(&user_id)?;
        *used = self.uses;
        Some(Arc::clone(lexicon))
    }

    /// Holds `lexicon` for `user_id`, then drops the least recently used others until all held
    /// cover at most `budget` documents (the one just built stays, however large).
    fn insert(&mut self, user_id: UserId, lexicon: Arc<Lexicon<Id>>, budget: usize) {
        self.uses += 1;
        self.by_user.insert(user_id, (lexicon, self.uses));
        let mut held: usize = self.by_user.values().map(|(lexicon, _)| lexicon.len()).sum();
        while held > budget {
            let Some((&oldest, _)) = self
                .by_user
                .iter()
                .filter(|(user, _)| **user != user_id)
                .min_by_key(|(_, (_, used))| *used)
            else {
                break;
            };
            if let Some((dropped, _)) = self.by_user.remove(&oldest) {
                held -= dropped.len();
            }
        }
    }
}

/// The lexicons of one kind of document, per user, with how each current one was made.
#[derive(Debug)]
struct Shelf<Id> {
    held: Mutex<Held<Id>>,
    /// Lexicons built from every document, and brought forward by the changed ones only.
    builds: [AtomicU64; 2],
    /// How many documents the held lexicons may cover together.
    budget: usize,
}

impl<Id: Clone + Ord + Hash + Send + Sync + 'static> Shelf<Id> {
    fn new(budget: usize) -> Self {
        Shelf {
            held: Mutex::new(Held::default()),
            builds: Default::default(),
            budget,
        }
    }

    /// `user_id`'s lexicon at `version`. The held one when it is at `version`; otherwise the held
    /// one brought forward by what `read` gives since its version, unless the floor read with
    /// those rows refuses it (rows went away meanwhile), or none is held: then built whole from
    /// what `read` gives from nothing. `build` cuts rows into a lexicon of the changed documents
    /// and the ids of those gone.
    async fn current<Rows, Read, Reading>(
        &self,
        user_id: UserId,
        version: i64,
        read: Read,
        build: fn(i64, Rows) -> (Lexicon<Id>, Vec<Id>),
    ) -> anyhow::Result<Arc<Lexicon<Id>>>
    where
        Rows: Send + 'static,
        Read: Fn(Option<i64>) -> Reading,
        Reading: Future<Output = memsift_store::Result<(StampState, Rows)>>,
    {
        let held = lock(&self.held).latest(user_id);
        if let Some(lexicon) = held.as_ref().filter(|lexicon| lexicon.version() == version) {
            return Ok(Arc::clone(lexicon));
        }
        let mut base = held.filter(|lexicon| lexicon.version() < version);
        let (mut state, mut rows) = read(base.as_ref().map(|lexicon| lexicon.version())).await?;
        // The floor read with the rows decides: one read before them could miss a removal.
        if base
            .as_ref()
            .is_some_and(|lexicon| !state.can_extend(lexicon.version()))
        {
            base = None;
            (state, rows) = read(None).await?;
        }
        self.builds[usize::from(base.is_some())].fetch_add(1, Ordering::Relaxed);
        // Tokenising and stemming 10k texts is tens of milliseconds: off the async threads.
        let lexicon = Arc::new(
            tokio::task::spawn_blocking(move || {
                let (changed, gone) = build(state.version, rows);
                match base {
                    Some(base) => base.merged(state.version, changed, &gone),
                    None => changed,
                }
            })
            .await?,
        );
        lock(&self.held).insert(user_id, Arc::clone(&lexicon), self.budget);
        Ok(lexicon)
    }

    fn builds(&self) -> (u64, u64) {
        (
            self.builds[0].load(Ordering::Relaxed),
            self.builds[1].load(Ordering::Relaxed),
        )
    }

    fn holds(&self, user_id: UserId) -> bool {
        lock(&self.held).by_user.contains_key(&user_id)
    }

    /// The lexicon held for `user_id`, whatever its version, without counting it as used.
    fn peek(&self, user_id: UserId) -> Option<Arc<Lexicon<Id>>> {
        lock(&self.held)
            .by_user
            .get(&user_id)
            .map(|(lexicon, _)| Arc::clone(lexicon))
    }

    fn forget(&self, user_id: UserId) {
        lock(&self.held).by_user.remove(&user_id);
    }
}

impl Lexicons {
    /// `user_id`'s lexicon over memories. When the memory version moved since the held one was
    /// built, it is brought forward by re-reading only the memories stamped since (written,
    /// changed, or no longer active), unless a memory row went away meanwhile, which builds it
    /// whole: every extraction moves the version, and reading and stemming every memory again at
    /// each was most of the first search after it (190 ms at 10k memories).
    pub async fn fresh(&self, store: &Store, user_id: UserId) -> anyhow::Result<Arc<Lexicon>> {
        let version = store.vectors().memory_version(user_id).await?;
        let read = |since| store.search().memory_texts_since(user_id, since);
        let build = |version, texts: MemoryTexts| (Lexicon::build(version, texts.changed), texts.gone);
        self.memories.current(user_id, version, read, build).await
    }

    /// How many memory lexicons were built from every memory, and how many were brought forward
    /// by the changed memories only, since this process started.
    pub fn memory_builds(&self) -> (u64, u64) {
        self.memories.builds()
    }

    /// `user_id`'s lexicon over every stored turn (by message id). When the turn version moved
    /// since the held one was built, it is brought forward by re-reading only the segments with a
    /// turn written since (a new turn changes its neighbour's context too), unless turns went away
    /// meanwhile (erasure), which builds it whole: under live ingest every new turn moves the
    /// version, and a whole rebuild at each was most of a search's time.
    pub async fn fresh_turns(&self, store: &Store, user_id: UserId) -> anyhow::Result<Arc<Lexicon<String>>> {
        let version = store.vectors().turn_version(user_id).await?;
        let read = |since| store.search().turn_texts_since(user_id, since);
        let build = |version, turns: Vec<TurnText>| (Lexicon::of_turns(version, &turns), Vec::new());
        self.turns.current(user_id, version, read, build).await
    }

    /// The names of `user_id`'s speakers, as the turn lexicon at the current turn version would
    /// hold them, without waiting for it to be brought forward when one is held: the held one's
    /// names and those of the turns stamped since (a turn keeps its speaker, and when turns went
    /// away the floor says so and the lexicon is made current instead). The query is embedded
    /// without these names, and bringing the lexicon forward before the embedding put the two in
    /// a row (10 ms more at p95 on the first search after a write, at 10k memories).
    pub async fn speakers(&self, store: &Store, user_id: UserId) -> anyhow::Result<BTreeSet<String>> {
        if let Some(held) = self.turns.peek(user_id) {
            let (state, since) = store.search().speakers_since(user_id, held.version()).await?;
            if state.can_extend(held.version()) {
                let mut names = held.speakers().clone();
                names.extend(since);
                return Ok(names);
            }
        }
        Ok(self.fresh_turns(store, user_id).await?.speakers().clone())
    }

    /// How many turn lexicons were built from every turn, and how many were brought forward by
    /// the changed segments only, since this process started.
    pub fn turn_builds(&self) -> (u64, u64) {
        self.turns.builds()
    }

    /// Whether `user_id`'s lexicon over memories is held (built and not forgotten).
    pub fn holds(&self, user_id: UserId) -> bool {
        self.memories.holds(user_id)
    }

    /// Whether `user_id`'s lexicon over turns is held.
    pub fn holds_turns(&self, user_id: UserId) -> bool {
        self.turns.holds(user_id)
    }

    /// Drops `user_id`'s lexicons (erasure: no word of an erased memory or turn stays in this process).
    pub fn forget(&self, user_id: UserId) {
        self.memories.forget(user_id);
        self.turns.forget(user_id);
    }
}

fn lock<T>(held: &Mutex<T>) -> MutexGuard<'_, T> {
    // A stale entry is the worst a panic can leave, and the version check catches it.
    held.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lexicon(n: usize) -> Lexicon {
        let memories = (0..n)
            .map(|_| (MemoryId::new_v7(), "Noor swims.".to_owned(), String::new()))
            .collect();
        Lexicon::build(1, memories)
    }

    #[test]
    fn the_least_recently_searched_users_go_first_once_the_budget_is_passed() {
        let (a, b, c, d) = (UserId::new_v7(), UserId::new_v7(), UserId::new_v7(), UserId::new_v7());
        let sized = |n: usize| Arc::new(lexicon(n));
        let mut held: Held<MemoryId> = Held::default();
        held.insert(a, sized(3), 5);
        held.insert(b, sized(2), 5);
        assert!(held.latest(a).is_some(), "a is now the most recently used");
        held.insert(c, sized(2), 5);
        let kept = |held: &Held<MemoryId>, user: UserId| held.by_user.contains_key(&user);
        assert!(
            kept(&held, a) && kept(&held, c) && !kept(&held, b),
            "b was the least recently used"
        );
        held.insert(d, sized(9), 5);
        assert!(kept(&held, d), "the one just built stays, however large");
        assert_eq!(held.by_user.len(), 1);
        assert!(held.latest(b).is_none());
    }
}
