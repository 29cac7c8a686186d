//! Fusing ranked lists into one ranking: weighted reciprocal rank fusion, then priors, then
//! linked-memory expansion. Pure: the lists, priors and links arrive as arguments.
//!
//! Reciprocal rank fusion adds `weight / (k + rank)` for every list an item is in. It needs no
//! calibration between signals whose scores mean different things (a cosine, a BM25 score, a date
//! distance), which is why the reference read side uses it too.

use std::collections::HashMap;

use memsift_core::{MemoryId, MessageId};
use serde::Serialize;

/// What a result is: a memory, or a stored turn no active memory cites.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(tag = "kind", content = "id", rename_all = "snake_case")]
pub enum Key {
    /// An active memory.
    Memory(MemoryId),
    /// A stored turn (message).
    Turn(MessageId),
}

/// The signals that rank results, each with its own list.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Signal {
    /// Cosine similarity of the query's vector to each memory's.
    Vector,
    /// BM25 over memory texts and the turns they cite (the in-memory lexicon).
    Lexical,
    /// Memories whose evidence turns match the query by BM25 over the turn lexicon (what was said,
    /// not how the memory words it).
    Evidence,
    /// Memories whose evidence turns' vectors are nearest the query's.
    EvidenceVector,
    /// Memories joined to an entity the query names.
    Entity,
    /// Memories whose time (when it happens, or when its evidence was said) is in the range the
    /// query names.
    Date,
    /// Turns no active memory cites, by BM25 over the turn lexicon.
    Turns,
    /// Turns no active memory cites, by their vectors.
    TurnVector,
}

pub use memsift_core::config::{MAX_NEARBY_SPAN, SearchWeights as Weights};

/// The weight of one signal's list.
pub fn weight_of(weights: &Weights, signal: Signal) -> f64 {
    match signal {
        Signal::Vector => weights.vector,
        Signal::Lexical => weights.lexical,
        Signal::Evidence => weights.evidence,
        Signal::Entity => weights.entity,
        Signal::Date => weights.date,
        Signal::Turns => weights.turns,
        Signal::EvidenceVector => weights.evidence_vector,
        Signal::TurnVector => weights.turn_vector,
    }
}

/// How much following a link of each type is worth: contradictions and replacements matter most
/// to an answer, a shared entity least (the reference's proactive weights).
pub fn link_type_weight(kind: &str) -> f64 {
    match kind {
        "conflicts" | "invalidated_by" => 1.0,
        "supersedes" => 0.9,
        "causes" | "motivated_by" => 0.8,
        "instance_of" => 0.7,
        _ => 0.4,
    }
}

/// One signal's ranked list, best first, each with the score the signal gave it.
#[derive(Clone, Debug, Default)]
pub struct RankedList {
    /// (item, the signal's own score).
    pub items: Vec<(Key, f64)>,
}

/// How one item was ranked: its rank and raw score in each list, the priors, the fused score.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ScoreParts {
    /// Per signal: (rank from 1, the signal's own score).
    pub signals: Vec<(Signal, usize, f64)>,
    /// The factor importance applied.
    pub prior: f64,
    /// The part that came from following a link to it.
    pub from_links: f64,
    /// The part that came from being said next to a better result.
    pub from_nearby: f64,
    /// The factor applied because the query names other people than this result is about.
    pub speaker_focus: Option<f64>,
    /// The factor applied because it is from the time the query names.
    pub in_range: Option<f64>,
    /// The final score.
    pub fused: f64,
}

/// A link from a ranked memory to another, as read from the store.
#[derive(Clone, Debug, PartialEq)]
pub struct Link {
    /// The ranked memory.
    pub from: MemoryId,
    /// The memory it links to (either direction of the stored link).
    pub to: MemoryId,
    /// The link type.
    pub kind: String,
    /// Its confidence.
    pub confidence: f64,
}

/// Fuses `lists` by weighted reciprocal rank fusion; returns every item with its parts, best first.
///
/// Items a list scores equally share the best of their places in it: when one turn holds three
/// facts, its three memories have the same evidence score, and ranks 1, 2 and 3 among them would
/// let the list's arbitrary order outvote a real difference in another list.
pub fn fuse(lists: &[(Signal, RankedList)], weights: &Weights) -> Vec<(Key, ScoreParts)> {
    let mut parts: HashMap<Key, ScoreParts> = HashMap::new();
    for (signal, list) in lists {
        let weight = weight_of(weights, *signal);
        let mut rank = 0;
        let mut previous: Option<f64> = None;
        for (place, (key, raw)) in list.items.iter().enumerate() {
            if previous != Some(*raw) {
                rank = place + 1;
                previous = Some(*raw);
            }
            let entry = parts.entry(key.clone()).or_default();
            entry.signals.push((*signal, rank, *raw));
            entry.fused += weight / (weights.rrf_k + rank as f64);
        }
    }
    sorted(parts)
}

