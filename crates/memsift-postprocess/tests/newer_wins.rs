//! The newer fact wins: a pair of memories where one states a change of the other, found in
//! either order and said at any times, ends with the older one marked superseded.
//!
//! The generator builds a stale fact and its change ("Noah lives in Lisbon." / "Noah now lives in
//! Porto."), gives each a time it was said, and hands the pair over in a random first-seen order,
//! the way planning finds it (whichever memory was being related found the other). The pair goes
//! through the same steps as the relationship stage: oriented newer first, asked of the offline
//! judge, read back by the parser; the end the verdict's kind marks is the one the store archives.

mod common;

use common::archived;
use memsift_core::MemoryId;
use memsift_postprocess::MemoryText;
use proptest::prelude::*;

const PEOPLE: &[&str] = &["Noah", "Ana", "Caroline", "Melanie"];
const PLACES: &[&str] = &["Lisbon", "Porto", "Berlin", "Madrid", "Oslo"];
/// How the change is said: the place goes where `{}` is.
const CHANGES: &[&str] = &["now lives in {}.", "lives in {} now.", "has now moved and lives in {}."];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn the_memory_that_states_the_change_survives_in_either_order(
        person in 0..PEOPLE.len(),
        (old_place, new_place) in (0..PLACES.len(), 0..PLACES.len()).prop_filter("two places", |(a, b)| a != b),
        change in 0..CHANGES.len(),
        old_at in 0i64..1_000,
        gap in 1i64..1_000,
        reversed in any::<bool>(),
    ) {
        let name = PEOPLE[person];
        let stale = MemoryText { id: MemoryId::new_v7(), text: format!("{name} lives in {}.", PLACES[old_place]) };
        let change = MemoryText {
            id: MemoryId::new_v7(),
            text: format!("{name} {}", CHANGES[change].replace("{}", PLACES[new_place])),
        };
        let said = [(stale.id, old_at), (change.id, old_at + gap)];
        let (first, second) = if reversed { (&change, &stale) } else { (&stale, &change) };
        prop_assert_eq!(archived(first, second, &said), Some(stale.id), "{:?} / {:?}", first.text, second.text);
    }
}
