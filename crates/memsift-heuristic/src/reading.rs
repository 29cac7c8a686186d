//! What the extractor understands about sentences, for other readers of memories. The offline
//! post-processing judge asks it who a memory is about, which day it names, whether a sentence
//! stands on its own, and what each speaker of a segment said about themselves, so the judge
//! and the extractor read text the same way.

use chrono::NaiveDate;
use memsift_core::contract::Turn;

use crate::{dates, statement, text};

/// The sentences of a text, split where the extractor splits them ("Dr. Smith" and "3.12" stay whole).
pub fn sentences(text: &str) -> Vec<String> {
    text::sentences(&text::normalise(text))
}

/// Whether a sentence can be read without the one before it: it does not open with a pronoun
/// pointing back ("It has been helpful …", "They make me …").
pub fn stands_alone(sentence: &str) -> bool {
    !statement::carries_on(text::strip_preamble(sentence.trim()))
}

/// Who a memory is about, as this lane writes memories: the name it opens with, lower-cased,
/// with a possessive or a leading date phrase ("On 6 May 2023, Melanie's husband …") set
/// aside; `None` when it opens with no capitalised name.
pub fn subject(memory: &str) -> Option<String> {
    let mut rest = memory.trim();
    if dates::stated_day(rest).is_some_and(|_| rest.starts_with("On ") || rest.starts_with("In "))
        && let Some((_, after)) = rest.split_once(", ")
    {
        rest = after;
    }
    if rest.len() >= 8 && rest[..8].eq_ignore_ascii_case("the user") {
        return Some("the user".to_owned());
    }
    let words: Vec<&str> = rest
        .split_whitespace()
        .take_while(|word| word.chars().next().is_some_and(char::is_uppercase))
        .collect();
    let last = words.len().checked_sub(1)?;
    let mut name: Vec<String> = Vec::with_capacity(words.len());
    for (index, word) in words.iter().enumerate() {
        let bare = word.trim_end_matches(|c: char| !c.is_alphanumeric());
        let (bare, possessive) = match bare.strip_suffix("'s") {
            Some(owner) => (owner, true),
            None => (bare, false),
        };
        name.push(bare.to_lowercase());
        if possessive || index == last || word.ends_with(',') {
            break;
        }
    }
    let name = name.join(" ");
    (!name.is_empty()).then_some(name)
}

/// The calendar day a memory names with its year ("on 7 May 2023", "2023-05-07"), if any.
pub fn stated_day(memory: &str) -> Option<NaiveDate> {
    dates::stated_day(memory)
}

/// What each speaker of `turns` said about themselves, as the extractor writes it, in turn
/// order; date phrases are left as said, since a reader without the turns' times cannot place them.
pub fn statements(turns: &[Turn]) -> Vec<String> {
    crate::extract_undated(turns)
        .into_iter()
        .map(|item| item.text)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_subject_is_the_opening_name() {
        assert_eq!(
            subject("Caroline went to a support group.").as_deref(),
            Some("caroline")
        );
        assert_eq!(subject("Caroline's kids love the beach.").as_deref(), Some("caroline"));
        assert_eq!(subject("The user lives in Boston.").as_deref(), Some("the user"));
        assert_eq!(subject("Mary Ann Lee plays chess.").as_deref(), Some("mary ann lee"));
        assert_eq!(
            subject("On 6 May 2023, Melanie's husband Tom and Melanie went hiking.").as_deref(),
            Some("melanie")
        );
        assert_eq!(subject("plays chess on Sundays."), None);
    }

    #[test]
    fn continuations_do_not_stand_alone() {
        assert!(!stands_alone("It has been helpful for tracking tasks."));
        assert!(!stands_alone("They make Maria feel free."));
        assert!(stands_alone("Jolene started a bullet journal."));
    }

    #[test]
    fn stated_days_need_a_year() {
        assert_eq!(
            stated_day("Caroline went on 7 May 2023."),
            NaiveDate::from_ymd_opt(2023, 5, 7)
        );
        assert_eq!(stated_day("It was 2023-05-07."), NaiveDate::from_ymd_opt(2023, 5, 7));
        assert_eq!(stated_day("Caroline went on 7 May."), None);
        assert_eq!(stated_day("Caroline went in 2023."), None);
    }
}