/// Scales each memory's score by its importance (`importance`, 0–1, by memory id).
pub fn apply_priors(ranked: &mut [(Key, ScoreParts)], importance: &HashMap<MemoryId, f64>, weights: &Weights) {
    for (key, parts) in ranked.iter_mut() {
        let factor = match key {
            Key::Memory(id) => importance
                .get(id)
                .map_or(1.0, |importance| 1.0 + weights.importance_prior * (importance - 0.5)),
            Key::Turn(_) => 1.0,
        };
        parts.prior = factor;
        parts.fused *= factor;
    }
    ranked.sort_by(|a, b| b.1.fused.total_cmp(&a.1.fused).then_with(|| a.0.cmp(&b.0)));
}

/// Adds the memories linked from the top `weights.link_parents` memories: each gets its parent's
/// score × `link_factor` × the type's weight × confidence × inherited importance
/// (0.7 × its own + 0.3 × the parent's). Returns the links followed, by the memory they reached.
pub fn expand_links(
    ranked: &mut Vec<(Key, ScoreParts)>,
    links: &[Link],
    importance: &HashMap<MemoryId, f64>,
    weights: &Weights,
) -> HashMap<MemoryId, Vec<Link>> {
    let parents: Vec<(MemoryId, f64)> = ranked
        .iter()
        .filter_map(|(key, parts)| match key {
            Key::Memory(id) => Some((*id, parts.fused)),
            Key::Turn(_) => None,
        })
        .take(weights.link_parents)
        .collect();
    let mut followed: HashMap<MemoryId, Vec<Link>> = HashMap::new();
    let mut added: HashMap<Key, f64> = HashMap::new();
    for (parent, parent_score) in &parents {
        for link in links.iter().filter(|link| &link.from == parent) {
            if link.confidence < weights.link_confidence_floor || &link.to == parent {
                continue;
            }
            let inherited = 0.7 * importance.get(&link.to).copied().unwrap_or(0.5)
                + 0.3 * importance.get(parent).copied().unwrap_or(0.5);
            let gain = parent_score * weights.link_factor * link_type_weight(&link.kind) * link.confidence * inherited;
            *added.entry(Key::Memory(link.to)).or_default() += gain;
            followed.entry(link.to).or_default().push(link.clone());
        }
    }
    add_gains(ranked, added, |parts| &mut parts.from_links);
    followed
}

/// What was said next to a ranked result, as read from the store.
#[derive(Clone, Debug, PartialEq)]
pub struct Nearby {
    /// The ranked result.
    pub from: Key,
    /// The memory citing a turn said next to it, or that turn when no memory cites it.
    pub to: Key,
    /// Whether the result's turn and this one have the same speaker (by name, or by role when
    /// neither has a name).
    pub same_speaker: bool,
}

/// Adds what was said next to the top `weights.nearby_parents` results: each gets the best of its
/// parents' scores × `nearby_factor`, × `nearby_other_speaker` when another speaker said it. An
/// answer often sits a turn or two from the words a question shares with the conversation ("How
/// did she feel while watching the meteor shower?" is answered after the turn that names the
/// shower), and mostly in the same speaker's next or previous turn: of the evidence turns missed
/// beside a returned one on LoCoMo, 93 were two places away (the same speaker, as turns
/// alternate) and 30 one place away.
pub fn expand_nearby(ranked: &mut Vec<(Key, ScoreParts)>, nearby: &[Nearby], weights: &Weights) {
    let parents: HashMap<&Key, f64> = ranked
        .iter()
        .take(weights.nearby_parents)
        .map(|(key, parts)| (key, parts.fused))
        .collect();
    let mut added: HashMap<Key, f64> = HashMap::new();
    for near in nearby {
        let Some(&parent_score) = parents.get(&near.from) else {
            continue;
        };
        if near.to == near.from {
            continue;
        }
        let speaker = if near.same_speaker {
            1.0
        } else {
            weights.nearby_other_speaker
        };
        let gain = parent_score * weights.nearby_factor * speaker;
        if gain.is_nan() || gain <= 0.0 {
            continue;
        }
        let best = added.entry(near.to.clone()).or_default();
        *best = best.max(gain);
    }
    add_gains(ranked, added, |parts| &mut parts.from_nearby);
}

/// Adds each key's gain to its fused score and to the part `part` names (a key not ranked yet
/// enters with a neutral prior), then ranks again.
fn add_gains(ranked: &mut Vec<(Key, ScoreParts)>, added: HashMap<Key, f64>, part: fn(&mut ScoreParts) -> &mut f64) {
    if added.is_empty() {
        return;
    }
    let mut by_key: HashMap<Key, ScoreParts> = ranked.drain(..).collect();
    for (key, gain) in added {
        let entry = by_key.entry(key).or_insert_with(|| ScoreParts {
            prior: 1.0,
            ..ScoreParts::default()
        });
        *part(entry) += gain;
        entry.fused += gain;
    }
    *ranked = sorted(by_key);
}

