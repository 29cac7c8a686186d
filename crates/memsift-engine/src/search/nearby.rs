//! What was said next to the best results: the turns a place or two from theirs in the same
//! conversation, as the memories citing them (or, with `include_turns`, as themselves), for
//! `fuse::expand_nearby` to rank.

use std::collections::HashMap;

use memsift_core::{MessageId, UserId};

use super::fuse::{Key, MAX_NEARBY_SPAN, Nearby, ScoreParts, Weights};
use crate::app::App;
use crate::held::MemoryWords;

/// The turns said within `weights.nearby_span` places of the top `weights.nearby_parents`
/// results' turns (a memory's evidence turns, or the turn itself), each as the memories that cite
/// it, or as itself when none does and `include_turns` is set.
pub(super) async fn read(
    app: &App,
    user_id: UserId,
    words: &MemoryWords,
    ranked: &[(Key, ScoreParts)],
    weights: &Weights,
    include_turns: bool,
) -> anyhow::Result<Vec<Nearby>> {
    let mut parents_of: HashMap<MessageId, Vec<&Key>> = HashMap::new();
    for (key, _) in ranked.iter().take(weights.nearby_parents) {
        let turns: &[MessageId] = match key {
            Key::Memory(id) => words.cited_by_memory(id),
            Key::Turn(id) => std::slice::from_ref(id),
        };
        for turn in turns {
            parents_of.entry(*turn).or_default().push(key);
        }
    }
    let turns: Vec<MessageId> = parents_of.keys().copied().collect();
    let neighbours = app
        .store
        .search()
        .turn_neighbours(user_id, &turns, weights.nearby_span.min(MAX_NEARBY_SPAN))
        .await?;
    let mut nearby = Vec::new();
    for (turn, neighbour, _, same_speaker) in neighbours {
        let citing = words.citing(&neighbour);
        let reached: Vec<Key> = if !citing.is_empty() {
            citing.iter().map(|memory| Key::Memory(*memory)).collect()
        } else if include_turns {
            vec![Key::Turn(neighbour)]
        } else {
            Vec::new()
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
