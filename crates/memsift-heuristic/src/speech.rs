//! Rewrites a speaker's first-person sentence into a third-person memory that names them:
//! "I'm going to the park with my kids" said by Melanie becomes "Melanie is going to the park
//! with their kids".
//!
//! The rewrite works word by word, because a sentence can hold several first-person words and
//! each needs its own form: the subject "I" takes the name and makes its verb agree, "my" takes
//! the name's possessive the first time and "their" after, "we" becomes the speaker with the
//! people the turn says they were with. Words it cannot place (a verb form it does not know)
//! are left as they were rather than guessed at.

use std::sync::LazyLock;

use regex::Regex;

/// Adverbs that may sit between a subject and its verb ("I really love", "we finally went").
const ADVERBS: &[&str] = &[
    "also",
    "always",
    // "I last saw", "we first met": an order in time, not the verb.
    "last",
    "first",
    "never",
    "often",
    "sometimes",
    "usually",
    "just",
    "still",
    "even",
    "already",
    "recently",
    "finally",
    "actually",
    "really",
    "totally",
    "definitely",
    "literally",
    "honestly",
    "seriously",
    "basically",
    "truly",
    "certainly",
    "absolutely",
    "rarely",
    "seldom",
    "ever",
    "once",
    "too",
    "all",
    "both",
    "now",
    "then",
    "only",
    "mostly",
    "almost",
    "nearly",
    "kinda",
    "sorta",
    "lately",
    "currently",
    "normally",
    "generally",
    "especially",
    "particularly",
    "typically",
    "occasionally",
    "frequently",
    "constantly",
    "barely",
    "hardly",
    "personally",
    "initially",
    "eventually",
    "gradually",
    "quickly",
    "slowly",
    "simply",
    "def",
];

/// Words ending in "ly" that are verbs, not adverbs.
const LY_VERBS: &[&str] = &[
    "fly", "apply", "reply", "rely", "supply", "bully", "rally", "ally", "comply", "multiply", "tally", "belly",
];

/// Verb forms that already agree with any subject: past tenses, modals and negated auxiliaries.
const INVARIANT_VERBS: &[&str] = &[
    "was",
    "were",
    "had",
    "did",
    "went",
    "got",
    "made",
    "took",
    "saw",
    "ran",
    "felt",
    "found",
    "met",
    "bought",
    "brought",
    "thought",
    "taught",
    "caught",
    "told",
    "said",
    "left",
    "kept",
    "slept",
    "spent",
    "sent",
    "built",
    "won",
    "lost",
    "gave",
    "came",
    "became",
    "began",
    "wrote",
    "knew",
    "grew",
    "drew",
    "flew",
    "threw",
    "heard",
    "held",
    "led",
    "paid",
    "sat",
    "stood",
    "understood",
    "woke",
    "wore",
    "tore",
    "swam",
    "sang",
    "rang",
    "drank",
    "ate",
    "fell",
    "forgot",
    "chose",
    "rode",
    "drove",
    "broke",
    "spoke",
    "froze",
    "shook",
    "hid",
    "bit",
    "fed",
    "fought",
    "sought",
    "dug",
    "stuck",
    "struck",
    "hung",
    "sold",
    "meant",
    "dealt",
    "dreamt",
    "learnt",
    "burnt",
    "lent",
    "bent",
    "shot",
    "slid",
    "swore",
    "wound",
    "spun",
    "sank",
    "stank",
    "stole",
    "bound",
    "ground",
    "fled",
    "forgave",
    "overcame",
    "undertook",
    "withdrew",
    "mistook",
    "rebuilt",
    "reread",
    "can",
    "could",
    "will",
    "would",
    "shall",
    "should",
    "may",
    "might",
    "must",
    "can't",
    "cannot",
    "couldn't",
    "won't",
    "wouldn't",
    "shouldn't",
    "didn't",
    "wasn't",
    "weren't",
    "hadn't",
    "mustn't",
    "ought",
    "used",
    "read",
    "put",
    "set",
    "cut",
    "hit",
    "let",
    "quit",
    "spread",
    "cast",
    "cost",
    "hurt",
    "shut",
    "split",
    "burst",
];

