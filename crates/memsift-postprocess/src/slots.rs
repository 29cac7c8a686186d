//! Slots: the one-valued facts about a person (where they live, work or study, whom they are married
//! to) that a later statement of another value replaces.
//!
//! "Nina lives in Lisbon." and, said weeks later, "Nina lives in Porto." share half their words, which
//! is not enough for the topic rules, and neither says "now": the heuristic lane keeps what a sentence
//! states, and a speaker rarely repeats the change. Read as (subject, slot, value), the pair is plain:
//! one person, one home, two values, and the later one is current.

use crate::words::{contains_phrase, is_negated, tokens};

/// A fact a person has one value of at a time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Slot {
    /// Where they live.
    Home,
    /// Where they work.
    Work,
    /// Where they study.
    School,
    /// Whom they are married to.
    Spouse,
}

impl Slot {
    /// How a reason names it.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Slot::Home => "where they live",
            Slot::Work => "where they work",
            Slot::School => "where they study",
            Slot::Spouse => "whom they are married to",
        }
    }
}

/// The phrases that state a slot, as lower-case word sequences; a past form marks the fact as over.
const PHRASES: &[(&str, Slot, Tense)] = &[
    ("lives in", Slot::Home, Tense::Present),
    ("live in", Slot::Home, Tense::Present),
    ("living in", Slot::Home, Tense::Present),
    ("resides in", Slot::Home, Tense::Present),
    ("is based in", Slot::Home, Tense::Present),
    ("moved to", Slot::Home, Tense::Present),
    ("relocated to", Slot::Home, Tense::Present),
    ("lived in", Slot::Home, Tense::Past),
    ("works at", Slot::Work, Tense::Present),
    ("works for", Slot::Work, Tense::Present),
    ("work at", Slot::Work, Tense::Present),
    ("work for", Slot::Work, Tense::Present),
    ("working at", Slot::Work, Tense::Present),
    ("working for", Slot::Work, Tense::Present),
    ("is employed at", Slot::Work, Tense::Present),
    ("is employed by", Slot::Work, Tense::Present),
    ("worked at", Slot::Work, Tense::Past),
    ("worked for", Slot::Work, Tense::Past),
    ("studies at", Slot::School, Tense::Present),
    ("study at", Slot::School, Tense::Present),
    ("studying at", Slot::School, Tense::Present),
    ("is enrolled at", Slot::School, Tense::Present),
    ("studied at", Slot::School, Tense::Past),
    ("is married to", Slot::Spouse, Tense::Present),
    ("married to", Slot::Spouse, Tense::Present),
    ("married", Slot::Spouse, Tense::Present),
];

/// Whether a statement says what is, or what was.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Tense {
    Present,
    Past,
}

/// Phrases that make a present statement one about the past ("used to live in", "no longer").
const PAST_MARKERS: &[&str] = &[
    "used to",
    "no longer",
    "anymore",
    "formerly",
    "previously",
    "before moving",
];

/// Words that end a slot's value: what follows says how, why or since when, not which place.
const VALUE_ENDS: &[&str] = &[
    "and",
    "as",
    "at",
    "because",
    "but",
    "for",
    "from",
    "in",
    "last",
    "now",
    "on",
    "since",
    "so",
    "this",
    "until",
    "when",
    "where",
    "while",
    "with",
    "who",
    "after",
    "before",
    "again",
    "ago",
    "recently",
    "today",
    "yesterday",
];

/// Words dropped before a value ("the", "a") or inside the phrase ("now lives in").
const VALUE_FILLER: &[&str] = &["the", "a", "an", "now", "currently", "still", "finally", "just"];

/// One memory read as "subject's slot is value".
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct SlotFact {
    /// Which fact.
    pub(crate) slot: Slot,
    /// Its value's words, lower case.
    pub(crate) value: Vec<String>,
    /// Whether the memory says it is over ("used to", "lived in").
    pub(crate) past: bool,
}

