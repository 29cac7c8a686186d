//! The read side: what memsift knows about a question, with the evidence behind each answer.
//!
//! A search gathers ranked lists from several signals over one user's store (the query's vector
//! against each memory's and each turn's, BM25 over memory texts and over turns (a turn's match
//! ranks the memories that cite it), entities the query names, the time range it names, and, with
//! `include_turns`, the turns no active memory cites, by their words and their vectors), fuses
//! them by weighted reciprocal rank fusion (`fuse`), then runs the ordered stages of `stages`
//! (importance, links, what was said nearby, the cards, the window, speaker focus, the date lift,
//! diversity), and answers each result with its evidence turns, entities, links followed and the
//! score parts that ranked it. `budget_tokens` packs the best results that fit, never a turn twice.
//!
//! Every list is read exactly, per user: a per-user filter after an approximate scan would lose
//! recall, and one user's store is small enough to read whole.

pub mod focus;
pub mod fuse;
mod lists;
mod nearby;
mod pack;
pub mod query;
mod stages;

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, Utc};
use memsift_core::{MemoryId, MessageId};
use memsift_store::{MemoryCard, TurnCard};
use serde::Serialize;

use crate::app::App;
use crate::timings::{Phase, timed};
use fuse::Link;
pub use fuse::{Key, ScoreParts, Signal, Weights};
pub use lists::speaker_names;
use pack::pack;
use stages::Ranking;
pub use stages::{STAGES, Stage, Stages};

/// How many candidates each signal contributes before fusion.
const CANDIDATES_PER_SIGNAL: usize = 50;

/// The largest `k` a search answers.
pub const MAX_K: usize = 100;

/// Which ranked lists a search fuses and which stages follow; everything by default. `memsift
/// eval retrieval` turns the lists on one at a time, and the stages off one at a time, to measure
/// each.
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
    /// The time range the query names, as a list.
    pub dates: bool,
    /// The stages after fusion that run ([`STAGES`] says what each is for).
    pub stages: Stages,
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
            stages: Stages::all(),
        }
    }
}

impl Signals {
    /// No list and no optional stage (the starting point for measuring one list alone).
    pub fn none() -> Self {
        Signals {
            vector: false,
            lexical: false,
            evidence: false,
            turn_vectors: false,
            entities: false,
            dates: false,
            stages: Stages::none(),
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
    /// How they are weighed; `None` is `[search.weights]` (evaluations try others).
    pub weights: Option<Weights>,
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
            weights: None,
            record_access: true,
        }
    }
}

/// A turn as evidence: who said what, when.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct EvidenceTurn {
    /// The message.
    pub id: MessageId,
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
    pub from: MemoryId,
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
    // One read says where both of the user's stamps stand; every held index is checked against it.
    let Some(snapshot) = app.store.search().snapshot(&request.user).await? else {
        return Ok(SearchAnswer::default());
    };
    let now = app.clock.now();
    // Parsed once: the date list reads it, and the lift after fusion applies it.
    let signals = request.signals;
    let range = if signals.dates || signals.stages.contains(Stage::DateLift) {
        crate::language::language().time_range(&request.query, now)
    } else {
        None
    };
    let weights = request.weights.as_ref().unwrap_or(&app.config.search.weights);
    let (lists, memory_words) = lists::gather(app, &snapshot, request, weights, range).await?;
    let mut ranking = Ranking {
        app,
        user_id: snapshot.user_id,
        request,
        weights,
        range,
        memory_words: &memory_words,
        ranked: fuse::fuse(&lists, weights),
        importance: HashMap::new(),
        followed: HashMap::new(),
        hits: Vec::new(),
        n_candidates: 0,
    };
    ranking.run().await?;
    let n_candidates = ranking.n_candidates;
    let (results, n_tokens) = pack(ranking.hits, request.k, request.budget_tokens);
    if request.record_access {
        let returned: Vec<MemoryId> = results
            .iter()
            .filter_map(|hit| match &hit.key {
                Key::Memory(id) => Some(*id),
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

fn memory_keys(ranked: &[(Key, ScoreParts)]) -> Vec<MemoryId> {
    ranked
        .iter()
        .filter_map(|(key, _)| match key {
            Key::Memory(id) => Some(*id),
            Key::Turn(_) => None,
        })
        .collect()
}

fn evidence(card: &TurnCard) -> EvidenceTurn {
    EvidenceTurn {
        id: card.id,
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
    cards: &HashMap<MemoryId, MemoryCard>,
    turns: &HashMap<MessageId, TurnCard>,
    followed: &HashMap<MemoryId, Vec<Link>>,
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
                            from: link.from,
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
    let mut covered: HashSet<MessageId> = HashSet::new();
    let (mut fresh, mut repeated) = (Vec::new(), Vec::new());
    for hit in hits {
        let ids: Vec<MessageId> = hit.evidence.iter().map(|turn| turn.id).collect();
        if !ids.is_empty() && ids.iter().all(|id| covered.contains(id)) {
            repeated.push(hit);
        } else {
            covered.extend(ids);
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
pub(crate) mod tests {
    use std::hash::{Hash, Hasher};

    use super::*;

    /// The bits of a test id named `name`: ids of names up to eight bytes sort as the names do.
    fn id_bits(name: &str) -> u128 {
        let mut high = [0u8; 8];
        let n = name.len().min(8);
        high[..n].copy_from_slice(&name.as_bytes()[..n]);
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        name.hash(&mut hasher);
        (u128::from(u64::from_be_bytes(high)) << 64) | u128::from(hasher.finish())
    }

    /// A memory id for a test, by name.
    pub(crate) fn memory_named(name: &str) -> MemoryId {
        MemoryId::from_u128(id_bits(name))
    }

    /// A message id for a test, by name.
    pub(crate) fn turn_named(name: &str) -> MessageId {
        MessageId::from_u128(id_bits(name))
    }

    pub(super) fn turn(id: &str) -> EvidenceTurn {
        EvidenceTurn {
            id: turn_named(id),
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
            hit(Key::Memory(memory_named("a")), "a", &["t1"]),
            hit(Key::Memory(memory_named("b")), "b", &["t1"]),
            hit(Key::Memory(memory_named("c")), "c", &["t2"]),
        ];
        let order: Vec<String> = diversify(hits).into_iter().map(|hit| hit.text).collect();
        assert_eq!(order, ["a", "c", "b"]);
    }
}