/// Verbs whose third-person form is not the regular one.
const IRREGULAR_THIRD: &[(&str, &str)] = &[
    ("am", "is"),
    ("'m", "is"),
    ("have", "has"),
    ("do", "does"),
    ("go", "goes"),
    ("don't", "doesn't"),
    ("dont", "doesn't"),
    ("haven't", "hasn't"),
    ("havent", "hasn't"),
    ("be", "is"),
    // A "we" the speaker stands for alone brings its plural verb with it.
    ("are", "is"),
    ("aren't", "isn't"),
    ("were", "was"),
    ("weren't", "wasn't"),
];

/// Past forms the regular "-ed" test misses.
const IRREGULAR_PAST: &[&str] = &[
    "was", "were", "had", "did", "went", "got", "made", "took", "saw", "ran", "felt", "found", "met", "bought",
    "brought", "thought", "taught", "caught", "told", "said", "left", "kept", "slept", "spent", "sent", "built", "won",
    "lost", "gave", "came", "became", "began", "wrote", "knew", "grew", "drew", "flew", "threw", "heard", "held",
    "led", "paid", "sat", "stood", "woke", "wore", "swam", "sang", "drank", "ate", "fell", "forgot", "chose", "rode",
    "drove", "broke", "spoke", "fed", "fought", "sold", "meant", "dreamt", "learnt", "shot", "stole", "didn't",
    "wasn't", "weren't", "hadn't", "overcame", "forgave",
];

/// Companions "we" most often stands for, as they appear after "my" in the same turn; only
/// people, since "we" with a pet reads as the speaker walking their dog, not with it.
static COMPANION: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)\bmy\s+(?P<who>(?:husband|wife|partner|fianc[ée]e?|spouse|boyfriend|girlfriend|family|kids|children|son|daughter|sons|daughters|friends?|best\s+friend|team|teammates|mom|mum|mother|dad|father|parents|brother|sister|siblings|cousins?|wife|crew|band|group|class|colleagues|coworkers|roommates?))\b",
    )
    .expect("the companion pattern is a fixed literal covered by the rewrite tests")
});

/// Someone the speaker introduces by relation and name ("my sister Anna", "my dog, Max").
static ACQUAINTANCE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"\b[Mm]y\s+(?P<rel>(?i:best\s+friend|friend|sister|brother|mom|mum|mother|dad|father|husband|wife|partner|fianc[ée]e?|boyfriend|girlfriend|son|daughter|cousin|aunt|uncle|grandma|grandmother|grandpa|grandfather|niece|nephew|boss|coworker|colleague|mentor|neighbou?r|roommate|dog|cat|puppy|kitten|pup|horse|turtle|bunny|rabbit|parrot|hamster|snake))\s*,?\s+(?P<name>\p{Lu}\p{Ll}+)\b",
    )
    .expect("the acquaintance pattern is a fixed literal covered by the rewrite tests")
});

/// A first word that makes "we", "us" or "our" start.
static PLURAL_WORD: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)\b(?:we|we're|we've|we'll|we'd|us|our|ours|ourselves)\b")
        .expect("the plural pattern is a fixed literal covered by the rewrite tests")
});

static WORD: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"[\p{L}\p{N}][\p{L}\p{M}\p{N}'-]*")
        .expect("the word pattern is a fixed literal covered by the rewrite tests")
});

/// A sentence rewritten about its speaker.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Rewritten {
    pub text: String,
    /// Whether a first-person verb is in the past tense ("I went", "we were").
    pub past: bool,
    /// Whether the speaker spoke of themselves alone ("I", "my") and not only of a "we".
    pub singular: bool,
}

/// The last companion `text` names after "my" ("my kids", "my husband"), lower-cased.
pub(crate) fn last_companion(text: &str) -> Option<String> {
    let caps = COMPANION.captures_iter(text).last()?;
    let who = caps.name("who")?.as_str();
    Some(who.split_whitespace().collect::<Vec<_>>().join(" ").to_lowercase())
}

/// Who "we" is in `sentence`: the speaker with the companion named before its first "we" (in
/// the sentence, else the one the turn named last before it), or the speaker alone when nobody
/// is named: "Mel and others" says no more than "Mel" about who else was there, and the memory
/// is the speaker's either way.
pub(crate) fn plural_subject(speaker: &str, companion_before: Option<&str>, sentence: &str) -> String {
    let until_we = PLURAL_WORD
        .find(sentence)
        .map_or(sentence, |found| &sentence[..found.start()]);
    match last_companion(until_we).as_deref().or(companion_before) {
        Some(who) => format!("{speaker} and {speaker}'s {who}"),
        None => speaker.to_owned(),
    }
}

