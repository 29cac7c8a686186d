//! What a search query says beyond its words: the terms worth matching lexically (its language's
//! stopwords left out), and the query as embedded, without the speakers' names.

use std::collections::BTreeSet;

pub use crate::language::TimeRange;
use crate::language::language;

/// The most terms one lexical query carries: a pasted page must not become a thousand-term OR.
pub const MAX_TERMS: usize = 32;

/// The lexical terms of a query: lower-cased words of letters or digits, stopwords and one-letter
/// words left out, each once, in order, at most [`MAX_TERMS`].
pub fn terms(query: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for word in query
        .split(|c: char| !c.is_alphanumeric())
        .filter(|word| !word.is_empty())
    {
        let word = word.to_lowercase();
        if word.chars().count() < 2 || language().is_stopword(&word) || out.contains(&word) {
            continue;
        }
        out.push(word);
        if out.len() == MAX_TERMS {
            break;
        }
    }
    out
}

/// `query` without the words that name a speaker (`speaker_words`, lower case): "What are Nate's
/// favorite desserts?" is embedded as "What are favorite desserts?". Every memory of a user's
/// conversations names one of their speakers, so a name in the query pulls its vector toward
/// everything that person said rather than toward what is asked; who a result is about is
/// judged apart, by who said its evidence (`focus`). A query of names only is left whole.
pub fn without_names(query: &str, speaker_words: &BTreeSet<String>) -> String {
    let names_a_speaker = |word: &str| {
        word.split(|c: char| !c.is_alphanumeric())
            .find(|part| !part.is_empty())
            .is_some_and(|part| speaker_words.contains(&part.to_lowercase()))
    };
    let kept: Vec<&str> = query.split_whitespace().filter(|word| !names_a_speaker(word)).collect();
    if kept.is_empty() {
        query.to_owned()
    } else {
        kept.join(" ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_text_embedded_leaves_out_the_speakers_names_in_any_form() {
        let speakers: BTreeSet<String> = ["nate", "joanna"].map(str::to_owned).into();
        assert_eq!(
            without_names("What are Nate's favorite desserts?", &speakers),
            "What are favorite desserts?"
        );
        assert_eq!(
            without_names("Did JOANNA and nate, both, go to Paris?", &speakers),
            "Did and both, go to Paris?"
        );
        assert_eq!(
            without_names("Nate?", &speakers),
            "Nate?",
            "names only: nothing else to embed"
        );
        assert_eq!(
            without_names("What did Natey say?", &speakers),
            "What did Natey say?",
            "a word that only begins like a name is no name"
        );
    }

    proptest::proptest! {
        /// Whatever the query and names: no word left names a speaker unless nothing else was
        /// there (then the query is whole), and every word that names nobody stays, in order.
        #[test]
        fn without_names_drops_the_names_and_only_the_names(
            query in "(\\PC{0,8}|Nate's|nate|NATE|Jo) {0,1}(\\PC{0,8}|Nate's|nate|NATE|Jo)",
            names in proptest::collection::btree_set("[a-z]{1,4}", 0..3),
        ) {
            let mut names = names;
            names.insert("nate".to_owned());
            let names_someone = |word: &str| {
                word.split(|c: char| !c.is_alphanumeric())
                    .find(|part| !part.is_empty())
                    .is_some_and(|part| names.contains(&part.to_lowercase()))
            };
            let embedded = without_names(&query, &names);
            let others: Vec<&str> = query.split_whitespace().filter(|word| !names_someone(word)).collect();
            if others.is_empty() {
                proptest::prop_assert_eq!(embedded, query);
            } else {
                proptest::prop_assert!(embedded.split_whitespace().all(|word| !names_someone(word)));
                proptest::prop_assert_eq!(embedded.split_whitespace().collect::<Vec<_>>(), others);
            }
        }
    }

    #[test]
    fn terms_drop_stopwords_short_words_and_repeats_and_keep_names_and_numbers() {
        assert_eq!(
            terms("When did Caroline go to the LGBTQ support group? The group, in 2023!"),
            vec!["caroline", "go", "lgbtq", "support", "group", "2023"]
        );
        assert!(terms("?? the a I").is_empty());
        let long: String = (0..100).map(|n| format!("word{n} ")).collect();
        assert_eq!(terms(&long).len(), MAX_TERMS);
    }
}
