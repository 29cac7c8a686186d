//! The read side: what memsift knows about a question, with the evidence behind each answer.
//!
//! A search gathers ranked lists from several signals over one user's store (the query's vector
//! against each memory's and each turn's, BM25 over memory texts and over turns (a turn's match
//! ranks the memories that cite it), entities the query names, the time range it names, and, with
//! `include_turns`, the turns no active memory cites, by their words and their vectors), fuses
//! them by weighted reciprocal rank fusion (`fuse`), scales by importance and recency, follows
//! typed links from the best memories, lowers results about people other than the ones the query
//! names and lifts results from the time it names (`focus`), and answers each result with its
//! evidence turns, entities, links followed and the score parts that ranked it. `budget_tokens`
//! packs the best results that fit, never a turn twice.
//!
//! Every list is read exactly, per user: a per-user filter after an approximate scan would lose
//! recall, and one user's store is small enough to read whole.

pub mod focus;
pub mod fuse;
mod nearby;
mod pack;
pub mod query;

use std::collections::{BTreeSet, HashMap, HashSet};

use chrono::{DateTime, Utc};
use memsift_core::{MemoryId, UserId};
use memsift_store::{MemoryCard, TurnCard};
use serde::Serialize;

use crate::app::App;
use crate::embedding::EmbedPurpose;
use crate::timings::{Phase, timed};
pub use fuse::{Key, ScoreParts, Signal, Weights};
use fuse::{Link, RankedList};
use pack::pack;
use query::TimeRange;

/// How many candidates each signal contributes before fusion.
const CANDIDATES_PER_SIGNAL: usize = 50;

/// The largest `k` a search answers.
pub const MAX_K: usize = 100;

/// Which signals a search uses; every one by default. `memsift eval retrieval` turns them on one
/// at a time to measure each alone.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Signals {
    /// The query's vector against each memory's.
    pub vector: bool,
    /// BM25 over memory texts and the turns they cite (the in-memory lexicon).
    pub lexical: bool,
    /// BM25 over every stored turn (the in-memory turn lexicon): memories through the turns they
    /// cite.
    pub evidence: bool,
    /// Stored turn vectors (`[embeddings] embed_turns`): memories through their evidence turns'
    /// vectors and, with `include_turns`, uncited turns by vector.
    pub turn_vectors: bool,
    /// Entities the query names.
    pub entities: bool,
    /// The time range the query names.
    pub dates: bool,
    /// Importance and recency.
    pub priors: bool,
    /// Typed links from the best memories.
    pub links: bool,
    /// Results whose evidence is already in an earlier result go after the rest.
    pub diversify: bool,
    /// When the query names some of the speakers, results about the others count for less.
    pub speakers: bool,
    /// What was said next to the best results ranks too.
    pub nearby: bool,
}

impl Default for Signals {
    fn default() -> Self {
        Signals {
            vector: true,
            lexical: true,
            evidence: true,
            turn_vectors: true,
            entities: true,
            dates: true,
            priors: true,
            links: true,
            diversify: true,
            speakers: true,
            nearby: true,
        }
    }
}

impl Signals {
    /// No signal at all (the starting point for measuring one alone).
    pub fn none() -> Self {
        Signals {
            vector: false,
            lexical: false,
            evidence: false,
            turn_vectors: false,
            entities: false,
            dates: false,
            priors: false,
            links: false,
            diversify: false,
            speakers: false,
            nearby: false,
        }
    }
}

/// One search.
#[derive(Clone, Debug)]
pub struct SearchRequest {
    /// The user (external id) whose memories are searched; nobody else's are read.
    pub user: String,
    /// The question, as the assistant would ask it.
    pub query: String,
    /// How many results at most.
    pub k: usize,
    /// Pack the best results that fit this many tokens (`o200k_base`), instead of `k` alone.
    pub budget_tokens: Option<usize>,
    /// Also search the stored turns that no active memory cites.
    pub include_turns: bool,
    /// Only results whose time (when it happens, else when its evidence was said) is at or after.
    pub since: Option<DateTime<Utc>>,
    /// Only results whose time is before.
    pub until: Option<DateTime<Utc>>,
    /// The signals used.
    pub signals: Signals,
    /// How they are weighed.
    pub weights: Weights,
    /// Whether returned memories count as read (access counts feed scoring); evaluations say no.
    pub record_access: bool,
}