/// The people the speaker introduces in `text` by relation and name, as (name, relation).
pub(crate) fn acquaintances(text: &str) -> Vec<(String, String)> {
    let mut found: Vec<(String, String)> = Vec::new();
    for caps in ACQUAINTANCE.captures_iter(text) {
        let (Some(name), Some(relation)) = (caps.name("name"), caps.name("rel")) else {
            continue;
        };
        let relation = relation
            .as_str()
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
            .to_lowercase();
        if !found.iter().any(|(known, _)| known == name.as_str()) {
            found.push((name.as_str().to_owned(), relation));
        }
    }
    found
}

/// A sentence about someone the speaker introduced ("Anna got a new job" after "my sister
/// Anna"), with the relation put in front: "Caroline's sister Anna got a new job".
pub(crate) fn about_acquaintance(sentence: &str, speaker: &str, known: &[(String, String)]) -> Option<Rewritten> {
    let first = sentence.split_whitespace().next()?;
    let name = first.trim_end_matches(|c: char| !c.is_alphanumeric());
    let (_, relation) = known.iter().find(|(known, _)| known == name)?;
    let rest = sentence[first.len()..].trim_start();
    let verb = rest.split_whitespace().find(|word| !is_adverb(&word.to_lowercase()))?;
    if !verb.chars().next().is_some_and(char::is_lowercase) {
        return None;
    }
    Some(Rewritten {
        text: format!("{speaker}'s {relation} {sentence}"),
        past: is_past(&verb.to_lowercase()),
        singular: true,
    })
}

/// What the rewrite has said so far, so later pronouns can refer back instead of repeating.
struct State<'a> {
    speaker: &'a str,
    plural: &'a str,
    listener: Option<&'a str>,
    named: bool,
    plural_named: bool,
    past: bool,
}

/// Rewrites every first-person word of `sentence`, and "you" as the one `listener` when there
/// is one; `None` when it has no first-person word, since then the sentence is not the
/// speaker's statement about themselves.
pub(crate) fn third_person(sentence: &str, speaker: &str, plural: &str, listener: Option<&str>) -> Option<Rewritten> {
    let words: Vec<(usize, usize)> = WORD.find_iter(sentence).map(|m| (m.start(), m.end())).collect();
    let mut out = String::with_capacity(sentence.len() + 32);
    let mut state = State {
        speaker,
        plural,
        listener,
        named: false,
        plural_named: false,
        past: false,
    };
    let mut rewrote_any = false;
    let mut cursor = 0;
    let mut index = 0;
    while index < words.len() {
        let (start, end) = words[index];
        out.push_str(&sentence[cursor..start]);
        let word = &sentence[start..end];
        let lower = word.to_lowercase();
        let consumed = match lower.as_str() {
            "i" | "i'm" | "i've" | "i'll" | "i'd" => subject_i(&lower, sentence, &words, index, &mut state, &mut out),
            "we" | "we're" | "we've" | "we'll" | "we'd" if state.plural == state.speaker => {
                // Nobody named with the speaker: the speaker stands for the "we" and takes its
                // verb in agreement, but a "we" is still not the speaker alone (`singular`).
                let as_i = match lower.as_str() {
                    "we're" => "i'm",
                    "we've" => "i've",
                    "we'll" => "i'll",
                    "we'd" => "i'd",
                    _ => "i",
                };
                let named = state.named;
                let consumed = subject_i(as_i, sentence, &words, index, &mut state, &mut out);
                state.named = named;
                state.plural_named = true;
                consumed
            }
            "we" | "we're" | "we've" | "we'll" | "we'd" => {
                out.push_str(state.plural);
                state.plural_named = true;
                out.push_str(match lower.as_str() {
                    "we're" => " are",
                    "we've" => " have",
                    "we'll" => " will",
                    "we'd" => " would",
                    _ => "",
                });
                state.past |= lower != "we're" && next_is_past(sentence, &words, index);
                1
            }
            "me" => {
                out.push_str(state.speaker);
                state.named = true;
                1
            }
            "my" | "mine" => {
                if state.named && lower == "my" {
                    out.push_str("their");
                } else {
                    out.push_str(state.speaker);
                    out.push_str("'s");
                }
                state.named = true;
                1
            }
            "myself" => {
                out.push_str(if state.named { "themself" } else { state.speaker });
                state.named = true;
                1
            }
            "us" => {
                out.push_str(if state.plural_named { "them" } else { state.plural });
                state.plural_named = true;
                1
            }
            "our" | "ours" => {
                if state.plural_named {
                    out.push_str(if lower == "our" { "their" } else { "theirs" });
                } else {
                    out.push_str(state.plural);
                    // "Mel and others'" rather than "others's".
                    out.push_str(if state.plural.ends_with('s') { "'" } else { "'s" });
                    state.plural_named = true;
                }
                1
            }
            "ourselves" => {
                out.push_str("themselves");
                1
            }
            "you" | "your" | "yours" if state.listener.is_some() => {
                out.push_str(state.listener.unwrap_or_default());
                if lower != "you" {
                    out.push_str("'s");
                }
                // Naming the listener is no statement of the speaker's on its own.
                index += 1;
                cursor = end;
                continue;
            }
            _ => {
                out.push_str(word);
                index += 1;
                cursor = end;
                continue;
            }
        };
        rewrote_any = true;
        cursor = words[index + consumed - 1].1;
        index += consumed;
    }
    out.push_str(&sentence[cursor..]);
    rewrote_any.then(|| Rewritten {
        text: capitalise_first(&out),
        past: state.past,
        singular: state.named,
    })
}

