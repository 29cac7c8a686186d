//! Word-level reading of memory texts shared by the offline judge and the reviewer's narrowing check.
//!
//! "Content words" are lower-cased word tokens minus a small stopword list, with a possessive `'s` and a plural
//! or third-person `s` removed, so "Caroline's dogs" and "Caroline likes dog" share `caroline` and `dog`. The
//! stemming is deliberately crude: it only has to make the same word compare equal in two texts.

use std::collections::BTreeSet;

/// Function words that carry no subject matter. Negations and change markers are not here: losing "not" or
/// "no longer" changes a fact, so the reviewer's "nothing lost" checks must see them.
const STOPWORDS: &[&str] = &[
    "a", "about", "after", "all", "also", "am", "an", "and", "any", "are", "as", "at", "be", "been", "being", "but",
    "by", "can", "could", "did", "do", "does", "for", "from", "had", "has", "have", "he", "her", "here", "him", "his",
    "i", "if", "in", "into", "is", "it", "its", "just", "me", "my", "of", "on", "or", "our", "she", "so", "some",
    "than", "that", "the", "their", "them", "then", "there", "these", "they", "this", "those", "to", "too", "up", "us",
    "was", "we", "were", "what", "when", "which", "who", "will", "with", "would", "you", "your",
];

/// Words that say a fact is negated; "no longer" is the one phrase, see [`is_negated`].
const NEGATIONS: &[&str] = &["not", "never", "doesn't", "don't", "isn't", "stopped", "quit"];

/// Words that say a fact changed, so it replaces an older one. Only strong markers: "new",
/// "started" and "recently" also describe events that replace nothing ("John asked about new
/// games"), and a supersede archives the older memory.
pub(crate) const CHANGE_MARKERS: &[&str] = &["now", "moved", "changed", "switched", "became"];

/// The lower-cased word tokens of a text, apostrophes kept inside words ("doesn't"), curly ones made straight.
pub(crate) fn tokens(text: &str) -> Vec<String> {
    text.to_lowercase()
        .replace(['\u{2019}', '\u{2018}'], "'")
        .split(|c: char| !(c.is_alphanumeric() || c == '\''))
        .map(|token| token.trim_matches('\''))
        .filter(|token| !token.is_empty())
        .map(str::to_owned)
        .collect()
}

/// A token reduced so the same word compares equal across texts: no possessive, no plural `s`.
fn stem(token: &str) -> String {
    let token = token.strip_suffix("'s").unwrap_or(token);
    let long_enough = token.chars().count() > 3;
    match token.strip_suffix('s') {
        Some(stemmed) if long_enough && !token.ends_with("ss") => stemmed.to_owned(),
        _ => token.to_owned(),
    }
}

/// Whether a token is a stopword.
pub(crate) fn is_stopword(token: &str) -> bool {
    STOPWORDS.contains(&token)
}

/// The content words of a text, in order of first appearance, each once.
pub(crate) fn content_words(text: &str) -> Vec<String> {
    let mut seen = BTreeSet::new();
    tokens(text)
        .iter()
        .filter(|token| !is_stopword(token))
        .map(|token| stem(token))
        .filter(|word| seen.insert(word.clone()))
        .collect()
}

/// The content words of a text as a set.
pub(crate) fn content_set(text: &str) -> BTreeSet<String> {
    content_words(text).into_iter().collect()
}

/// The words that say what a text is about: content words without negations and change markers, so
/// "Caroline no longer eats meat" and "Caroline eats meat" are about the same thing.
pub(crate) fn topic_set(text: &str) -> BTreeSet<String> {
    content_words(text)
        .into_iter()
        .filter(|word| {
            let word = word.as_str();
            !NEGATIONS.contains(&word) && !CHANGE_MARKERS.contains(&word) && !["no", "longer"].contains(&word)
        })
        .collect()
}

/// Jaccard overlap of two sets: shared over combined, 0 when both are empty.
pub(crate) fn jaccard(a: &BTreeSet<String>, b: &BTreeSet<String>) -> f64 {
    let n_union = a.union(b).count();
    if n_union == 0 {
        return 0.0;
    }
    a.intersection(b).count() as f64 / n_union as f64
}

/// Whether the text negates what it states.
pub(crate) fn is_negated(text: &str) -> bool {
    has_any(text, NEGATIONS) || contains_phrase(text, "no longer")
}

/// Whether `phrase` occurs in `text` as whole words.
pub(crate) fn contains_phrase(text: &str, phrase: &str) -> bool {
    let (text_tokens, phrase_tokens) = (tokens(text), tokens(phrase));
    !phrase_tokens.is_empty()
        && text_tokens
            .windows(phrase_tokens.len())
            .any(|window| window == phrase_tokens.as_slice())
}

/// Whether any token of the text is one of `words`.
pub(crate) fn has_any(text: &str, words: &[&str]) -> bool {
    tokens(text).iter().any(|token| words.contains(&token.as_str()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_words_drop_function_words_and_plural_endings() {
        assert_eq!(
            content_words("Caroline's dogs are in the garden"),
            ["caroline", "dog", "garden"]
        );
        assert_eq!(content_words("She doesn’t like cats"), ["doesn't", "like", "cat"]);
        assert_eq!(content_words("class is his"), ["class"]);
    }

    #[test]
    fn negations_are_whole_words_and_no_longer_a_phrase() {
        assert!(is_negated("Caroline no longer eats meat"));
        assert!(is_negated("Caroline doesn’t eat meat"));
        assert!(!is_negated("Caroline has no pets and a longer commute"));
        assert!(!is_negated("Caroline knotted a scarf"));
        assert!(contains_phrase("She did it so that Max could rest", "so that"));
        assert!(
            !contains_phrase("She did it also that day", "so that"),
            "whole words only"
        );
    }

    #[test]
    fn topics_ignore_negations_and_change_markers() {
        let before = topic_set("Caroline eats meat");
        let after = topic_set("Caroline no longer eats meat");
        assert_eq!(before, after);
        assert!(jaccard(&before, &after) > 0.99);
        assert_eq!(jaccard(&BTreeSet::new(), &BTreeSet::new()), 0.0);
    }
}
