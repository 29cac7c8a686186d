//! Linking hints after a stage drops items: each hint re-pointed at its target's new position, or dropped with it.

use crate::ValidItem;

/// Keeps the items at `kept` (positions in `items`) and re-points their linking hints at the new positions,
/// dropping hints to removed items and hints to the item itself.
pub fn retain_with_hints(items: Vec<ValidItem>, kept: &[usize]) -> Vec<ValidItem> {
    let mut new_position = vec![None; items.len()];
    for (position, &index) in kept.iter().enumerate() {
        if let Some(slot) = new_position.get_mut(index) {
            *slot = Some(position);
        }
    }
    let mut slots: Vec<Option<ValidItem>> = items.into_iter().map(Some).collect();
    let mut retained = Vec::with_capacity(kept.len());
    for (position, &index) in kept.iter().enumerate() {
        let Some(mut item) = slots.get_mut(index).and_then(Option::take) else {
            continue;
        };
        item.linking_hints = remap_hints(&item.linking_hints, &new_position, position);
        retained.push(item);
    }
    retained
}

/// Maps hints through `new_position` (old index → new index), keeping each target once and never `own`.
pub(crate) fn remap_hints(hints: &[usize], new_position: &[Option<usize>], own: usize) -> Vec<usize> {
    let mut remapped = Vec::with_capacity(hints.len());
    for hint in hints {
        if let Some(&Some(target)) = new_position.get(*hint)
            && target != own
            && !remapped.contains(&target)
        {
            remapped.push(target);
        }
    }
    remapped
}
