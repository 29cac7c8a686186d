//! The offline judge's upkeep rules: refinement (trim filler, split independent clauses) and entity GC
//! (merge look-alikes, delete junk, keep the rest).

use memsift_core::text::collapse_whitespace;
use memsift_heuristic::reading;
use serde_json::json;

use super::{split_after, without_end_punctuation};
use crate::entity_gc::EntityGcTask;
use crate::refinement::RefinementTask;
use crate::words::{is_stopword, tokens};

/// Filler a trim removes, longest first so "it is worth noting that" goes before any of its words would.
const FILLER: &[&str] = &[
    "it is worth noting that",
    "basically",
    "actually",
    "really",
    "in fact",
    "very",
];
/// Each part of a split must be at least this long, so abbreviations ("Dr. Smith") are not split points.
const MIN_SPLIT_PART_CHARS: usize = 25;

/// Refinement: trim filler, else split independent clauses when every part names whom it is about.
pub(super) fn refinement(task: &RefinementTask) -> serde_json::Value {
    let original = collapse_whitespace(&task.memory);
    let trimmed = without_filler(&task.memory);
    if !trimmed.is_empty() && trimmed.chars().count() < original.chars().count() {
        return json!({"action": "trim", "text": trimmed});
    }
    let pieces: Vec<String> = split_after(&original, &[';'])
        .into_iter()
        .flat_map(reading::sentences)
        .map(|piece| without_end_punctuation(&piece).to_owned())
        .filter(|piece| !piece.is_empty())
        .collect();
    let subject = pieces.first().and_then(|first| named_subject(first));
    // Each part becomes a memory of its own, so it starts like a sentence and says whom it is about.
    let parts: Option<Vec<String>> = pieces
        .iter()
        .enumerate()
        .map(|(index, piece)| standalone(piece, index, subject.as_deref()))
        .collect();
    let Some(parts) = parts else {
        return json!({"action": "do_nothing", "reason": "refine rule: a part would not stand on its own (it does not name whom it is about, points back, or holds a [placeholder])"});
    };
    let splittable =
        (2..=5).contains(&parts.len()) && parts.iter().all(|part| part.chars().count() >= MIN_SPLIT_PART_CHARS);
    if splittable {
        return json!({"action": "split", "texts": parts});
    }
    json!({"action": "do_nothing", "reason": "refine rule: no filler and no independent clauses of 25 or more characters"})
}

/// The name a memory opens with, as written ("Caroline", "The user").
fn named_subject(text: &str) -> Option<String> {
    let subject = reading::subject(text)?;
    let n_words = subject.split_whitespace().count();
    Some(
        text.split_whitespace()
            .take(n_words)
            .collect::<Vec<_>>()
            .join(" ")
            .trim_end_matches("'s")
            .to_owned(),
    )
}

/// A split part as a memory of its own: "he" or "she" opening a later part becomes the first part's subject, "his"
/// or "her" its possessive. A part is refused when the memory opens with no name (nothing to say whom a later part is
/// about), when it does not name the subject ("Doing it every day is rewarding."), when it still points back ("It has
/// been …"), or when it holds a bracketed placeholder ("Long drives in [this car] …"): each would be a memory that
/// cannot be read alone.
fn standalone(piece: &str, index: usize, subject: Option<&str>) -> Option<String> {
    let subject = subject?;
    let (first_word, rest) = piece.split_once(' ').unwrap_or((piece, ""));
    let piece = match (index, first_word.to_lowercase().as_str()) {
        (1.., "he" | "she") => format!("{subject} {rest}"),
        (1.., "his" | "her") => format!("{subject}'s {rest}"),
        _ => piece.to_owned(),
    };
    if piece.contains(['[', ']']) || !names(&piece, subject) {
        return None;
    }
    (index == 0 || reading::stands_alone(&piece)).then(|| format!("{}.", capitalised(&piece)))
}

/// Whether `text` names `subject` as whole words, possessive or not ("Calvin's car" names Calvin).
fn names(text: &str, subject: &str) -> bool {
    let bare = |text: &str| -> Vec<String> {
        tokens(text)
            .into_iter()
            .map(|token| token.strip_suffix("'s").map(str::to_owned).unwrap_or(token))
            .collect()
    };
    let (words, subject) = (bare(text), bare(subject));
    !subject.is_empty() && words.windows(subject.len()).any(|window| window == subject.as_slice())
}

