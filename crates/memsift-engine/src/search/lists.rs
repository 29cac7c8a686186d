//! The ranked lists a search fuses, one per signal, gathered from the user's held indexes (brought
//! to the search's snapshot first) and the store: the query's vector against memories' and turns',
//! BM25 over memory texts and over turns, entities and the time range the query names.

use std::collections::{BTreeSet, HashSet};
use std::sync::Arc;

use chrono::{DateTime, Utc};
use memsift_core::{MemoryId, MessageId, UserId};
use memsift_store::ReadSnapshot;

use super::fuse::{Key, RankedList, Signal, Weights};
use super::query::{self, TimeRange};
use super::{CANDIDATES_PER_SIGNAL, SearchRequest, focus};
use crate::app::App;
use crate::embedding::EmbedPurpose;
use crate::held::{MemoryWords, TurnWords};
use crate::timings::{Phase, timed};

/// Each enabled signal's ranked list of candidates, with the user's memory words (which turns
/// each memory cites) for what follows. The held indexes are brought to the snapshot at once: the
/// query embedding (a blocking task) overlaps the database reads, and on PostgreSQL the reads
/// overlap each other's round trips.
pub(super) async fn gather(
    app: &App,
    snapshot: &ReadSnapshot,
    request: &SearchRequest,
    weights: &Weights,
    range: Option<TimeRange>,
) -> anyhow::Result<(Vec<(Signal, RankedList)>, Arc<MemoryWords>)> {
    let user_id = snapshot.user_id;
    let terms = query::terms(&request.query);
    let signals = request.signals;
    let reads_turns = !terms.is_empty() && (signals.evidence || request.include_turns);
    let strips_names = (signals.vector || signals.turn_vectors) && weights.vector_without_names > 0.0;
    // The speakers' names before the embedding; the turn lexicon is brought forward beside it.
    let speaker_words = if strips_names {
        Some(focus::words_naming(&speakers(app, snapshot).await?))
    } else {
        None
    };
    let memory_words = async {
        let _timed = timed(Phase::SearchLexical);
        app.held
            .current::<MemoryWords>(&app.store, user_id, &(), snapshot.memories.version)
            .await
    };
    let turn_words = async {
        if !reads_turns {
            return Ok(None);
        }
        let _timed = timed(Phase::SearchTurnText);
        let part = app
            .held
            .current::<TurnWords>(&app.store, user_id, &(), snapshot.turns.version)
            .await?;
        anyhow::Ok(Some(part))
    };
    let (vectors, memory_words, turn_words, named) = tokio::try_join!(
        nearest(app, snapshot, request, speaker_words.as_ref()),
        memory_words,
        turn_words,
        named_lists(app, user_id, request, &terms, range.filter(|_| signals.dates)),
    )?;
    let mut lists = named;
    if signals.vector {
        lists.push((Signal::Vector, vectors.memories.clone()));
    }
    if signals.lexical && !terms.is_empty() {
        let items = memory_words
            .lexicon
            .search(&terms, CANDIDATES_PER_SIGNAL)
            .into_iter()
            .map(|(id, score)| (Key::Memory(id), score))
            .collect();
        lists.push((Signal::Lexical, RankedList { items }));
    }
    if let Some(turn_words) = &turn_words {
        let hits = turn_words.lexicon.search(&terms, TURN_CANDIDATES);
        let (mut memories, uncited) = split_by_citation(&memory_words, hits);
        if signals.evidence {
            // A memory that cites no turn is its own evidence: its words, scored as a turn's.
            let own = memory_words
                .lexicon
                .search_as_in(&turn_words.lexicon, &terms, CANDIDATES_PER_SIGNAL, |id| {
                    memory_words.cites_nothing(id)
                });
            merge_own_evidence(&mut memories, own);
            lists.push((Signal::Evidence, memories));
        }
        if request.include_turns {
            lists.push((Signal::Turns, uncited));
        }
    }
    if let Some(turn_hits) = vectors.turns {
        let (mut memories, uncited) = split_by_citation(&memory_words, turn_hits);
        // A memory that cites no turn is its own evidence: its own vector, against the same query.
        let own = vectors
            .memory_hits
            .iter()
            .filter(|(id, _)| memory_words.cites_nothing(id))
            .map(|(id, score)| (*id, f64::from(*score)))
            .collect();
        merge_own_evidence(&mut memories, own);
        lists.push((Signal::EvidenceVector, memories));
        if request.include_turns {
            lists.push((Signal::TurnVector, uncited));
        }
    }
    Ok((lists, memory_words))
}