impl SearchRequest {
    /// A search with every default: k = 10, memories only, every signal.
    pub fn new(user: impl Into<String>, query: impl Into<String>) -> Self {
        SearchRequest {
            user: user.into(),
            query: query.into(),
            k: 10,
            budget_tokens: None,
            include_turns: false,
            since: None,
            until: None,
            signals: Signals::default(),
            weights: Weights::default(),
            record_access: true,
        }
    }
}

/// A turn as evidence: who said what, when.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct EvidenceTurn {
    /// The message id.
    pub id: String,
    /// The turn's label: the source's message id, else `t<seq>`.
    pub label: String,
    /// `user`, `assistant`, …
    pub role: String,
    /// The speaker's name, when the source gave one.
    pub speaker: Option<String>,
    /// When it was said.
    pub at: DateTime<Utc>,
    /// What was said.
    pub text: String,
}

/// A link followed to reach a result.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LinkFollowed {
    /// The ranked memory the link starts from.
    pub from: String,
    /// The link type.
    pub kind: String,
    /// Its confidence.
    pub confidence: f64,
}

/// One result.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SearchHit {
    /// A memory or a turn, by id.
    #[serde(flatten)]
    pub key: Key,
    /// The memory's text, or the turn's.
    pub text: String,
    /// The fused score (higher first).
    pub score: f64,
    /// How it was ranked.
    pub parts: ScoreParts,
    /// When it happens (memories that say so).
    pub happens_at: Option<DateTime<Utc>>,
    /// The turns it rests on (a turn result: itself).
    pub evidence: Vec<EvidenceTurn>,
    /// The entities it names.
    pub entities: Vec<String>,
    /// Links followed to reach it, when that is how it was found.
    pub links: Vec<LinkFollowed>,
}

/// A search's answer.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct SearchAnswer {
    /// Best first.
    pub results: Vec<SearchHit>,
    /// Candidates considered before the cut.
    pub n_candidates: usize,
    /// Tokens of what is returned: each result's text and its evidence turns' texts (`o200k_base`).
    pub n_tokens: usize,
}

/// Why a search could not be answered.
#[derive(Debug, thiserror::Error)]
pub enum SearchError {
    /// The query has nothing to search for.
    #[error("the query is empty; give the text to search for")]
    EmptyQuery,
    /// `k` out of range.
    #[error("k = {0} is out of range; use 1 to {MAX_K}")]
    BadK(usize),
    /// `since` is not before `until`.
    #[error("since must be before until")]
    EmptyRange,
}

