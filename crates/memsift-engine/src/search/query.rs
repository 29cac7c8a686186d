//! What a search query says beyond its words: the terms worth matching lexically, and a time range
//! when it names one ("in May 2023", "on 7 May 2023", "in 2022", "last week", "yesterday").

use std::collections::BTreeSet;
use std::sync::LazyLock;

use chrono::{DateTime, Datelike, Duration, NaiveDate, TimeZone, Utc};
use regex::Regex;

/// Words too common to say what a memory is about; they only add noise to a lexical match.
const STOPWORDS: &[&str] = &[
    "a", "about", "after", "all", "also", "am", "an", "and", "any", "are", "as", "at", "be", "been", "before", "being",
    "but", "by", "can", "could", "did", "do", "does", "doing", "done", "for", "from", "had", "has", "have", "having",
    "he", "her", "hers", "him", "his", "how", "i", "if", "in", "into", "is", "it", "its", "just", "me", "might",
    "more", "most", "my", "no", "not", "now", "of", "on", "or", "our", "out", "over", "shall", "she", "should", "so",
    "some", "than", "that", "the", "their", "them", "then", "there", "these", "they", "this", "those", "to", "too",
    "under", "until", "up", "upon", "us", "very", "was", "we", "were", "what", "when", "where", "which", "while",
    "who", "whom", "whose", "why", "will", "with", "would", "you", "your", "yours", "yes", "ever", "kind", "likely",
];

/// Whether `word` (lower-case) is too common to be searched for.
pub fn is_stopword(word: &str) -> bool {
    STOPWORDS.contains(&word)
}

/// The most terms one lexical query carries: a pasted page must not become a thousand-term OR.
pub const MAX_TERMS: usize = 32;

/// A half-open time range `[from, to)` a query names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimeRange {
    /// Inclusive start.
    pub from: DateTime<Utc>,
    /// Exclusive end.
    pub to: DateTime<Utc>,
}

impl TimeRange {
    /// Whether `at` falls inside.
    pub fn contains(&self, at: DateTime<Utc>) -> bool {
        self.from <= at && at < self.to
    }
}

/// The lexical terms of a query: lower-cased words of letters or digits, stopwords and one-letter
/// words left out, each once, in order, at most [`MAX_TERMS`].
pub fn terms(query: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for word in query
        .split(|c: char| !c.is_alphanumeric())
        .filter(|word| !word.is_empty())
    {
        let word = word.to_lowercase();
        if word.chars().count() < 2 || STOPWORDS.contains(&word.as_str()) || out.contains(&word) {
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

const MONTHS: [&str; 12] = [
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
];

static DAY_MONTH_YEAR: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)\b(\d{1,2})(?:st|nd|rd|th)?\s+(?:of\s+)?(january|february|march|april|may|june|july|august|september|october|november|december),?\s+(\d{4})\b",
    )
    .expect("a fixed pattern")
});
static MONTH_DAY_YEAR: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)\b(january|february|march|april|may|june|july|august|september|october|november|december)\s+(\d{1,2})(?:st|nd|rd|th)?,?\s+(\d{4})\b",
    )
    .expect("a fixed pattern")
});
static MONTH_YEAR: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)\b(january|february|march|april|may|june|july|august|september|october|november|december),?\s+(\d{4})\b",
    )
    .expect("a fixed pattern")
});
static ISO_DATE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\b(\d{4})-(\d{2})-(\d{2})\b").expect("a fixed pattern"));
static YEAR: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\b(?:in|during|of|since|from)\s+(19\d\d|20\d\d)\b").expect("a fixed pattern"));
static RELATIVE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)\b(yesterday|today|last\s+week|last\s+month|last\s+year|this\s+week|this\s+month|this\s+year)\b")
        .expect("a fixed pattern")
});

fn month_number(name: &str) -> Option<u32> {
    let lower = name.to_lowercase();
    MONTHS
        .iter()
        .position(|month| *month == lower)
        .map(|index| index as u32 + 1)
}

fn day_start(date: NaiveDate) -> DateTime<Utc> {
    Utc.from_utc_datetime(&date.and_hms_opt(0, 0, 0).expect("midnight exists"))
}

fn day(year: i32, month: u32, day: u32) -> Option<TimeRange> {
    let date = NaiveDate::from_ymd_opt(year, month, day)?;
    Some(TimeRange {
        from: day_start(date),
        to: day_start(date) + Duration::days(1),
    })
}

fn month(year: i32, month: u32) -> Option<TimeRange> {
    let first = NaiveDate::from_ymd_opt(year, month, 1)?;
    let next = if month == 12 {
        NaiveDate::from_ymd_opt(year.checked_add(1)?, 1, 1)?
    } else {
        NaiveDate::from_ymd_opt(year, month + 1, 1)?
    };
    Some(TimeRange {
        from: day_start(first),
        to: day_start(next),
    })
}