/// The text without filler words and phrases, with the commas they leave behind tidied and the first letter's case
/// kept.
fn without_filler(text: &str) -> String {
    let mut words: Vec<String> = text.split_whitespace().map(str::to_owned).collect();
    for filler in FILLER {
        let n_filler = filler.split_whitespace().count();
        let mut at = 0;
        while at + n_filler <= words.len() {
            let window = words[at..at + n_filler].join(" ");
            let bare = window.to_lowercase();
            let bare = bare.trim_end_matches(',');
            if bare == *filler {
                // "In fact, she…": the comma goes with the filler.
                words.drain(at..at + n_filler);
            } else {
                at += 1;
            }
        }
    }
    let trimmed = words.join(" ");
    if text.trim_start().starts_with(char::is_uppercase) {
        return capitalised(&trimmed);
    }
    trimmed
}

/// The text with its first letter in upper case.
fn capitalised(text: &str) -> String {
    let mut chars = text.chars();
    chars
        .next()
        .map_or_else(String::new, |first| first.to_uppercase().chain(chars).collect())
}

pub(super) fn entity_gc(task: &EntityGcTask) -> serde_json::Value {
    let name = tokens(&task.entity.name);
    let contains = |outer: &[String], inner: &[String]| {
        !inner.is_empty() && outer.windows(inner.len()).any(|window| window == inner)
    };
    let target = task.candidates.iter().find(|candidate| {
        let candidate_name = tokens(&candidate.name);
        contains(&candidate_name, &name) || contains(&name, &candidate_name)
    });
    if let Some(target) = target {
        let reasoning = format!(
            "merge rule: `{}` and `{}` share a whole-word name",
            task.entity.name, target.name
        );
        return json!({"action": "merge", "target_id": target.id, "reasoning": reasoning});
    }
    if let Some(target) = task
        .candidates
        .iter()
        .find(|candidate| is_misspelling(&task.entity.name, &candidate.name, &task.entity.kind))
    {
        let reasoning = format!(
            "typo rule: `{}` is `{}` with two neighbouring letters swapped, one letter left out or added",
            task.entity.name, target.name
        );
        return json!({"action": "merge", "target_id": target.id, "reasoning": reasoning});
    }
    // "ER", "UK", "US": a short name in capitals is an abbreviation, not junk.
    if is_abbreviation(&task.entity.name) {
        return json!({"action": "keep", "reasoning": "keep rule: a short name in capitals is an abbreviation"});
    }
    if task.entity.name.trim().chars().count() <= 2 || name.iter().all(|token| is_stopword(token)) {
        return json!({"action": "delete", "reasoning": "delete rule: the name is too short or only stopwords"});
    }
    json!({"action": "keep", "reasoning": "keep rule: no candidate shares its name and the name is meaningful"})
}

/// Names of at least this many letters may be merged as misspellings of each other; shorter ones
/// ("Jon", "Jan") are too often two names.
const MIN_TYPO_NAME_CHARS: usize = 6;

/// Whether `name` is `other` typed wrong (case aside): two neighbouring letters swapped ("San
/// Francsico"), or, for anything but a person, one letter left out or added before the last
/// ("Philadelpia", "Barcellona"). A letter replaced by another is not taken ("Carolina" and
/// "Caroline" are two names), nor a person's letter more or less ("Daniel", "Daniela"), nor a
/// letter more at the end ("Marian", "Mariana").
fn is_misspelling(name: &str, other: &str, kind: &str) -> bool {
    let (a, b) = (name.trim().to_lowercase(), other.trim().to_lowercase());
    let (a_len, b_len) = (a.chars().count(), b.chars().count());
    if a == b || a_len.min(b_len) < MIN_TYPO_NAME_CHARS || strsim::osa_distance(&a, &b) != 1 {
        return false;
    }
    // One edit apart: a swap keeps the length and is two edits without transpositions.
    let swapped = a_len == b_len && strsim::levenshtein(&a, &b) == 2;
    let (short, long) = if a_len < b_len { (&a, &b) } else { (&b, &a) };
    let inner_letter = a_len != b_len && !long.starts_with(short.as_str());
    swapped || (inner_letter && !kind.eq_ignore_ascii_case("person"))
}