/// Answers `request` from the store, read-only but for access counts.
pub async fn search(app: &App, request: &SearchRequest) -> anyhow::Result<SearchAnswer> {
    if request.query.trim().is_empty() {
        return Err(SearchError::EmptyQuery.into());
    }
    if !(1..=MAX_K).contains(&request.k) {
        return Err(SearchError::BadK(request.k).into());
    }
    if let (Some(since), Some(until)) = (request.since, request.until)
        && since >= until
    {
        return Err(SearchError::EmptyRange.into());
    }
    let _timed = timed(Phase::Search);
    let Some(user_id) = app.store.listing().user_id(&request.user).await? else {
        return Ok(SearchAnswer::default());
    };
    let now = app.clock.now();
    // Parsed once: the date list reads it, and the lift after fusion applies it.
    let range = if request.signals.dates {
        query::time_range(&request.query, now)
    } else {
        None
    };
    let lists = gather(app, user_id, request, range).await?;
    let weights = &request.weights;
    let mut ranked = fuse::fuse(&lists, weights);
    let memory_ids: Vec<MemoryId> = memory_keys(&ranked);
    let cards_timed = timed(Phase::SearchCards);
    let mut cards: HashMap<String, MemoryCard> = app
        .store
        .search()
        .memory_cards(user_id, &memory_ids)
        .await?
        .into_iter()
        .map(|card| (card.id.to_string(), card))
        .collect();
    drop(cards_timed);
    if request.signals.priors {
        let priors = cards
            .iter()
            .map(|(id, card)| {
                (
                    id.clone(),
                    (card.importance, (now - card.created_at).num_seconds() as f64 / 86_400.0),
                )
            })
            .collect();
        fuse::apply_priors(&mut ranked, &priors, weights);
    }
    let mut followed = HashMap::new();
    if request.signals.links {
        let _timed = timed(Phase::SearchLinks);
        let parents: Vec<MemoryId> = memory_keys(&ranked).into_iter().take(weights.link_parents).collect();
        let links: Vec<Link> = app
            .store
            .search()
            .memory_links_of(user_id, &parents)
            .await?
            .into_iter()
            .map(|(from, to, kind, confidence)| Link {
                from: from.to_string(),
                to: to.to_string(),
                kind,
                confidence,
            })
            .collect();
        let reached: Vec<MemoryId> = links.iter().filter_map(|link| MemoryId::parse(&link.to).ok()).collect();
        read_missing_cards(app, user_id, &mut cards, reached).await?;
        let importance = cards.iter().map(|(id, card)| (id.clone(), card.importance)).collect();
        followed = fuse::expand_links(&mut ranked, &links, &importance, weights);
    }
    if request.signals.nearby && weights.nearby_factor > 0.0 {
        let _timed = timed(Phase::SearchLinks);
        let nearby = nearby::read(app, user_id, &ranked, &cards, weights, request.include_turns).await?;
        fuse::expand_nearby(&mut ranked, &nearby, weights);
        read_missing_cards(app, user_id, &mut cards, memory_keys(&ranked)).await?;
    }
    let turn_ids: Vec<String> = ranked
        .iter()
        .filter_map(|(key, _)| match key {
            Key::Turn(id) => Some(id.clone()),
            Key::Memory(_) => None,
        })
        .collect();
    let cards_timed = timed(Phase::SearchCards);
    let turns: HashMap<String, TurnCard> = app
        .store
        .search()
        .turn_cards(user_id, &turn_ids)
        .await?
        .into_iter()
        .map(|card| (card.id.clone(), card))
        .collect();
    drop(cards_timed);
    let n_candidates = ranked.len();
    let mut hits = ranked
        .into_iter()
        .filter_map(|(key, parts)| hit(key, parts, &cards, &turns, &followed))
        .filter(|hit| in_window(hit, request.since, request.until))
        .collect::<Vec<_>>();
    if request.signals.speakers {
        let named = focus::named_speakers(&request.query, &hits);
        focus::focus(&mut hits, &named, weights.speaker_focus);
    }
    if let Some(range) = range {
        focus::lift_in_range(&mut hits, range, weights.date_boost);
    }
    let hits = if request.signals.diversify {
        diversify(hits)
    } else {
        hits
    };
    let (results, n_tokens) = pack(hits, request.k, request.budget_tokens);
    if request.record_access {
        let returned: Vec<String> = results
            .iter()
            .filter_map(|hit| match &hit.key {
                Key::Memory(id) => Some(id.clone()),
                Key::Turn(_) => None,
            })
            .collect();
        app.store
            .listing()
            .record_memory_access(&request.user, &returned, now)
            .await?;
    }
    Ok(SearchAnswer {
        results,
        n_candidates,
        n_tokens,
    })
}

/// Adds the cards of those of `ids` not in `cards` yet (memories a link or a neighbouring turn
/// reached after the ranked ones were read).
async fn read_missing_cards(
    app: &App,
    user_id: UserId,
    cards: &mut HashMap<String, MemoryCard>,
    ids: Vec<MemoryId>,
) -> anyhow::Result<()> {
    let missing: Vec<MemoryId> = ids
        .into_iter()
        .filter(|id| !cards.contains_key(&id.to_string()))
        .collect();
    for card in app.store.search().memory_cards(user_id, &missing).await? {
        cards.insert(card.id.to_string(), card);
    }
    Ok(())
}

fn memory_keys(ranked: &[(Key, ScoreParts)]) -> Vec<MemoryId> {
    ranked
        .iter()
        .filter_map(|(key, _)| match key {
            Key::Memory(id) => MemoryId::parse(id).ok(),
            Key::Turn(_) => None,
        })
        .collect()
}

