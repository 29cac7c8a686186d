//! What was said next to the best results: the turns a place or two from theirs in the same
//! conversation, as the memories citing them (or, with `include_turns`, as themselves), for
//! `fuse::expand_nearby` to rank.

use std::collections::HashMap;

use memsift_core::UserId;
use memsift_store::MemoryCard;

use super::fuse::{Key, MAX_NEARBY_SPAN, Nearby, ScoreParts, Weights};
use crate::app::App;

/// The turns said within `weights.nearby_span` places of the top `weights.nearby_parents`
/// results' turns (a memory's evidence turns, or the turn itself), each as the memories that cite
/// it, or as itself when none does and `include_turns` is set.
pub(super) async fn read(
    app: &App,
    user_id: UserId,
    ranked: &[(Key, ScoreParts)],
    cards: &HashMap<String, MemoryCard>,
    weights: &Weights,
    include_turns: bool,
) -> anyhow::Result<Vec<Nearby>> {
    let mut parents_of: HashMap<String, Vec<&Key>> = HashMap::new();
    for (key, _) in ranked.iter().take(weights.nearby_parents) {
        let turns: Vec<String> = match key {
            Key::Memory(id) => cards
                .get(id)
                .map(|card| card.evidence.iter().map(|turn| turn.id.clone()).collect())
                .unwrap_or_default(),
            Key::Turn(id) => vec![id.clone()],
        };
        for turn in turns {
            parents_of.entry(turn).or_default().push(key);
        }
    }
    let turns: Vec<String> = parents_of.keys().cloned().collect();
    let neighbours = app
        .store
        .search()
        .turn_neighbours(user_id, &turns, weights.nearby_span.min(MAX_NEARBY_SPAN))
        .await?;
    let neighbour_ids: Vec<String> = neighbours
        .iter()
        .map(|(_, neighbour, _, _)| neighbour.clone())
        .collect();
    let mut citing: HashMap<String, Vec<Key>> = HashMap::new();
    for (turn, memory) in app.store.search().turn_citations(user_id, &neighbour_ids).await? {
        citing.entry(turn).or_default().push(Key::Memory(memory.to_string()));
    }
    let mut nearby = Vec::new();
    for (turn, neighbour, _, same_speaker) in neighbours {
        let reached: Vec<Key> = match citing.get(&neighbour) {
            Some(memories) => memories.clone(),
            None if include_turns => vec![Key::Turn(neighbour)],
            None => Vec::new(),
        };
        for parent in parents_of.get(&turn).into_iter().flatten() {
            for to in &reached {
                nearby.push(Nearby {
                    from: (*parent).clone(),
                    to: to.clone(),
                    same_speaker,
                });
            }
        }
    }
    Ok(nearby)
}