fn sorted(parts: HashMap<Key, ScoreParts>) -> Vec<(Key, ScoreParts)> {
    let mut ranked: Vec<(Key, ScoreParts)> = parts.into_iter().collect();
    ranked.sort_by(|a, b| b.1.fused.total_cmp(&a.1.fused).then_with(|| a.0.cmp(&b.0)));
    ranked
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::search::tests::memory_named;

    fn memory(name: &str) -> Key {
        Key::Memory(memory_named(name))
    }

    fn list(ids: &[&str]) -> RankedList {
        RankedList {
            items: ids
                .iter()
                .enumerate()
                .map(|(rank, id)| (memory(id), 1.0 / (rank as f64 + 1.0)))
                .collect(),
        }
    }

    #[test]
    fn an_item_two_signals_agree_on_beats_one_only_a_single_signal_ranks_first() {
        let weights = Weights::default();
        let fused = fuse(
            &[
                (Signal::Vector, list(&["a", "b", "c"])),
                (Signal::Lexical, list(&["b", "d", "c"])),
            ],
            &weights,
        );
        let order: Vec<Key> = fused.iter().map(|(key, _)| key.clone()).collect();
        assert_eq!(order[0], memory("b"));
        assert_eq!(
            fused[0].1.signals,
            vec![(Signal::Vector, 2, 0.5), (Signal::Lexical, 1, 1.0)]
        );
        // c is in both lists at rank 3 and so beats a, first in one list only: RRF rewards agreement.
        assert!(order.iter().position(|key| *key == memory("c")) < order.iter().position(|key| *key == memory("a")));
    }

    #[test]
    fn items_a_list_scores_equally_share_its_best_place() {
        // One turn holds three facts: its three memories tie in the evidence list. The memory
        // vector ranks the accountant first; the tie must not outvote it.
        let weights = Weights::default();
        let tied = RankedList {
            items: vec![(memory("runs"), 0.8), (memory("cat"), 0.8), (memory("accountant"), 0.8)],
        };
        let fused = fuse(
            &[
                (Signal::Vector, list(&["accountant", "runs", "cat"])),
                (Signal::EvidenceVector, tied),
            ],
            &weights,
        );
        assert_eq!(fused[0].0, memory("accountant"));
        for (_, parts) in &fused {
            assert!(parts.signals.contains(&(Signal::EvidenceVector, 1, 0.8)), "{parts:?}");
        }
        // After a tie, the next score takes its own place, not the next rank.
        let stepped = fuse(
            &[(
                Signal::Lexical,
                RankedList {
                    items: vec![(memory("a"), 2.0), (memory("b"), 2.0), (memory("c"), 1.0)],
                },
            )],
            &weights,
        );
        let c = stepped.iter().find(|(key, _)| *key == memory("c")).unwrap();
        assert_eq!(c.1.signals, vec![(Signal::Lexical, 3, 1.0)]);
    }

    #[test]
    fn a_signal_with_no_weight_changes_nothing() {
        let weights = Weights {
            lexical: 0.0,
            ..Weights::default()
        };
        let fused = fuse(
            &[
                (Signal::Vector, list(&["a", "b"])),
                (Signal::Lexical, list(&["b", "a"])),
            ],
            &weights,
        );
        assert_eq!(fused[0].0, memory("a"));
    }

    #[test]
    fn links_below_the_floor_are_not_followed_and_the_type_and_confidence_scale_the_rest() {
        let weights = Weights::default();
        let mut ranked = fuse(&[(Signal::Vector, list(&["a"]))], &weights);
        let link = |to: &str, kind: &str, confidence: f64| Link {
            from: memory_named("a"),
            to: memory_named(to),
            kind: kind.to_owned(),
            confidence,
        };
        let links = vec![
            link("x", "conflicts", 0.9),
            link("y", "instance_of", 0.9),
            link("z", "conflicts", 0.5),
        ];
        let followed = expand_links(&mut ranked, &links, &HashMap::new(), &weights);
        let order: Vec<Key> = ranked.iter().map(|(key, _)| key.clone()).collect();
        assert_eq!(order, vec![memory("a"), memory("x"), memory("y")]);
        assert!(!followed.contains_key(&memory_named("z")));
        assert_eq!(followed[&memory_named("x")][0].kind, "conflicts");
    }

    fn near(from: &str, to: &str, same_speaker: bool) -> Nearby {
        Nearby {
            from: memory(from),
            to: memory(to),
            same_speaker,
        }
    }

    #[test]
    fn what_was_said_next_to_a_top_result_gains_its_score_less_from_another_speaker_and_only_from_parents() {
        let weights = Weights {
            nearby_parents: 2,
            nearby_factor: 0.5,
            nearby_other_speaker: 0.4,
            ..Weights::default()
        };
        let mut ranked = fuse(&[(Signal::Vector, list(&["a", "b", "c", "d"]))], &weights);
        let score = |ranked: &[(Key, ScoreParts)], id: &str| {
            ranked
                .iter()
                .find(|(key, _)| *key == memory(id))
                .map(|(_, parts)| parts.clone())
        };
        let a = score(&ranked, "a").unwrap().fused;
        let d = score(&ranked, "d").unwrap().fused;
        let nearby = vec![
            near("a", "x", true),
            near("a", "y", false),
            near("b", "x", true),
            near("c", "z", true),
            near("a", "a", true),
            near("a", "d", true),
        ];
        expand_nearby(&mut ranked, &nearby, &weights);
        let x = score(&ranked, "x").unwrap();
        assert_eq!(x.from_nearby, a * 0.5, "the best parent's gain, not the sum of both");
        assert_eq!(
            score(&ranked, "y").unwrap().from_nearby,
            a * 0.5 * 0.4,
            "less when another speaker said it"
        );
        assert!(score(&ranked, "z").is_none(), "c is not among the two parents");
        assert_eq!(
            score(&ranked, "a").unwrap().from_nearby,
            0.0,
            "nothing gains from itself"
        );
        let d_after = score(&ranked, "d").unwrap();
        assert_eq!((d_after.fused, d_after.from_nearby), (d + a * 0.5, a * 0.5));
        assert!(ranked.windows(2).all(|pair| pair[0].1.fused >= pair[1].1.fused));

        let mut untouched = fuse(&[(Signal::Vector, list(&["a", "b"]))], &weights);
        let before = untouched.clone();
        let off = Weights {
            nearby_factor: 0.0,
            ..weights
        };
        expand_nearby(&mut untouched, &[near("a", "b", true)], &off);
        let fused = |ranked: &[(Key, ScoreParts)]| {
            ranked
                .iter()
                .map(|(key, parts)| (key.clone(), parts.fused))
                .collect::<Vec<_>>()
        };
        assert_eq!(fused(&untouched), fused(&before), "a factor of 0 changes no score");
    }

    proptest::proptest! {
        /// Any ranking and any neighbours: no result is lost, no score goes down, the list stays
        /// sorted, and nothing gains more than the factor × the best parent's score.
        #[test]
        fn nearby_only_adds_within_the_factor_and_keeps_the_order_sound(
            ids in proptest::collection::vec("[a-h]", 1..8),
            pairs in proptest::collection::vec(("[a-j]", "[a-j]", proptest::bool::ANY), 0..12),
            factor in 0.0f64..2.0,
            other_speaker in 0.0f64..1.0,
            parents in 0usize..6,
        ) {
            let weights = Weights {
                nearby_factor: factor,
                nearby_parents: parents,
                nearby_other_speaker: other_speaker,
                ..Weights::default()
            };
            let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
            let mut ranked = fuse(&[(Signal::Vector, list(&ids))], &weights);
            let before: HashMap<Key, f64> = ranked.iter().map(|(key, parts)| (key.clone(), parts.fused)).collect();
            let best_parent = ranked.iter().take(parents).map(|(_, parts)| parts.fused).fold(0.0, f64::max);
            let nearby: Vec<Nearby> = pairs.iter().map(|(from, to, same_speaker)| near(from, to, *same_speaker)).collect();
            expand_nearby(&mut ranked, &nearby, &weights);
            for (key, score) in &before {
                let after = ranked.iter().find(|(other, _)| other == key).map(|(_, parts)| parts.fused);
                proptest::prop_assert!(after.is_some_and(|after| after >= *score));
            }
            for (_, parts) in &ranked {
                proptest::prop_assert!(parts.from_nearby >= 0.0 && parts.from_nearby <= factor * best_parent + 1e-12);
            }
            proptest::prop_assert!(ranked.windows(2).all(|pair| pair[0].1.fused >= pair[1].1.fused));
        }
    }

    #[test]
    fn importance_lifts_a_memory_among_equals() {
        // Equal weights, so the two memories tie before the priors.
        let weights = Weights::default().with_overrides("vector=1,lexical=1").unwrap();
        let mut ranked = fuse(
            &[(Signal::Vector, list(&["a"])), (Signal::Lexical, list(&["b"]))],
            &weights,
        );
        let priors = HashMap::from([(memory_named("a"), 0.1), (memory_named("b"), 0.9)]);
        apply_priors(&mut ranked, &priors, &weights);
        assert_eq!(ranked[0].0, memory("b"));
    }
}