fn year(year: i32) -> Option<TimeRange> {
    Some(TimeRange {
        from: day_start(NaiveDate::from_ymd_opt(year, 1, 1)?),
        to: day_start(NaiveDate::from_ymd_opt(year.checked_add(1)?, 1, 1)?),
    })
}

/// The time range a query names, the most precise first; relative phrases resolve against `now`.
pub fn time_range(query: &str, now: DateTime<Utc>) -> Option<TimeRange> {
    let number = |text: &str| text.parse::<u32>().ok();
    if let Some(caps) = DAY_MONTH_YEAR.captures(query) {
        let found = day(caps[3].parse().ok()?, month_number(&caps[2])?, number(&caps[1])?);
        if found.is_some() {
            return found;
        }
    }
    if let Some(caps) = MONTH_DAY_YEAR.captures(query) {
        let found = day(caps[3].parse().ok()?, month_number(&caps[1])?, number(&caps[2])?);
        if found.is_some() {
            return found;
        }
    }
    if let Some(caps) = ISO_DATE.captures(query) {
        let found = day(caps[1].parse().ok()?, number(&caps[2])?, number(&caps[3])?);
        if found.is_some() {
            return found;
        }
    }
    if let Some(caps) = MONTH_YEAR.captures(query) {
        return month(caps[2].parse().ok()?, month_number(&caps[1])?);
    }
    if let Some(caps) = YEAR.captures(query) {
        return year(caps[1].parse().ok()?);
    }
    let caps = RELATIVE.captures(query)?;
    let phrase = caps[1].to_lowercase();
    let phrase: Vec<&str> = phrase.split_whitespace().collect();
    let today = now.date_naive();
    match phrase.as_slice() {
        ["yesterday"] => day(today.year(), today.month(), today.day()).map(|range| TimeRange {
            from: range.from - Duration::days(1),
            to: range.from,
        }),
        ["today"] => day(today.year(), today.month(), today.day()),
        ["last", "week"] => Some(TimeRange {
            from: day_start(today) - Duration::days(7),
            to: day_start(today),
        }),
        ["this", "week"] => Some(TimeRange {
            from: day_start(today) - Duration::days(i64::from(today.weekday().num_days_from_monday())),
            to: day_start(today) + Duration::days(1),
        }),
        ["last", "month"] => {
            let this = month(today.year(), today.month())?;
            let before = this.from - Duration::days(1);
            month(before.year(), before.month())
        }
        ["this", "month"] => month(today.year(), today.month()),
        ["last", "year"] => year(today.year() - 1),
        ["this", "year"] => year(today.year()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(text).unwrap().with_timezone(&Utc)
    }

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

    #[test]
    fn named_days_months_years_and_relative_phrases_become_ranges() {
        let now = at("2026-03-15T12:00:00Z");
        let on_day = time_range("What happened on 7 May 2023?", now).unwrap();
        assert_eq!(
            (on_day.from, on_day.to),
            (at("2023-05-07T00:00:00Z"), at("2023-05-08T00:00:00Z"))
        );
        assert_eq!(time_range("May 7th, 2023", now), Some(on_day));
        assert_eq!(time_range("2023-05-07", now), Some(on_day));
        let in_month = time_range("what did she do in December 2023", now).unwrap();
        assert_eq!(
            (in_month.from, in_month.to),
            (at("2023-12-01T00:00:00Z"), at("2024-01-01T00:00:00Z"))
        );
        let in_year = time_range("trips in 2022", now).unwrap();
        assert_eq!(
            (in_year.from, in_year.to),
            (at("2022-01-01T00:00:00Z"), at("2023-01-01T00:00:00Z"))
        );
        let last_month = time_range("what did I buy last month", now).unwrap();
        assert_eq!(
            (last_month.from, last_month.to),
            (at("2026-02-01T00:00:00Z"), at("2026-03-01T00:00:00Z"))
        );
        let yesterday = time_range("yesterday", at("2026-01-01T08:00:00Z")).unwrap();
        assert_eq!(
            (yesterday.from, yesterday.to),
            (at("2025-12-31T00:00:00Z"), at("2026-01-01T00:00:00Z"))
        );
        // A day the month does not have still names its month.
        assert_eq!(time_range("31 February 2023", now), time_range("February 2023", now));
        assert_eq!(time_range("how are you", now), None);
        assert!(on_day.contains(at("2023-05-07T23:59:59Z")) && !on_day.contains(at("2023-05-08T00:00:00Z")));
    }
}