/// Writes the speaker for a first-person subject and makes the verb after it (past any
/// adverbs) agree; returns how many words it consumed.
fn subject_i(
    lower: &str,
    sentence: &str,
    words: &[(usize, usize)],
    index: usize,
    state: &mut State<'_>,
    out: &mut String,
) -> usize {
    out.push_str(state.speaker);
    state.named = true;
    let contracted = match lower {
        "i'm" => Some("is"),
        "i've" => Some("has"),
        "i'll" => Some("will"),
        "i'd" => Some("would"),
        _ => None,
    };
    if let Some(auxiliary) = contracted {
        out.push(' ');
        out.push_str(auxiliary);
        // After "I'm" an "-ed" word describes ("I'm based", "I'm excited"); after "I've" it happened.
        state.past |= lower == "i've" && next_is_past(sentence, words, index);
        return 1;
    }
    // In a compound subject ("Tom and I are …") the verb is already plural.
    let previous = index
        .checked_sub(1)
        .map(|before| sentence[words[before].0..words[before].1].to_lowercase());
    if previous.as_deref() == Some("and") || sentence[..words[index].0].trim_end().ends_with('&') {
        return 1;
    }
    // "I" alone: copy adverbs, then the verb in agreement.
    let mut consumed = 1;
    let mut cursor = words[index].1;
    while let Some(&(start, end)) = words.get(index + consumed) {
        let word = &sentence[start..end];
        let lower = word.to_lowercase();
        // Only words joined by spaces belong to the verb phrase ("I, too," is not "I too").
        if !sentence[cursor..start].chars().all(char::is_whitespace) {
            break;
        }
        out.push_str(&sentence[cursor..start]);
        cursor = end;
        consumed += 1;
        if is_adverb(&lower) {
            out.push_str(word);
            continue;
        }
        state.past |= is_past(&lower);
        out.push_str(&agree(word, &lower));
        return consumed;
    }
    // Nothing verb-like followed; give back the words consumed as adverbs untouched.
    consumed
}

/// Whether the first verb after a subject at `index` (past adverbs and auxiliaries) is past.
fn next_is_past(sentence: &str, words: &[(usize, usize)], index: usize) -> bool {
    words
        .iter()
        .skip(index + 1)
        .take(4)
        .map(|&(start, end)| sentence[start..end].to_lowercase())
        .find(|word| !is_adverb(word) && !matches!(word.as_str(), "not" | "been" | "have" | "has"))
        .is_some_and(|word| is_past(&word))
}

