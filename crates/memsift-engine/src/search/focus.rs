//! Focus on what a question names: when it names some of the people who speak in the user's
//! conversations, results about the others count for less; when it names a time, results from
//! that time count for more.
//!
//! In a conversation between people most memories name one of them, and a question about one
//! ("What did Noor paint?") shares its name with half the store: BM25 gives a word in half the
//! documents almost no weight and a sentence vector blurs it, so the question's other words decide
//! and a friend's painting ranks beside Noor's. The people are known without any extraction: they
//! are the speakers of the candidates' evidence turns.
//!
//! A time ("on 31 July 2023", "in March") is a condition, not an order: the date list ranks the
//! memories of that time by their distance to its middle, which within one day is no order at
//! all, and it cannot reach uncited turns. Lifting every result of that time, memory or turn,
//! keeps the other signals' order among them. Pure: the hits, the query and its range arrive as
//! arguments.

use std::collections::BTreeSet;

use super::SearchHit;
use super::query::TimeRange;
use crate::language::language;

/// The words of `text`, lower-cased (runs of letters or digits, in any script).
fn words(text: &str) -> BTreeSet<String> {
    word_list(text).into_iter().collect()
}

/// The words of `text` in order, lower-cased.
fn word_list(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|word| !word.is_empty())
        .map(str::to_lowercase)
        .collect()
}

/// A speaker's name as words to look for; words under three letters ("Al", "J") and common words
/// ("The Doctor") are too often something else to count as naming anyone.
pub fn name_words(speaker: &str) -> BTreeSet<String> {
    words(speaker)
        .into_iter()
        .filter(|word| word.chars().count() >= 3 && !language().is_stopword(word))
        .collect()
}

/// The words that name any of `speakers` (as [`name_words`] reads each).
pub fn words_naming(speakers: &BTreeSet<String>) -> BTreeSet<String> {
    speakers.iter().flat_map(|speaker| name_words(speaker)).collect()
}

/// Whether any word of `name` is among `said`.
fn names(said: &BTreeSet<String>, name: &BTreeSet<String>) -> bool {
    name.iter().any(|word| said.contains(word))
}

/// The people a question is about: the speakers of the hits' evidence whose names the query
/// uses. Empty when it names none, or all of them joined ("Did Ana and Noor both paint?"), since
/// then nobody is set apart. When it names several and the first is not joined to the next by
/// "and", "or" or "both" ("What did Ana say about Noor's cat?"), the first is the one asked
/// about: in LoCoMo's annotations that speaker said 84 % of such questions' evidence, against
/// 45 % for the first of two joined names.
pub fn named_speakers(query: &str, hits: &[SearchHit]) -> Vec<String> {
    let speakers: BTreeSet<&str> = hits
        .iter()
        .flat_map(|hit| hit.evidence.iter())
        .filter_map(|turn| turn.speaker.as_deref())
        .filter(|speaker| !name_words(speaker).is_empty())
        .collect();
    let asked = word_list(query);
    // Each named speaker with the place of the first word of the query that names them.
    let mut named: Vec<(usize, &str)> = speakers
        .iter()
        .filter_map(|speaker| {
            let name = name_words(speaker);
            asked
                .iter()
                .position(|word| name.contains(word))
                .map(|place| (place, *speaker))
        })
        .collect();
    named.sort();
    if let [(first, subject), (second, _), ..] = named[..] {
        // Two speakers named by one word ("Ana Silva" and "Ana Costa") are no subject either.
        let joined = asked
            .get(first + 1..second)
            .is_none_or(|between| between.iter().all(|word| language().joins_names(word)));
        if !joined {
            return vec![subject.to_owned()];
        }
    }
    if named.len() == speakers.len() {
        Vec::new()
    } else {
        named.into_iter().map(|(_, speaker)| speaker.to_owned()).collect()
    }
}

/// Scales the score of every hit not about one of `named` by `factor`, records it in the hit's
/// parts, and re-sorts (stable, so equal scores keep their order).
///
/// A hit is about a named person when one of them said its evidence, whatever its text names:
/// "Thanks, Noor!" is Ana talking to Noor, and "Ana lent Noor a brush" is what Ana told. In
/// LoCoMo's annotations 97 % of the turns that answer a question naming one speaker were said by
/// that speaker, and judging by the names in the text instead let the other speaker's replies
/// take a third of the places. Only a hit whose evidence has no known speaker is judged by the
/// names in its text.
pub fn focus(hits: &mut [SearchHit], named: &[String], factor: f64) {
    if named.is_empty() || factor >= 1.0 {
        return;
    }
    let named_words: Vec<BTreeSet<String>> = named.iter().map(|speaker| name_words(speaker)).collect();
    for hit in hits.iter_mut() {
        let mut speakers = hit
            .evidence
            .iter()
            .filter_map(|turn| turn.speaker.as_deref())
            .peekable();
        let about = if speakers.peek().is_some() {
            speakers.any(|speaker| named.iter().any(|name| name == speaker))
        } else {
            let said = words(&hit.text);
            named_words.iter().any(|name| names(&said, name))
        };
        if about {
            continue;
        }
        hit.score *= factor;
        hit.parts.fused *= factor;
        hit.parts.speaker_focus = Some(factor);
    }
    hits.sort_by(|a, b| b.score.total_cmp(&a.score));
}

