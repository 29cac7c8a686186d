//! Packing ranked results into an answer: the first `k`, within a token budget that counts what
//! each result returns (its text and its evidence turns' texts), never a turn twice.

use std::collections::HashSet;

use memsift_core::MessageId;

use super::{Key, SearchHit};

/// The tokens a result puts in front of the caller: its text and the text of every evidence turn
/// returned with it (an agent packing a prompt reads both).
fn returned_tokens(hit: &SearchHit) -> usize {
    memsift_tokens::count_tokens(&hit.text)
        + hit
            .evidence
            .iter()
            .map(|turn| memsift_tokens::count_tokens(&turn.text))
            .sum::<usize>()
}

pub(super) fn pack(hits: Vec<SearchHit>, k: usize, budget_tokens: Option<usize>) -> (Vec<SearchHit>, usize) {
    let mut results = Vec::new();
    let mut seen_turns: HashSet<MessageId> = HashSet::new();
    let mut used = 0usize;
    for hit in hits {
        if results.len() == k {
            break;
        }
        if let Key::Turn(id) = &hit.key
            && seen_turns.contains(id)
        {
            continue;
        }
        let cost = returned_tokens(&hit);
        if budget_tokens.is_some_and(|budget| used + cost > budget) {
            continue;
        }
        used += cost;
        seen_turns.extend(hit.evidence.iter().map(|turn| turn.id));
        results.push(hit);
    }
    (results, used)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::search::EvidenceTurn;
    use crate::search::tests::{hit, memory_named, turn, turn_named};

    #[test]
    fn packing_keeps_to_the_budget_skips_what_does_not_fit_and_never_repeats_a_turn() {
        let long = "word ".repeat(200);
        let hits = vec![
            hit(
                Key::Memory(memory_named("a")),
                "Caroline went to a support group.",
                &["t1"],
            ),
            hit(Key::Memory(memory_named("big")), &long, &["t9"]),
            hit(Key::Turn(turn_named("t1")), "I went to a support group today.", &["t1"]),
            hit(Key::Turn(turn_named("t2")), "Melanie painted a sunrise.", &["t2"]),
        ];
        let (packed, used) = pack(hits.clone(), 10, Some(50));
        let texts: Vec<&str> = packed.iter().map(|hit| hit.text.as_str()).collect();
        assert_eq!(
            texts,
            ["Caroline went to a support group.", "Melanie painted a sunrise."]
        );
        assert!(used <= 50);
        let (first_two, _) = pack(hits, 2, None);
        assert_eq!(first_two.len(), 2);
    }

    proptest::proptest! {
        /// Any results and budget: what is packed, texts and evidence turns together, never
        /// passes the budget, the count said is the count of what is returned, and a result is
        /// left out only when it would pass the budget or repeats a turn.
        #[test]
        fn packed_results_with_their_evidence_never_pass_the_budget(
            results in proptest::collection::vec(
                (proptest::bool::ANY, 0usize..6, "[a-z ]{0,80}", proptest::collection::vec((0usize..6, "[a-z ]{0,120}"), 0..3)),
                0..12,
            ),
            budget in 0usize..200,
        ) {
            let hits: Vec<SearchHit> = results
                .iter()
                .enumerate()
                .map(|(n, (is_turn, turn_id, text, evidence))| {
                    let key = if *is_turn { Key::Turn(turn_named(&format!("t{turn_id}"))) } else { Key::Memory(memory_named(&format!("m{n}"))) };
                    let mut hit = hit(key, text, &[]);
                    hit.evidence = evidence
                        .iter()
                        .map(|(id, said)| EvidenceTurn { text: said.clone(), ..turn(&format!("t{id}")) })
                        .collect();
                    hit
                })
                .collect();
            let (packed, used) = pack(hits.clone(), 100, Some(budget));
            let counted: usize = packed.iter().map(returned_tokens).sum();
            proptest::prop_assert_eq!(used, counted);
            proptest::prop_assert!(used <= budget, "{} > {}", used, budget);
            let smallest_left_out = hits
                .iter()
                .filter(|hit| !packed.iter().any(|kept| kept.key == hit.key && kept.text == hit.text))
                .filter(|hit| !matches!(&hit.key, Key::Turn(id) if packed.iter().any(|kept| kept.evidence.iter().any(|turn| &turn.id == id))))
                .map(returned_tokens)
                .min();
            if let Some(smallest) = smallest_left_out {
                proptest::prop_assert!(used + smallest > budget || packed.len() == 100);
            }
        }
    }
}
