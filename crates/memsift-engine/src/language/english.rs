//! English, the one language memsift reads queries in: its stopwords, the words that join two
//! names, its stemmer, and the dates and relative times its queries name.

use std::sync::LazyLock;

use chrono::{DateTime, Utc};
use regex::Regex;
use rust_stemmers::{Algorithm, Stemmer};

use super::QueryLanguage;
use super::time::{Relative, TimeRange};

/// English.
pub struct English;

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

/// A date pattern with `{months}` standing for the month names of [`MONTHS`], so the names are
/// spelled once.
fn with_months(pattern: &str) -> Regex {
    Regex::new(&pattern.replace("{months}", &MONTHS.join("|"))).expect("a fixed pattern")
}

static DAY_MONTH_YEAR: LazyLock<Regex> =
    LazyLock::new(|| with_months(r"(?i)\b(\d{1,2})(?:st|nd|rd|th)?\s+(?:of\s+)?({months}),?\s+(\d{4})\b"));
static MONTH_DAY_YEAR: LazyLock<Regex> =
    LazyLock::new(|| with_months(r"(?i)\b({months})\s+(\d{1,2})(?:st|nd|rd|th)?,?\s+(\d{4})\b"));
static MONTH_YEAR: LazyLock<Regex> = LazyLock::new(|| with_months(r"(?i)\b({months}),?\s+(\d{4})\b"));
static ISO_DATE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\b(\d{4})-(\d{2})-(\d{2})\b").expect("a fixed pattern"));
static YEAR: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\b(?:in|during|of|since|from)\s+(19\d\d|20\d\d)\b").expect("a fixed pattern"));
/// The phrases of [`RELATIVE_PHRASES`], any run of spaces between their words.
static RELATIVE: LazyLock<Regex> = LazyLock::new(|| {
    let phrases: Vec<String> = RELATIVE_PHRASES
        .iter()
        .map(|(phrase, _)| phrase.replace(' ', r"\s+"))
        .collect();
    Regex::new(&format!(r"(?i)\b({})\b", phrases.join("|"))).expect("a fixed pattern")
});

fn month_number(name: &str) -> Option<u32> {
    let lower = name.to_lowercase();
    MONTHS
        .iter()
        .position(|month| *month == lower)
        .map(|index| index as u32 + 1)
}

const RELATIVE_PHRASES: [(&str, Relative); 8] = [
    ("yesterday", Relative::Yesterday),
    ("today", Relative::Today),
    ("last week", Relative::LastWeek),
    ("this week", Relative::ThisWeek),
    ("last month", Relative::LastMonth),
    ("this month", Relative::ThisMonth),
    ("last year", Relative::LastYear),
    ("this year", Relative::ThisYear),
];

impl QueryLanguage for English {
    fn is_stopword(&self, word: &str) -> bool {
        STOPWORDS.contains(&word)
    }

    fn joins_names(&self, word: &str) -> bool {
        matches!(word, "and" | "or" | "both")
    }

    fn stemmer(&self) -> Stemmer {
        Stemmer::create(Algorithm::English)
    }

    fn time_range(&self, query: &str, now: DateTime<Utc>) -> Option<TimeRange> {
        let number = |text: &str| text.parse::<u32>().ok();
        if let Some(caps) = DAY_MONTH_YEAR.captures(query) {
            let found = TimeRange::day(caps[3].parse().ok()?, month_number(&caps[2])?, number(&caps[1])?);
            if found.is_some() {
                return found;
            }
        }
        if let Some(caps) = MONTH_DAY_YEAR.captures(query) {
            let found = TimeRange::day(caps[3].parse().ok()?, month_number(&caps[1])?, number(&caps[2])?);
            if found.is_some() {
                return found;
            }
        }
        if let Some(caps) = ISO_DATE.captures(query) {
            let found = TimeRange::day(caps[1].parse().ok()?, number(&caps[2])?, number(&caps[3])?);
            if found.is_some() {
                return found;
            }
        }
        if let Some(caps) = MONTH_YEAR.captures(query) {
            return TimeRange::month(caps[2].parse().ok()?, month_number(&caps[1])?);
        }
        if let Some(caps) = YEAR.captures(query) {
            return TimeRange::year(caps[1].parse().ok()?);
        }
        let caps = RELATIVE.captures(query)?;
        let phrase = caps[1].to_lowercase().split_whitespace().collect::<Vec<_>>().join(" ");
        let (_, relative) = RELATIVE_PHRASES.iter().find(|(said, _)| *said == phrase)?;
        relative.at(now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(text).unwrap().with_timezone(&Utc)
    }

    fn time_range(query: &str, now: DateTime<Utc>) -> Option<TimeRange> {
        English.time_range(query, now)
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
