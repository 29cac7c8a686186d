//! Short ids for known memories: what the prompt shows instead of a 36-character UUID.
//!
//! Our ids are UUIDv7, whose first 12 hex digits are a millisecond timestamp, so prefixes of the
//! whole id collide for every memory written in the same batch. Short ids are therefore prefixes
//! of the id's random part (the last 16 hex digits of the simple form), at least
//! [`MIN_SHORT_ID_LEN`] long and extended until unique. Two ids that share all 16 random digits
//! (astronomically rare, or hand-made) fall back to the full 32 hex digits. It never fails.

use std::collections::{BTreeMap, BTreeSet};

use memsift_core::MemoryId;

/// The shortest short id shown.
pub const MIN_SHORT_ID_LEN: usize = 6;

/// Hex digits of the random part a short id is cut from.
const RANDOM_PART_LEN: usize = 16;

/// Short id → full id for `ids` (duplicates collapse). Every short id is the shortest prefix of
/// its id's random part that no other id's random part starts with, at least
/// [`MIN_SHORT_ID_LEN`] characters, or the full 32-digit hex when the random parts are equal.
pub fn short_ids(ids: &[MemoryId]) -> BTreeMap<String, MemoryId> {
    let distinct: BTreeSet<MemoryId> = ids.iter().copied().collect();
    let mut by_random: Vec<(String, MemoryId)> = distinct.into_iter().map(|id| (random_part(id), id)).collect();
    by_random.sort();
    // In sorted order, the longest prefix an id shares with any other is the one it shares with a
    // neighbour; one more character than that makes it unique.
    let common = |a: &str, b: &str| a.bytes().zip(b.bytes()).take_while(|(x, y)| x == y).count();
    let mut out = BTreeMap::new();
    for (index, (random, id)) in by_random.iter().enumerate() {
        let before = index
            .checked_sub(1)
            .map_or(0, |prev| common(&by_random[prev].0, random));
        let after = by_random.get(index + 1).map_or(0, |next| common(&next.0, random));
        let shared = before.max(after);
        let short = if shared >= RANDOM_PART_LEN {
            simple_hex(*id)
        } else {
            random[..(shared + 1).max(MIN_SHORT_ID_LEN)].to_owned()
        };
        out.insert(short, *id);
    }
    out
}

fn simple_hex(id: MemoryId) -> String {
    id.as_uuid().simple().to_string()
}

fn random_part(id: MemoryId) -> String {
    let hex = simple_hex(id);
    hex[hex.len() - RANDOM_PART_LEN..].to_owned()
}
