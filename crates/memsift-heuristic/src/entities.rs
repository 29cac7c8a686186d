//! Entities of a free-form statement: the names, places and organisations it mentions, found as
//! capitalised word runs inside the sentence and typed by the word in front of them ("in
//! Boston" is a place, "my sister Anna" a person) or by how they end ("… University").

use std::sync::LazyLock;

use memsift_core::contract::ExtractedEntity;
use regex::Regex;

/// A run of capitalised words (with "of", "de", "the" … inside), or an acronym.
static NAME_RUN: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?P<run>\p{Lu}[\p{L}\p{M}'&.-]*(?:\s+(?:(?:of|de|del|da|la|the|and|&|von|van)\s+)?\p{Lu}[\p{L}\p{M}'&.-]*){0,4})",
    )
    .expect("the name pattern is a fixed literal covered by the entity tests")
});

/// Words before a name that make it a place.
const PLACE_CUES: &[&str] = &[
    "in", "to", "from", "near", "visited", "visit", "visiting", "around", "across", "outside",
];
/// Words before a name that make it a person.
const PERSON_CUES: &[&str] = &[
    "friend",
    "friends",
    "sister",
    "brother",
    "mom",
    "mum",
    "dad",
    "mother",
    "father",
    "wife",
    "husband",
    "partner",
    "boyfriend",
    "girlfriend",
    "son",
    "daughter",
    "cousin",
    "aunt",
    "uncle",
    "grandma",
    "grandpa",
    "niece",
    "nephew",
    "boss",
    "coworker",
    "colleague",
    "mentor",
    "neighbor",
    "neighbour",
    "roommate",
    "named",
    "called",
    "with",
    "met",
];
/// Words before a name that make it a pet.
const PET_CUES: &[&str] = &[
    "dog", "cat", "puppy", "kitten", "pup", "turtle", "horse", "bunny", "rabbit", "parrot", "hamster",
];
/// Last words that make a run an organisation.
const ORG_ENDINGS: &[&str] = &[
    "university",
    "college",
    "school",
    "academy",
    "institute",
    "center",
    "centre",
    "club",
    "company",
    "inc",
    "inc.",
    "corp",
    "corp.",
    "ltd",
    "group",
    "foundation",
    "association",
    "society",
    "hospital",
    "church",
    "bank",
    "museum",
    "library",
    "team",
    "council",
    "agency",
    "studio",
    "studios",
    "network",
    "league",
    "festival",
];
/// Words that may follow a name without making it a modifier of the next word.
const FOLLOWERS: &[&str] = &[
    "and",
    "or",
    "but",
    "in",
    "on",
    "at",
    "to",
    "for",
    "with",
    "from",
    "by",
    "is",
    "was",
    "are",
    "were",
    "has",
    "had",
    "have",
    "last",
    "this",
    "next",
    "yesterday",
    "today",
    "tomorrow",
    "when",
    "where",
    "who",
    "which",
    "that",
    "because",
    "so",
    "as",
    "after",
    "before",
    "since",
    "until",
    "a",
    "an",
    "the",
    "it",
    "too",
    "again",
    "loves",
    "likes",
    "said",
    "says",
    "told",
    "got",
    "went",
    "came",
    "and",
    "recently",
    "together",
    "once",
];

/// Capitalised words that are not names however they are written.
const NOT_NAMES: &[&str] = &[
    "i",
    "i'm",
    "i've",
    "i'll",
    "i'd",
    "the",
    "a",
    "an",
    "my",
    "we",
    "and",
    "but",
    "so",
    "or",
    "it",
    "this",
    "that",
    "monday",
    "tuesday",
    "wednesday",
    "thursday",
    "friday",
    "saturday",
    "sunday",
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
    "mom",
    "mum",
    "dad",
    "god",
    "ok",
    "okay",
    "lol",
    "omg",
    "wow",
    "yes",
    "no",
    "hey",
    "hi",
];