/// The names of `user_id`'s speakers now, as a search would read them (see [`speakers`]).
pub async fn speaker_names(app: &App, user_id: UserId) -> anyhow::Result<BTreeSet<String>> {
    let snapshot = ReadSnapshot {
        user_id,
        memories: app.store.vectors().memory_state(user_id).await?,
        turns: app.store.vectors().turn_state(user_id).await?,
    };
    speakers(app, &snapshot).await
}

/// The names of the user's speakers at the snapshot, as the turn lexicon at that version would
/// hold them, without waiting for it to be brought forward when one is held: the held one's names
/// and those of the turns stamped since (a turn keeps its speaker; when turns went away the
/// floor says so and the lexicon is brought current instead). The query is embedded without
/// these names, and bringing the lexicon forward before the embedding put the two in a row.
pub(super) async fn speakers(app: &App, snapshot: &ReadSnapshot) -> anyhow::Result<BTreeSet<String>> {
    let user_id = snapshot.user_id;
    if let Some(held) = app.held.peek::<TurnWords>(user_id) {
        let version = held.lexicon.version();
        if version >= snapshot.turns.version {
            return Ok(held.lexicon.speakers().clone());
        }
        let (state, since) = app.store.search().speakers_since(user_id, version).await?;
        if state.can_extend(version) {
            let mut names = held.lexicon.speakers().clone();
            names.extend(since);
            return Ok(names);
        }
    }
    let part = app
        .held
        .current::<TurnWords>(&app.store, user_id, &(), snapshot.turns.version)
        .await?;
    Ok(part.lexicon.speakers().clone())
}

/// What the query's vector found: memories by their own vectors (as a list, and every hit with its
/// id for the evidence list), and, with turn vectors on, turns by theirs.
#[derive(Default)]
struct Nearest {
    memories: RankedList,
    memory_hits: Vec<(MemoryId, f32)>,
    turns: Option<Vec<(MessageId, f64)>>,
}

/// The query's vector against memories' and turns'; the query is embedded without the words of
/// `speaker_words` when given.
async fn nearest(
    app: &App,
    snapshot: &ReadSnapshot,
    request: &SearchRequest,
    speaker_words: Option<&BTreeSet<String>>,
) -> anyhow::Result<Nearest> {
    let signals = request.signals;
    let wants_turns = signals.turn_vectors && app.config.embeddings.embed_turns;
    if !signals.vector && !wants_turns {
        return Ok(Nearest::default());
    }
    let text = match speaker_words {
        Some(words) => query::without_names(&request.query, words),
        None => request.query.clone(),
    };
    let embed_timed = timed(Phase::SearchEmbed);
    let vector = app.vectors.embed(vec![text], EmbedPurpose::Query).await?.pop();
    let vector = vector.ok_or_else(|| anyhow::anyhow!("the embedder returned no vector for the query"))?;
    drop(embed_timed);
    let _timed = timed(Phase::SearchVectors);
    let user_id = snapshot.user_id;
    // Memory vectors are read whenever turn vectors are: a memory citing no turn stands as its
    // own evidence in the turn list.
    let index = app
        .vectors
        .memory_index_at(&app.store, user_id, snapshot.memories.version)
        .await?;
    let memory_hits = index.nearest(&vector, CANDIDATES_PER_SIGNAL)?;
    let memories = RankedList {
        items: memory_hits
            .iter()
            .map(|(id, score)| (Key::Memory(*id), f64::from(*score)))
            .collect(),
    };
    let turns = if wants_turns {
        let index = app
            .vectors
            .turn_index_at(&app.store, user_id, snapshot.turns.version)
            .await?;
        Some(
            index
                .index
                .search(&vector, TURN_CANDIDATES)
                .into_iter()
                .map(|(id, score)| (id, f64::from(score)))
                .collect(),
        )
    } else {
        None
    };
    Ok(Nearest {
        memories,
        memory_hits,
        turns,
    })
}