/// Each enabled signal's ranked list of candidates. The lists are independent, so they are read
/// at once: the query embedding (a blocking task) overlaps the database reads, and on PostgreSQL
/// the reads overlap each other's round trips.
async fn gather(
    app: &App,
    user_id: UserId,
    request: &SearchRequest,
    range: Option<TimeRange>,
) -> anyhow::Result<Vec<(Signal, RankedList)>> {
    let terms = query::terms(&request.query);
    let signals = request.signals;
    let reads_turns = !terms.is_empty() && (signals.evidence || request.include_turns);
    let strips_names = (signals.vector || signals.turn_vectors) && request.weights.vector_without_names > 0.0;
    // The speakers' names before the embedding; the turn lexicon is brought forward beside it.
    let speaker_words = if strips_names {
        Some(focus::words_naming(&app.lexicons.speakers(&app.store, user_id).await?))
    } else {
        None
    };
    let (vectors, lexical, stored, named) = tokio::try_join!(
        vector_lists(app, user_id, request, speaker_words.as_ref()),
        lexical_list(app, user_id, request, &terms),
        turn_lexical_lists(app, user_id, request, &terms, reads_turns),
        named_lists(app, user_id, request, &terms, range),
    )?;
    Ok(vectors.into_iter().chain(lexical).chain(stored).chain(named).collect())
}

/// The query's vector against memories' and (through their vectors) turns'; the query is
/// embedded without the words of `speaker_words` when given.
async fn vector_lists(
    app: &App,
    user_id: UserId,
    request: &SearchRequest,
    speaker_words: Option<&BTreeSet<String>>,
) -> anyhow::Result<Vec<(Signal, RankedList)>> {
    let signals = request.signals;
    if !signals.vector && !signals.turn_vectors {
        return Ok(Vec::new());
    }
    let text = if request.weights.vector_as_statement > 0.0 {
        query::as_statement(&request.query)
    } else {
        request.query.clone()
    };
    let text = match speaker_words {
        Some(words) => query::without_names(&text, words),
        None => text,
    };
    let embed_timed = timed(Phase::SearchEmbed);
    let vector = app.vectors.embed(vec![text], EmbedPurpose::Query).await?.pop();
    let vector = vector.ok_or_else(|| anyhow::anyhow!("the embedder returned no vector for the query"))?;
    drop(embed_timed);
    let _timed = timed(Phase::SearchVectors);
    let mut lists = Vec::new();
    if signals.vector {
        let index = app.vectors.fresh_index(&app.store, user_id).await?;
        let items = index
            .search(&vector, CANDIDATES_PER_SIGNAL)?
            .into_iter()
            .map(|neighbour| (Key::Memory(neighbour.memory_id.to_string()), f64::from(neighbour.score)))
            .collect();
        lists.push((Signal::Vector, RankedList { items }));
    }
    if signals.turn_vectors {
        lists.extend(turn_vector_lists(app, user_id, &vector, request.include_turns).await?);
    }
    Ok(lists)
}

/// BM25 over the user's memory texts, from the in-memory lexicon.
async fn lexical_list(
    app: &App,
    user_id: UserId,
    request: &SearchRequest,
    terms: &[String],
) -> anyhow::Result<Option<(Signal, RankedList)>> {
    if !request.signals.lexical || terms.is_empty() {
        return Ok(None);
    }
    let _timed = timed(Phase::SearchLexical);
    let lexicon = app.lexicons.fresh(&app.store, user_id).await?;
    let items = lexicon
        .search(terms, CANDIDATES_PER_SIGNAL)
        .into_iter()
        .map(|(id, score)| (Key::Memory(id.to_string()), score))
        .collect();
    Ok(Some((Signal::Lexical, RankedList { items })))
}

/// Memories naming an entity the query names, and memories in the time range it names (`range`,
/// `None` when it names none or dates are off).
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
            .map(|(id, n_named)| (Key::Memory(id.to_string()), n_named as f64))
            .collect();
        lists.push((Signal::Entity, RankedList { items }));
    }
    if let Some(range) = range {
        lists.push((Signal::Date, dated(app, user_id, range, limit).await?));
    }
    Ok(lists)
}

/// How many turns the turn vectors contribute before they are split into memories (through the
/// memories that cite them) and uncited turns.
const TURN_CANDIDATES: usize = 2 * CANDIDATES_PER_SIGNAL;

