//! What a cut answer leaves undone: the turns of its chunk a continuation must read again.
//!
//! An answer whose JSON never closed was cut, whatever stop reason the provider gave (`end_turn`
//! and `stop` answers are cut too, by a model that stopped early). Its closed elements are kept;
//! the part the model never wrote is asked for again, from the last turn a kept item cites, since
//! the model may have had more to say about that turn, or from the chunk's start when no item
//! cites one.

use std::collections::HashSet;

use memsift_core::MessageId;

use crate::ProcessOutput;

/// The turns of `chunk_turns` (the chunk's turns, in conversation order) that a continuation of
/// `output` must cover: `None` when the answer's JSON closed; otherwise the turns from the last one
/// cited by an item the answer salvaged (kept, or dropped as a duplicate of a stored memory, whose
/// citations pass to that memory) to the end, or every turn when no salvaged item cites one.
pub fn unfinished_turns<'a>(output: &ProcessOutput, chunk_turns: &'a [MessageId]) -> Option<&'a [MessageId]> {
    if !output.cut_off {
        return None;
    }
    let cited: HashSet<MessageId> = output
        .items
        .iter()
        .flat_map(|item| &item.evidence)
        .chain(output.dropped.iter().flat_map(|drop| &drop.evidence))
        .copied()
        .collect();
    let start = chunk_turns.iter().rposition(|turn| cited.contains(turn)).unwrap_or(0);
    Some(&chunk_turns[start..])
}