/// The "-ing" form of a verb ("see" → "seeing", "make" → "making", "get" → "getting"); a
/// word it cannot place gets a plain "-ing".
pub(crate) fn gerund(verb: &str) -> String {
    let lower = verb.to_lowercase();
    let chars: Vec<char> = lower.chars().collect();
    let is_vowel = |c: char| matches!(c, 'a' | 'e' | 'i' | 'o' | 'u');
    if lower.ends_with("ie") {
        return format!("{}ying", &verb[..verb.len() - 2]);
    }
    if lower.ends_with('e')
        && !lower.ends_with("ee")
        && !lower.ends_with("ye")
        && !lower.ends_with("oe")
        && chars.len() > 2
    {
        return format!("{}ing", &verb[..verb.len() - 1]);
    }
    // One short syllable ending consonant-vowel-consonant doubles its last letter ("get", "shop").
    if let [.., a, b, c] = chars[..]
        && chars.len() <= 4
        && !is_vowel(a)
        && is_vowel(b)
        && !is_vowel(c)
        && !matches!(c, 'w' | 'x' | 'y')
        && c.is_ascii_alphabetic()
    {
        return format!("{verb}{c}ing");
    }
    format!("{verb}ing")
}

pub(crate) fn is_adverb(lower: &str) -> bool {
    ADVERBS.contains(&lower) || (lower.ends_with("ly") && lower.len() > 4 && !LY_VERBS.contains(&lower))
}

pub(crate) fn is_past(lower: &str) -> bool {
    IRREGULAR_PAST.contains(&lower) || (lower.ends_with("ed") && lower.len() > 3 && lower != "need")
}

/// The verb as it reads after a third-person singular subject.
fn agree(word: &str, lower: &str) -> String {
    if let Some((_, third)) = IRREGULAR_THIRD.iter().find(|(first, _)| *first == lower) {
        return (*third).to_owned();
    }
    if INVARIANT_VERBS.contains(&lower) || is_past(lower) || !lower.chars().all(|c| c.is_alphabetic() || c == '\'') {
        return word.to_owned();
    }
    crate::text::third_person_verb(word)
}