/// From the user's turn vectors: memories ranked by their nearest evidence turn, and (with
/// `include_turns`) the turns no active memory cites, nearest first.
async fn turn_vector_lists(
    app: &App,
    user_id: UserId,
    vector: &[f32],
    include_turns: bool,
) -> anyhow::Result<Vec<(Signal, RankedList)>> {
    if !app.config.embeddings.embed_turns {
        return Ok(Vec::new());
    }
    let index = app.vectors.turn_index(&app.store, user_id).await?;
    let hits = index
        .search(vector, TURN_CANDIDATES)
        .into_iter()
        .map(|(id, score)| (id, f64::from(score)))
        .collect();
    let (memories, uncited) = split_by_citation(app, user_id, hits).await?;
    let mut lists = vec![(Signal::EvidenceVector, memories)];
    if include_turns {
        lists.push((Signal::TurnVector, uncited));
    }
    Ok(lists)
}

/// Ranked turns split into the memories that cite them (each at its best turn's place) and the
/// turns no active memory cites, each list cut to [`CANDIDATES_PER_SIGNAL`].
async fn split_by_citation(
    app: &App,
    user_id: UserId,
    hits: Vec<(String, f64)>,
) -> anyhow::Result<(RankedList, RankedList)> {
    let ids: Vec<String> = hits.iter().map(|(id, _)| id.clone()).collect();
    let mut citing: HashMap<String, Vec<MemoryId>> = HashMap::new();
    for (turn, memory) in app.store.search().turn_citations(user_id, &ids).await? {
        citing.entry(turn).or_default().push(memory);
    }
    let mut memories = RankedList::default();
    let mut uncited = RankedList::default();
    let mut seen: HashSet<MemoryId> = HashSet::new();
    for (turn, score) in hits {
        match citing.get(&turn) {
            Some(cited_by) => {
                for memory in cited_by {
                    if seen.insert(*memory) {
                        memories.items.push((Key::Memory(memory.to_string()), score));
                    }
                }
            }
            None => uncited.items.push((Key::Turn(turn), score)),
        }
    }
    memories.items.truncate(CANDIDATES_PER_SIGNAL);
    uncited.items.truncate(CANDIDATES_PER_SIGNAL);
    Ok((memories, uncited))
}

/// BM25 over every stored turn, from the in-memory turn lexicon (unless `reads_turns` says neither
/// list is wanted or the query has no terms): memories through the turns they cite, and, with
/// `include_turns`, the turns no active memory cites.
async fn turn_lexical_lists(
    app: &App,
    user_id: UserId,
    request: &SearchRequest,
    terms: &[String],
    reads_turns: bool,
) -> anyhow::Result<Vec<(Signal, RankedList)>> {
    if !reads_turns {
        return Ok(Vec::new());
    }
    let _timed = timed(Phase::SearchTurnText);
    let lexicon = app.lexicons.fresh_turns(&app.store, user_id).await?;
    let hits = lexicon.search(terms, TURN_CANDIDATES);
    let (memories, uncited) = split_by_citation(app, user_id, hits).await?;
    let mut lists = Vec::new();
    if request.signals.evidence {
        lists.push((Signal::Evidence, memories));
    }
    if request.include_turns {
        lists.push((Signal::Turns, uncited));
    }
    Ok(lists)
}

/// Memories in the range (by when they happen or when their evidence was said), nearest first.
async fn dated(app: &App, user_id: UserId, range: TimeRange, limit: i64) -> anyhow::Result<RankedList> {
    let mut found = app
        .store
        .search()
        .memories_in_range(user_id, range.from, range.to, limit)
        .await?;
    let middle = range.from + (range.to - range.from) / 2;
    found.sort_by_key(|(id, at)| ((*at - middle).num_seconds().abs(), id.to_string()));
    Ok(RankedList {
        items: found
            .into_iter()
            .map(|(id, at)| (Key::Memory(id.to_string()), -range.distance_days(at)))
            .collect(),
    })
}

fn evidence(card: &TurnCard) -> EvidenceTurn {
    EvidenceTurn {
        id: card.id.clone(),
        label: card.label.clone(),
        role: card.role.clone(),
        speaker: card.speaker.clone(),
        at: card.at,
        text: card.text.clone(),
    }
}