/// The entities a sentence names, never its speaker. `sentence` is the speaker's own wording,
/// so its first word is capitalised by grammar and only counts after a cue.
pub(crate) fn entities(sentence: &str, speaker: &str) -> Vec<ExtractedEntity> {
    let mut found: Vec<ExtractedEntity> = Vec::new();
    for caps in NAME_RUN.captures_iter(sentence) {
        let Some(run) = caps.name("run") else { continue };
        let before: Vec<String> = sentence[..run.start()]
            .split(|c: char| !(c.is_alphanumeric() || c == '\''))
            .filter(|word| !word.is_empty() && !matches!(word.to_lowercase().as_str(), "the" | "a" | "an"))
            .rev()
            .take(2)
            .map(str::to_lowercase)
            .collect();
        let sentence_start = sentence[..run.start()].trim_end().is_empty()
            || sentence[..run.start()].trim_end().ends_with(['.', '!', '?', '"', ':']);
        let name = trim_name(run.as_str());
        if name.is_empty() || name == speaker || name.strip_suffix("'s") == Some(speaker) {
            continue;
        }
        let first_word = name.split_whitespace().next().unwrap_or("").to_lowercase();
        if NOT_NAMES.contains(&first_word.as_str()) && !name.contains(' ') {
            continue;
        }
        let cue = before.first().map(String::as_str).unwrap_or("");
        let name_end = run.start() + run.as_str().find(&name).map_or(run.len(), |at| at + name.len());
        let next = sentence[name_end..].split_whitespace().next().unwrap_or("");
        // "an LGBTQ support group": a name used as a modifier names no place or person itself.
        let modifier = next.chars().next().is_some_and(char::is_lowercase)
            && !FOLLOWERS.contains(&next.trim_end_matches(|c: char| !c.is_alphanumeric()));
        let kind = match kind_of(&name, cue) {
            "organization" => "organization",
            _ if modifier => "other",
            kind => kind,
        };
        if sentence_start && kind == "other" {
            continue;
        }
        let entity = ExtractedEntity {
            name: name.clone(),
            kind: kind.to_owned(),
        };
        if !found.contains(&entity) {
            found.push(entity);
        }
    }
    found
}

/// The run without a possessive ending, trailing dots, a leading "The" or a trailing "and I".
fn trim_name(run: &str) -> String {
    let run = run.trim_end_matches(['.', '-', '\'']);
    let run = run
        .strip_suffix(" and I")
        .or_else(|| run.strip_suffix(" & I"))
        .unwrap_or(run);
    let run = run.strip_suffix("'s").unwrap_or(run);
    let run = run.strip_prefix("The ").unwrap_or(run);
    run.trim().to_owned()
}

fn kind_of(name: &str, cue: &str) -> &'static str {
    let last = name.split_whitespace().last().unwrap_or("").to_lowercase();
    if ORG_ENDINGS.contains(&last.as_str()) {
        return "organization";
    }
    if PET_CUES.contains(&cue) {
        return "pet";
    }
    if PERSON_CUES.contains(&cue) {
        return "person";
    }
    if PLACE_CUES.contains(&cue) {
        return "place";
    }
    "other"
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(sentence: &str) -> Vec<(String, String)> {
        entities(sentence, "Caroline")
            .into_iter()
            .map(|entity| (entity.name, entity.kind))
            .collect()
    }

    #[test]
    fn names_are_typed_by_their_cue_or_ending() {
        assert_eq!(
            kinds("I moved to New York City with my sister Anna."),
            vec![
                ("New York City".to_owned(), "place".to_owned()),
                ("Anna".to_owned(), "person".to_owned())
            ]
        );
        assert_eq!(
            kinds("I joined the Stanford University chess club"),
            vec![("Stanford University".to_owned(), "organization".to_owned())]
        );
        assert_eq!(
            kinds("My dog Rex is silly."),
            vec![("Rex".to_owned(), "pet".to_owned())]
        );
        assert_eq!(
            kinds("My husband Tom and I went to the Grand Canyon."),
            vec![
                ("Tom".to_owned(), "person".to_owned()),
                ("Grand Canyon".to_owned(), "place".to_owned())
            ]
        );
        assert_eq!(
            kinds("I went to an LGBTQ support group."),
            vec![("LGBTQ".to_owned(), "other".to_owned())]
        );
    }

    #[test]
    fn the_speaker_dates_and_sentence_openings_are_not_entities() {
        assert!(kinds("Caroline went on Monday in May.").is_empty());
        assert!(kinds("Painting is fun. I love it.").is_empty());
    }
}