/// Multiplies the score of every hit from `range` (it happens then, or one of its evidence turns
/// was said then) by `1 + boost`, records it in the hit's parts, and re-sorts (stable).
pub fn lift_in_range(hits: &mut [SearchHit], range: TimeRange, boost: f64) {
    if boost <= 0.0 {
        return;
    }
    for hit in hits.iter_mut() {
        let then = hit.happens_at.is_some_and(|at| range.contains(at))
            || hit.evidence.iter().any(|turn| range.contains(turn.at));
        if then {
            hit.score *= 1.0 + boost;
            hit.parts.fused *= 1.0 + boost;
            hit.parts.in_range = Some(1.0 + boost);
        }
    }
    hits.sort_by(|a, b| b.score.total_cmp(&a.score));
}

#[cfg(test)]
mod tests {
    use chrono::{DateTime, Utc};
    use proptest::prelude::*;

    use super::*;
    use crate::search::{EvidenceTurn, Key, ScoreParts};

    fn hit(text: &str, speakers: &[&str], score: f64) -> SearchHit {
        SearchHit {
            key: Key::Memory(crate::search::tests::memory_named(text)),
            text: text.to_owned(),
            score,
            parts: ScoreParts {
                fused: score,
                ..ScoreParts::default()
            },
            happens_at: None,
            evidence: speakers
                .iter()
                .enumerate()
                .map(|(index, speaker)| EvidenceTurn {
                    id: crate::search::tests::turn_named(&format!("{text}-{index}")),
                    label: format!("t{index}"),
                    role: "user".to_owned(),
                    speaker: Some((*speaker).to_owned()),
                    at: DateTime::<Utc>::UNIX_EPOCH,
                    text: String::new(),
                })
                .collect(),
            entities: Vec::new(),
            links: Vec::new(),
        }
    }

    #[test]
    fn a_question_naming_one_speaker_puts_the_others_results_after_its_own() {
        let mut hits = vec![
            hit("Ana painted a lake at sunrise.", &["Ana"], 1.0),
            hit("Noor painted her cat.", &["Noor"], 0.9),
            hit("Thanks, Noor! Love the cat.", &["Ana"], 0.8),
            hit("I paint on Sundays.", &["Ana"], 0.7),
            hit("Mine are all of birds.", &["Noor"], 0.6),
            hit("Noor paints with oils.", &[], 0.55),
            hit("Someone painted a fence.", &[], 0.5),
        ];
        let named = named_speakers("What did noor paint?", &hits);
        assert_eq!(named, ["Noor"]);
        focus(&mut hits, &named, 0.5);
        let order: Vec<&str> = hits.iter().map(|hit| hit.text.as_str()).collect();
        assert_eq!(
            order,
            [
                "Noor painted her cat.",
                "Mine are all of birds.",
                "Noor paints with oils.",
                "Ana painted a lake at sunrise.",
                "Thanks, Noor! Love the cat.",
                "I paint on Sundays.",
                "Someone painted a fence.",
            ],
            "Ana's words are Ana's even when they name Noor; with no speaker known, the text decides"
        );
        assert_eq!(hits[3].parts.speaker_focus, Some(0.5));
        assert_eq!(hits[3].parts.fused, 0.5);
        assert_eq!(hits[0].parts.speaker_focus, None);
        assert_eq!(hits[2].parts.speaker_focus, None);
    }

    #[test]
    fn naming_everyone_or_nobody_or_a_short_word_sets_nobody_apart() {
        let hits = vec![hit("Ana swims.", &["Ana"], 1.0), hit("Al runs.", &["Al"], 0.9)];
        assert!(
            named_speakers("Do Ana and Al swim?", &hits).is_empty(),
            "Al is too short to be a name"
        );
        assert!(named_speakers("Who swims?", &hits).is_empty());
        let titled = vec![hit("I swim.", &["The Doctor"], 1.0), hit("Noor runs.", &["Noor"], 0.9)];
        assert!(
            named_speakers("Who swims in the sea?", &titled).is_empty(),
            "`the` names nobody"
        );
        assert_eq!(named_speakers("Where does the doctor swim?", &titled), ["The Doctor"]);
        let both = vec![hit("Ana swims.", &["Ana"], 1.0), hit("Noor runs.", &["Noor"], 0.9)];
        assert!(named_speakers("Do Ana and Noor swim?", &both).is_empty());
        assert!(named_speakers("Did Noor and Ana both swim?", &both).is_empty());
        assert!(named_speakers("Did noor or ana swim?", &both).is_empty());
    }