/// The result for a ranked key; `None` when it is gone (archived or erased since it was ranked).
fn hit(
    key: Key,
    parts: ScoreParts,
    cards: &HashMap<String, MemoryCard>,
    turns: &HashMap<String, TurnCard>,
    followed: &HashMap<String, Vec<Link>>,
) -> Option<SearchHit> {
    let score = parts.fused;
    match &key {
        Key::Memory(id) => {
            let card = cards.get(id)?;
            let links = followed
                .get(id)
                .map(|links| {
                    links
                        .iter()
                        .map(|link| LinkFollowed {
                            from: link.from.clone(),
                            kind: link.kind.clone(),
                            confidence: link.confidence,
                        })
                        .collect()
                })
                .unwrap_or_default();
            Some(SearchHit {
                text: card.text.clone(),
                score,
                parts,
                happens_at: card.happens_at,
                evidence: card.evidence.iter().map(evidence).collect(),
                entities: card.entities.clone(),
                links,
                key,
            })
        }
        Key::Turn(id) => {
            let card = turns.get(id)?;
            Some(SearchHit {
                text: card.text.clone(),
                score,
                parts,
                happens_at: None,
                evidence: vec![evidence(card)],
                entities: Vec::new(),
                links: Vec::new(),
                key,
            })
        }
    }
}

/// When a result is about: when it happens, else when its first evidence was said.
fn time_of(hit: &SearchHit) -> Option<DateTime<Utc>> {
    hit.happens_at.or_else(|| hit.evidence.iter().map(|turn| turn.at).min())
}

fn in_window(hit: &SearchHit, since: Option<DateTime<Utc>>, until: Option<DateTime<Utc>>) -> bool {
    if since.is_none() && until.is_none() {
        return true;
    }
    let Some(at) = time_of(hit) else { return false };
    since.is_none_or(|since| at >= since) && until.is_none_or(|until| at < until)
}

/// Results whose every evidence turn an earlier result already carries go after the others, in
/// their order: they add a fact, but not a place to look.
fn diversify(hits: Vec<SearchHit>) -> Vec<SearchHit> {
    let mut covered: HashSet<String> = HashSet::new();
    let (mut fresh, mut repeated) = (Vec::new(), Vec::new());
    for hit in hits {
        let ids: Vec<&String> = hit.evidence.iter().map(|turn| &turn.id).collect();
        if !ids.is_empty() && ids.iter().all(|id| covered.contains(*id)) {
            repeated.push(hit);
        } else {
            covered.extend(ids.into_iter().cloned());
            fresh.push(hit);
        }
    }
    fresh.extend(repeated);
    fresh
}

/// The first `k` results, or with a budget the best that fit it: each result costs its text's
/// tokens, a turn already returned as evidence is not returned again, and a result too large to
/// fit is skipped for smaller ones after it.
#[cfg(test)]
mod tests {
    use super::*;

    pub(super) fn turn(id: &str) -> EvidenceTurn {
        EvidenceTurn {
            id: id.to_owned(),
            label: id.to_owned(),
            role: "user".to_owned(),
            speaker: None,
            at: DateTime::parse_from_rfc3339("2026-03-01T10:00:00Z")
                .unwrap()
                .with_timezone(&Utc),
            text: format!("turn {id}"),
        }
    }

    pub(super) fn hit(key: Key, text: &str, evidence: &[&str]) -> SearchHit {
        SearchHit {
            key,
            text: text.to_owned(),
            score: 0.0,
            parts: ScoreParts::default(),
            happens_at: None,
            evidence: evidence.iter().map(|id| turn(id)).collect(),
            entities: Vec::new(),
            links: Vec::new(),
        }
    }

    #[test]
    fn a_result_whose_evidence_is_already_shown_goes_after_the_rest() {
        let hits = vec![
            hit(Key::Memory("a".into()), "a", &["t1"]),
            hit(Key::Memory("b".into()), "b", &["t1"]),
            hit(Key::Memory("c".into()), "c", &["t2"]),
        ];
        let order: Vec<String> = diversify(hits).into_iter().map(|hit| hit.text).collect();
        assert_eq!(order, ["a", "c", "b"]);
    }
}