/// Reads the first slot a memory states, `None` when it states none or denies it ("does not live in").
pub(crate) fn slot_fact(text: &str) -> Option<SlotFact> {
    if is_negated(text) && !contains_phrase(text, "no longer") {
        return None;
    }
    let words = tokens(text);
    let phrases: Vec<(Vec<&str>, Slot, Tense)> = PHRASES
        .iter()
        .map(|&(phrase, slot, tense)| (phrase.split(' ').collect(), slot, tense))
        .collect();
    for start in 0..words.len() {
        for (phrase_words, slot, tense) in &phrases {
            let (slot, tense) = (*slot, *tense);
            let end = start + phrase_words.len();
            if end > words.len()
                || words[start..end]
                    .iter()
                    .zip(phrase_words)
                    .any(|(word, want)| word != want)
            {
                continue;
            }
            let value: Vec<String> = words[end..]
                .iter()
                .skip_while(|word| VALUE_FILLER.contains(&word.as_str()))
                .take_while(|word| !VALUE_ENDS.contains(&word.as_str()))
                .take(6)
                .cloned()
                .collect();
            // A value is a name (a city, a company, a school, a person): "lives in a small flat"
            // says how, and must not replace "lives in Lisbon".
            if value.is_empty() || !written_capitalised(text, &value[0]) {
                continue;
            }
            let past = tense == Tense::Past || PAST_MARKERS.iter().any(|marker| contains_phrase(text, marker));
            return Some(SlotFact { slot, value, past });
        }
    }
    None
}

/// Whether `text` writes `word` (lower case) with a capital first letter somewhere.
fn written_capitalised(text: &str, word: &str) -> bool {
    text.split(|c: char| !c.is_alphanumeric() && c != '\'' && c != '\u{2019}')
        .any(|written| written.chars().next().is_some_and(char::is_uppercase) && written.to_lowercase() == word)
}

/// When `newer` (said later) states another value of the slot `older` states, both in the present,
/// for the same subject: the slot, and the two values. A value that contains the other ("Porto",
/// "Porto Portugal") is the same place; a past statement ("used to live in") replaces nothing and
/// is not replaced, since it stays true.
pub(crate) fn replaced_value(newer: &str, older: &str) -> Option<(Slot, String, String)> {
    let (new, old) = (slot_fact(newer)?, slot_fact(older)?);
    if new.slot != old.slot || new.past || old.past {
        return None;
    }
    let contains = |a: &[String], b: &[String]| b.iter().all(|word| a.contains(word));
    if contains(&new.value, &old.value) || contains(&old.value, &new.value) {
        return None;
    }
    Some((new.slot, new.value.join(" "), old.value.join(" ")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slot_is_read_with_its_value_and_tense() {
        let read = |text| slot_fact(text).map(|fact| (fact.slot, fact.value.join(" "), fact.past));
        assert_eq!(
            read("Nina lives in Lisbon."),
            Some((Slot::Home, "lisbon".into(), false))
        );
        assert_eq!(
            read("Nina now lives in Porto with her husband Tiago."),
            Some((Slot::Home, "porto".into(), false))
        );
        assert_eq!(
            read("Nina moved to Porto last week."),
            Some((Slot::Home, "porto".into(), false))
        );
        assert_eq!(
            read("Nina works at Fernwood Labs as a designer."),
            Some((Slot::Work, "fernwood labs".into(), false))
        );
        assert_eq!(
            read("Nina used to live in Lisbon."),
            Some((Slot::Home, "lisbon".into(), true))
        );
        assert_eq!(
            read("Nina lived in Lisbon for ten years."),
            Some((Slot::Home, "lisbon".into(), true))
        );
        assert_eq!(read("Nina does not live in Lisbon."), None);
        assert_eq!(read("Nina likes Lisbon."), None);
        assert_eq!(read("Nina lives in a small flat."), None, "a value is a name");
    }

    #[test]
    fn only_another_present_value_of_the_same_slot_is_replaced() {
        assert_eq!(
            replaced_value("Nina lives in Porto.", "Nina lives in Lisbon."),
            Some((Slot::Home, "porto".into(), "lisbon".into()))
        );
        assert_eq!(replaced_value("Nina lives in Lisbon!", "Nina lives in Lisbon."), None);
        assert_eq!(replaced_value("Nina works in Porto.", "Nina lives in Lisbon."), None);
        assert_eq!(
            replaced_value("Nina used to live in Porto.", "Nina lives in Lisbon."),
            None
        );
        assert_eq!(replaced_value("Nina lives in Porto.", "Nina lived in Lisbon."), None);
        assert_eq!(
            replaced_value("Nina lives in Porto, Portugal.", "Nina lives in Porto."),
            None
        );
    }
}