/// Memories naming an entity the query names, and memories in the time range it names (`range`,
/// `None` when it names none or the date list is off).
async fn named_lists(
    app: &App,
    user_id: UserId,
    request: &SearchRequest,
    terms: &[String],
    range: Option<TimeRange>,
) -> anyhow::Result<Vec<(Signal, RankedList)>> {
    let _timed = timed(Phase::SearchNamed);
    let limit = CANDIDATES_PER_SIGNAL as i64;
    let mut lists = Vec::new();
    if request.signals.entities && !terms.is_empty() {
        let items = app
            .store
            .search()
            .entity_memories(user_id, terms, limit)
            .await?
            .into_iter()
            .map(|(id, n_named)| (Key::Memory(id), n_named as f64))
            .collect();
        lists.push((Signal::Entity, RankedList { items }));
    }
    if let Some(range) = range {
        lists.push((Signal::Date, dated(app, user_id, range, limit).await?));
    }
    Ok(lists)
}

/// How many turns a turn list contributes before it is split into memories (through the memories
/// that cite them) and uncited turns.
const TURN_CANDIDATES: usize = 2 * CANDIDATES_PER_SIGNAL;

/// Ranked turns split into the memories that cite them (each at its best turn's place and score)
/// and the turns no active memory cites, each list cut to [`CANDIDATES_PER_SIGNAL`].
fn split_by_citation(words: &MemoryWords, hits: Vec<(MessageId, f64)>) -> (RankedList, RankedList) {
    let mut memories = RankedList::default();
    let mut uncited = RankedList::default();
    let mut seen: HashSet<MemoryId> = HashSet::new();
    for (turn, score) in hits {
        let citing = words.citing(&turn);
        if citing.is_empty() {
            uncited.items.push((Key::Turn(turn), score));
            continue;
        }
        for memory in citing {
            if seen.insert(*memory) {
                memories.items.push((Key::Memory(*memory), score));
            }
        }
    }
    memories.items.truncate(CANDIDATES_PER_SIGNAL);
    uncited.items.truncate(CANDIDATES_PER_SIGNAL);
    (memories, uncited)
}

/// Merges the memories that cite no turn, each with its own score on the list's scale, into a
/// list of memories ranked through their turns, best first, cut to [`CANDIDATES_PER_SIGNAL`]: a
/// memory an operator wrote has no evidence to be found by, and without this it lost to an
/// unrelated memory for the signals it could not have.
fn merge_own_evidence(list: &mut RankedList, own: Vec<(MemoryId, f64)>) {
    if own.is_empty() {
        return;
    }
    list.items
        .extend(own.into_iter().map(|(id, score)| (Key::Memory(id), score)));
    list.items
        .sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    list.items.truncate(CANDIDATES_PER_SIGNAL);
}

/// Memories in the range (by when they happen or when their evidence was said), nearest its middle
/// first, each scored by that nearness (days from the middle, negated): every one is in the range,
/// so a distance to the range would tie them all and leave their order to the ids.
async fn dated(app: &App, user_id: UserId, range: TimeRange, limit: i64) -> anyhow::Result<RankedList> {
    let mut found = app
        .store
        .search()
        .memories_in_range(user_id, range.from, range.to, limit)
        .await?;
    let middle = range.from + (range.to - range.from) / 2;
    let from_middle = |at: DateTime<Utc>| (at - middle).num_seconds().abs();
    found.sort_by_key(|(id, at)| (from_middle(*at), *id));
    Ok(RankedList {
        items: found
            .into_iter()
            .map(|(id, at)| (Key::Memory(id), -(from_middle(at) as f64) / 86_400.0))
            .collect(),
    })
}