    #[test]
    fn the_first_of_two_names_not_joined_is_the_one_asked_about() {
        let hits = vec![
            hit("Ana swims.", &["Ana"], 1.0),
            hit("Noor runs.", &["Noor"], 0.9),
            hit("Kofi reads.", &["Kofi"], 0.8),
        ];
        assert_eq!(named_speakers("What did Noor say about Ana's swim?", &hits), ["Noor"]);
        assert_eq!(named_speakers("What did Ana give Noor and Kofi?", &hits), ["Ana"]);
        assert!(
            named_speakers("Did Ana and Noor see Kofi?", &hits).is_empty(),
            "all three named, the first two joined: nobody set apart"
        );
        assert_eq!(named_speakers("Did Ana and Noor swim?", &hits), ["Ana", "Noor"]);
        let namesakes = vec![hit("I swim.", &["Ana Silva"], 1.0), hit("I run.", &["Ana Costa"], 0.9)];
        assert!(
            named_speakers("What does Ana like?", &namesakes).is_empty(),
            "one word naming two speakers names no subject"
        );
    }

    #[test]
    fn results_from_the_named_time_go_first_in_their_order() {
        let at = |day: u32| {
            chrono::NaiveDate::from_ymd_opt(2023, 7, day)
                .unwrap()
                .and_hms_opt(12, 0, 0)
                .unwrap()
                .and_utc()
        };
        let mut hits = vec![
            hit("a", &["Ana"], 1.0),
            hit("b", &["Ana"], 0.9),
            hit("c", &["Ana"], 0.8),
            hit("d", &["Ana"], 0.7),
        ];
        hits[0].evidence[0].at = at(1);
        hits[1].evidence[0].at = at(31);
        hits[2].happens_at = Some(at(31));
        hits[3].evidence[0].at = at(31);
        let range = TimeRange {
            from: at(31) - chrono::Duration::hours(12),
            to: at(31) + chrono::Duration::hours(12),
        };
        lift_in_range(&mut hits, range, 0.5);
        let order: Vec<&str> = hits.iter().map(|hit| hit.text.as_str()).collect();
        assert_eq!(order, ["b", "c", "d", "a"]);
        assert_eq!(hits[0].parts.in_range, Some(1.5));
        assert_eq!(hits[3].parts.in_range, None);
        let before: Vec<f64> = hits.iter().map(|hit| hit.score).collect();
        lift_in_range(&mut hits, range, 0.0);
        assert_eq!(hits.iter().map(|hit| hit.score).collect::<Vec<_>>(), before);
    }

    proptest! {
        /// Any query names a subset of the speakers, in any order of names and words.
        #[test]
        fn any_query_names_a_subset_of_the_speakers(
            query in "[A-Za-z ,?'&]{0,60}",
            names in proptest::collection::vec("[A-Za-z]{1,6}( [A-Za-z]{1,6})?", 0..4),
        ) {
            let hits: Vec<SearchHit> = names.iter().map(|name| hit("said", &[name.as_str()], 1.0)).collect();
            let named = named_speakers(&query, &hits);
            for speaker in &named {
                prop_assert!(names.contains(speaker));
            }
        }

        /// Focus only ever lowers scores, keeps every hit, and leaves the hits about the named
        /// speaker in the order they had.
        #[test]
        fn focus_keeps_every_hit_and_the_named_speakers_order(
            rows in proptest::collection::vec(("[A-Za-z ]{0,20}", 0usize..3, 0.0f64..10.0), 0..12),
            factor in 0.0f64..1.0,
        ) {
            let speakers = ["Ana", "Noor", "Kofi"];
            let mut hits: Vec<SearchHit> = rows
                .iter()
                .enumerate()
                .map(|(index, (text, speaker, score))| SearchHit {
                    key: Key::Memory(crate::search::tests::memory_named(&index.to_string())),
                    ..hit(text, &[speakers[*speaker]], *score)
                })
                .collect();
            hits.sort_by(|a, b| b.score.total_cmp(&a.score));
            let before: Vec<(Key, f64)> = hits.iter().map(|hit| (hit.key.clone(), hit.score)).collect();
            focus(&mut hits, &["Noor".to_owned()], factor);
            prop_assert_eq!(hits.len(), before.len());
            for pair in hits.windows(2) {
                prop_assert!(pair[0].score >= pair[1].score);
            }
            let unfocused = |key: &Key| hits.iter().any(|hit| &hit.key == key && hit.parts.speaker_focus.is_none());
            for hit in &hits {
                let old = before.iter().find(|(key, _)| *key == hit.key).map(|(_, score)| *score);
                prop_assert!(old.is_some_and(|old| hit.score <= old));
            }
            let kept_after: Vec<&Key> = hits.iter().filter(|hit| hit.parts.speaker_focus.is_none()).map(|hit| &hit.key).collect();
            let kept_before: Vec<&Key> = before.iter().map(|(key, _)| key).filter(|key| unfocused(key)).collect();
            prop_assert_eq!(kept_after, kept_before);
        }
    }
}