/// The text with a capital first letter, when that letter has a one-letter capital that lowers
/// back to it: a letter whose capital is longer ("ὒ" → "Υ̓̀") or lowers to another letter
/// ("ᲀ" → "В" → "в") is left alone, so a speaker's name is never respelled.
pub(crate) fn capitalise_first(text: &str) -> String {
    let mut chars = text.chars();
    let Some(first) = chars.next() else {
        return String::new();
    };
    let capital: String = first.to_uppercase().collect();
    if capital.chars().count() == 1 && capital.to_lowercase() == first.to_lowercase().to_string() {
        capital + chars.as_str()
    } else {
        text.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rewrite(sentence: &str) -> Option<String> {
        let plural = plural_subject("Mel", None, sentence);
        third_person(sentence, "Mel", &plural, Some("Caro")).map(|rewritten| rewritten.text)
    }

    #[test]
    fn gerunds_follow_english_spelling() {
        for (verb, expected) in [
            ("see", "seeing"),
            ("make", "making"),
            ("get", "getting"),
            ("shop", "shopping"),
            ("try", "trying"),
            ("lie", "lying"),
            ("check", "checking"),
            ("visit", "visiting"),
            ("go", "going"),
            ("show", "showing"),
            ("Hear", "Hearing"),
            ("ver", "verring"),
            ("ß", "ßing"),
        ] {
            assert_eq!(gerund(verb), expected, "{verb}");
        }
    }

    #[test]
    fn the_subject_takes_the_name_and_the_verb_agrees() {
        let cases = [
            ("I love hiking", "Mel loves hiking"),
            ("I am tired", "Mel is tired"),
            ("I'm going home", "Mel is going home"),
            ("I've got a dog", "Mel has got a dog"),
            ("I have two kids", "Mel has two kids"),
            ("I really enjoy painting", "Mel really enjoys painting"),
            ("I usually study at night", "Mel usually studies at night"),
            ("I went to a support group", "Mel went to a support group"),
            ("I ran a charity race", "Mel ran a charity race"),
            ("I don't eat meat", "Mel doesn't eat meat"),
            ("I can swim", "Mel can swim"),
            ("I finally finished it", "Mel finally finished it"),
            ("I'll be there", "Mel will be there"),
            ("Tom and I are going", "Tom and Mel are going"),
        ];
        for (sentence, expected) in cases {
            assert_eq!(rewrite(sentence).as_deref(), Some(expected), "{sentence}");
        }
    }

    #[test]
    fn possessives_and_objects_name_the_speaker_once() {
        assert_eq!(
            rewrite("My kids love my paintings").as_deref(),
            Some("Mel's kids love their paintings")
        );
        assert_eq!(
            rewrite("The group made me feel accepted").as_deref(),
            Some("The group made Mel feel accepted")
        );
        assert_eq!(
            rewrite("I painted it myself").as_deref(),
            Some("Mel painted it themself")
        );
        assert_eq!(
            rewrite("I still have the scarf you gave me").as_deref(),
            Some("Mel still has the scarf Caro gave Mel")
        );
        assert_eq!(
            rewrite("Thanks for your help"),
            None,
            "the listener alone is not the speaker"
        );
    }

    #[test]
    fn we_is_the_speaker_with_the_companion_the_turn_names() {
        assert_eq!(
            rewrite("We went camping with our dog").as_deref(),
            Some("Mel went camping with their dog")
        );
        assert_eq!(
            plural_subject(
                "Mel",
                last_companion("I took my kids out.").as_deref(),
                "We went camping."
            ),
            "Mel and Mel's kids"
        );
        assert_eq!(
            plural_subject("Mel", None, "Our loved ones taught us a lot, like my mom said."),
            "Mel",
            "a companion named after the \"we\" is not who it is"
        );
        let rewritten = third_person("We were at the lake", "Mel", "Mel and Mel's kids", None).unwrap();
        assert_eq!(rewritten.text, "Mel and Mel's kids were at the lake");
        assert!(rewritten.past);
    }

    #[test]
    fn a_we_of_nobody_named_is_the_speaker_with_the_verb_in_agreement() {
        let cases = [
            ("We were at the lake", "Mel was at the lake"),
            ("We're moving to Ohio", "Mel is moving to Ohio"),
            ("We love climbing and sliding", "Mel loves climbing and sliding"),
            ("We've adopted a cat", "Mel has adopted a cat"),
            ("Our garden is full of tomatoes", "Mel's garden is full of tomatoes"),
        ];
        for (sentence, expected) in cases {
            assert_eq!(rewrite(sentence).as_deref(), Some(expected), "{sentence}");
        }
        let rewritten = third_person("We should cherish it", "Mel", "Mel", None).unwrap();
        assert!(!rewritten.singular, "a we stays a we for the advice filter");
    }

    #[test]
    fn someone_introduced_by_name_is_written_with_their_relation() {
        let known = acquaintances("My sister Anna is visiting. My dog, Rex, too.");
        assert_eq!(
            known,
            vec![
                ("Anna".to_owned(), "sister".to_owned()),
                ("Rex".to_owned(), "dog".to_owned())
            ]
        );
        let rewritten = about_acquaintance("Anna just got a new job", "Mel", &known).unwrap();
        assert_eq!(rewritten.text, "Mel's sister Anna just got a new job");
        assert!(rewritten.past);
        assert_eq!(about_acquaintance("Rex Tillerson spoke", "Mel", &known), None);
        assert_eq!(about_acquaintance("Bob got a job", "Mel", &known), None);
    }

    #[test]
    fn sentences_without_a_first_person_word_are_not_rewritten() {
        assert_eq!(rewrite("The sunset was lovely"), None);
        assert_eq!(rewrite("Iris is here"), None, "a word starting with i is not I");
    }

    #[test]
    fn tense_is_read_from_the_first_person_verb() {
        assert!(third_person("I went home", "A", "A and others", None).unwrap().past);
        assert!(third_person("I've finished", "A", "A and others", None).unwrap().past);
        assert!(!third_person("I love it", "A", "A and others", None).unwrap().past);
    }
}

#[cfg(test)]
mod capital_tests {
    use proptest::prelude::*;

    use super::capitalise_first;

    proptest! {
        /// Any text: capitalising never respells it, it only changes case.
        #[test]
        fn capitalising_keeps_the_text_up_to_case(text in "\\PC{0,8}") {
            let capitalised = capitalise_first(&text);
            prop_assert_eq!(capitalised.to_lowercase(), text.to_lowercase());
        }
    }

    #[test]
    fn a_letter_whose_capital_lowers_to_another_is_left_alone() {
        assert_eq!(capitalise_first("ᲀa"), "ᲀa");
        assert_eq!(capitalise_first("noor"), "Noor");
    }
}