/// A name of two to five capital letters (digits allowed after the first): "ER", "UK", "NASA".
fn is_abbreviation(name: &str) -> bool {
    let name = name.trim();
    (2..=5).contains(&name.chars().count())
        && name.chars().next().is_some_and(|first| first.is_uppercase())
        && name.chars().all(|c| c.is_uppercase() || c.is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use super::super::offline_answer;
    use crate::entity_gc::{EntityRef, EntityVerdict, entity_gc_request, name_candidates, parse_entity_gc_answer};
    use crate::refinement::{Refinement, parse_refinement_answer, refinement_request};
    use crate::testing::{memories, prompt};

    use super::{is_abbreviation, is_misspelling};

    #[test]
    fn refinement_trims_filler_splits_clauses_or_leaves_it() {
        let refine = |text: &str| {
            let request = refinement_request(&prompt("refinement"), &memories(&[text])[0]);
            parse_refinement_answer(&offline_answer(&request.user_message).unwrap(), text).unwrap()
        };
        assert_eq!(
            refine(
                "In fact, Caroline basically really loves  hiking in the Alps every summer with her old university friends."
            ),
            Refinement::Trim(
                "Caroline loves hiking in the Alps every summer with her old university friends.".to_owned()
            )
        );
        assert_eq!(
            refine("Caroline works as a nurse at the Charité hospital; she has two cats named Max and Luna at home."),
            Refinement::Split(vec![
                "Caroline works as a nurse at the Charité hospital.".to_owned(),
                "Caroline has two cats named Max and Luna at home.".to_owned()
            ]),
            "a part opening with she says whom it is about"
        );
        let left = refine("Caroline works as a nurse at the Charité hospital in Berlin and has done so since 2019.");
        assert!(
            matches!(&left, Refinement::DoNothing(reason) if reason.contains("refine rule")),
            "{left:?}"
        );
        let continued =
            refine("Jolene started using a bullet journal in May. It has been helpful for tracking Jolene's tasks.");
        assert!(
            matches!(&continued, Refinement::DoNothing(reason) if reason.contains("stand on its own")),
            "{continued:?}"
        );
        let decimal = refine("Caroline runs 5.5 km before work every day, then she swims for about half an hour.");
        assert!(
            matches!(decimal, Refinement::DoNothing(_)),
            "a decimal point is not a clause boundary: {decimal:?}"
        );
    }

    #[test]
    fn entity_gc_merges_into_a_whole_word_match_deletes_junk_and_keeps_the_rest() {
        let entity = |id: &str, name: &str| EntityRef {
            id: id.to_owned(),
            name: name.to_owned(),
            kind: "person".to_owned(),
        };
        let others = [
            entity("e2", "Melanie"),
            entity("e3", "Caroline Smith"),
            entity("e4", "Carol"),
        ];
        let decide = |reviewed: &EntityRef| {
            let candidates = name_candidates(reviewed, &others);
            let request = entity_gc_request(&prompt("entity_gc"), reviewed, &candidates, &["She runs.".to_owned()]);
            parse_entity_gc_answer(&offline_answer(&request.user_message).unwrap(), &candidates).unwrap()
        };
        assert_eq!(
            decide(&entity("e1", "Caroline")),
            EntityVerdict::Merge {
                target: "e3".to_owned()
            }
        );
        assert_eq!(decide(&entity("e5", "it")), EntityVerdict::Delete);
        assert_eq!(decide(&entity("e6", "the")), EntityVerdict::Delete);
        assert_eq!(decide(&entity("e7", "Gabriel")), EntityVerdict::Keep);
    }

    const PLACES: &[&str] = &[
        "San Francisco",
        "Philadelphia",
        "Barcelona",
        "Amsterdam",
        "Copenhagen",
        "Edinburgh",
    ];
    const PEOPLE: &[&str] = &["Caroline", "Melanie", "Gabriel", "Daniel", "Julian", "Marian"];

    /// The offline judge's verdict on `name` (of `kind`) beside `others` of the same kind.
    fn verdict(name: &str, kind: &str, others: &[&str]) -> EntityVerdict {
        let entity = |index: usize, name: &str| EntityRef {
            id: format!("e{index}"),
            name: name.to_owned(),
            kind: kind.to_owned(),
        };
        let others: Vec<EntityRef> = others
            .iter()
            .enumerate()
            .map(|(index, name)| entity(index + 1, name))
            .collect();
        let reviewed = entity(0, name);
        let candidates = name_candidates(&reviewed, &others);
        let request = entity_gc_request(
            &prompt("entity_gc"),
            &reviewed,
            &candidates,
            &["It came up once.".to_owned()],
        );
        parse_entity_gc_answer(&offline_answer(&request.user_message).unwrap(), &candidates).unwrap()
    }

    proptest::proptest! {
        /// A place typed with two neighbouring letters swapped, or a letter left out, is merged into
        /// the place; a person's name with a letter more or less is not (it is another name).
        #[test]
        fn a_misspelt_place_is_merged_and_a_near_name_of_a_person_is_not(
            place in 0..PLACES.len(),
            person in 0..PEOPLE.len(),
            at in 1usize..64,
            swap in proptest::bool::ANY,
        ) {
            let letters: Vec<char> = PLACES[place].chars().collect();
            let at = 1 + at % (letters.len() - 3);
            let mut typo = letters.clone();
            if swap {
                typo.swap(at, at + 1);
            } else {
                typo.remove(at);
            }
            let typo: String = typo.into_iter().collect();
            proptest::prop_assume!(typo != PLACES[place]);
            proptest::prop_assert_eq!(
                verdict(&typo, "place", &[PLACES[place]]),
                EntityVerdict::Merge { target: "e1".to_owned() },
                "{} / {}", typo, PLACES[place]
            );
            let name = PEOPLE[person];
            let longer = format!("{name}a");
            proptest::prop_assert!(!is_misspelling(&longer, name, "person"), "{}", longer);
            proptest::prop_assert_ne!(verdict(&longer, "person", &["Zed Quill"]), EntityVerdict::Delete);
        }

        /// A short name in capitals is an abbreviation (a place, an agency) and never deleted.
        #[test]
        fn a_short_name_in_capitals_is_kept(name in "[A-Z][A-Z0-9]{1,4}") {
            proptest::prop_assert!(is_abbreviation(&name));
            proptest::prop_assert_eq!(verdict(&name, "place", &["Lisbon"]), EntityVerdict::Keep, "{}", name);
        }

        /// Whatever the clauses, a split part names whom it is about and holds no placeholder.
        #[test]
        fn every_split_part_names_its_subject(
            subject in 0..PEOPLE.len(),
            first in 0..FIRSTS.len(),
            second in 0..SECONDS.len(),
        ) {
            let name = PEOPLE[subject];
            let text = format!("{name} {}; {}.", FIRSTS[first], SECONDS[second].replace("{}", name));
            let request = refinement_request(&prompt("refinement"), &memories(&[&text])[0]);
            let answer = parse_refinement_answer(&offline_answer(&request.user_message).unwrap(), &text).unwrap();
            if let Refinement::Split(parts) = answer {
                for part in &parts {
                    proptest::prop_assert!(super::names(part, name), "{part:?} of {text:?}");
                    proptest::prop_assert!(!part.contains(['[', ']']), "{part:?} of {text:?}");
                }
            }
        }
    }

    const FIRSTS: &[&str] = &[
        "loves long drives through the countryside",
        "plays the violin in an orchestra",
    ];
    /// Second clauses: some name the subject (`{}`), some point back or hold a placeholder.
    const SECONDS: &[&str] = &[
        "doing it every day is rewarding for her",
        "long drives in [this car] help {} relax",
        "she practises every evening after work",
        "her favourite composer is Johann Sebastian Bach",
        "{} has played since she was a child",
        "it has been her passion for many years",
    ];

    #[test]
    fn a_split_names_the_subject_in_every_part() {
        let text = "Calvin loves long drives through the countryside; his favourite car is a red vintage Mustang.";
        let request = refinement_request(&prompt("refinement"), &memories(&[text])[0]);
        assert_eq!(
            parse_refinement_answer(&offline_answer(&request.user_message).unwrap(), text).unwrap(),
            Refinement::Split(vec![
                "Calvin loves long drives through the countryside.".to_owned(),
                "Calvin's favourite car is a red vintage Mustang.".to_owned(),
            ])
        );
        assert_eq!(
            verdict("San Francsico", "place", &["San Francisco"]),
            EntityVerdict::Merge {
                target: "e1".to_owned()
            }
        );
        assert_eq!(verdict("ER", "place", &["Emergency Room"]), EntityVerdict::Keep);
    }
}
