//! Finds the first date phrase in a clause and resolves it against the day the turn was said.
//!
//! Only phrases whose meaning is unambiguous enough to store are resolved: `today`, `tomorrow`,
//! `next week`, weekdays, `in three days` and explicit calendar dates. Anything vaguer
//! ("soon", "someday") is not a date, so a plan that only has such a phrase is not kept.

use std::sync::LazyLock;

use chrono::{Datelike, Days, Months, NaiveDate, Weekday};
use regex::{Captures, Regex};

/// A date phrase found in a clause, with the day it resolves to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct DateHit {
    /// The resolved calendar day.
    pub date: NaiveDate,
    /// Byte offset where the phrase (including a leading `on`) starts in the clause.
    pub start: usize,
    /// Byte offset just past the phrase.
    pub end: usize,
}

const MONTHS: &str = "january|february|march|april|may|june|july|august|september|october|november|december|\
                      jan|feb|mar|apr|jun|jul|aug|sept|sep|oct|nov|dec";

static DATE_PHRASE: LazyLock<Regex> = LazyLock::new(|| {
    let pattern = format!(
        r"(?ix)
        \b(?:on\s+|for\s+)?(?:
            (?P<iso_y>\d{{4}})-(?P<iso_m>\d{{1,2}})-(?P<iso_d>\d{{1,2}})
          | (?:the\s+)?(?P<dm_d>\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?(?P<dm_m>{MONTHS})\.?(?:,?\s+(?P<dm_y>\d{{4}}))?
          | (?P<md_m>{MONTHS})\.?\s+(?:the\s+)?(?P<md_d>\d{{1,2}})(?:st|nd|rd|th)?(?:,?\s+(?P<md_y>\d{{4}}))?
          | (?P<rel>the\s+day\s+after\s+tomorrow|tomorrow|today|tonight|this\s+(?:morning|afternoon|evening)
                |next\s+week|next\s+month|this\s+weekend|next\s+weekend)
          | in\s+(?P<count>\d{{1,3}}|a|an|one|two|three|four|five|six|seven|eight|nine|ten)\s+(?P<unit>days?|weeks?)
          | (?:(?P<wd_mod>this\s+coming|this|next|coming)\s+)?(?P<wd>monday|tuesday|wednesday|thursday|friday|saturday|sunday)
        )\b"
    );
    Regex::new(&pattern).expect("the date pattern is a fixed literal exercised by every date test")
});

/// Finds the first resolvable date phrase in `clause`, resolved relative to `today`.
///
/// Weekdays preceded by `every` or `each` describe a routine, not a date, so they are skipped.
pub(crate) fn find_date(clause: &str, today: NaiveDate) -> Option<DateHit> {
    for caps in DATE_PHRASE.captures_iter(clause) {
        let Some(whole) = caps.get(0) else { continue };
        let before = clause[..whole.start()].to_ascii_lowercase();
        if before.ends_with("every ") || before.ends_with("each ") {
            continue;
        }
        if let Some(date) = resolve(&caps, today) {
            return Some(DateHit {
                date,
                start: whole.start(),
                end: whole.end(),
            });
        }
    }
    None
}

fn resolve(caps: &Captures<'_>, today: NaiveDate) -> Option<NaiveDate> {
    if let (Some(y), Some(m), Some(d)) = (caps.name("iso_y"), caps.name("iso_m"), caps.name("iso_d")) {
        return NaiveDate::from_ymd_opt(
            y.as_str().parse().ok()?,
            m.as_str().parse().ok()?,
            d.as_str().parse().ok()?,
        );
    }
    if let (Some(m), Some(d)) = (caps.name("dm_m"), caps.name("dm_d")) {
        return calendar_day(today, m.as_str(), d.as_str(), caps.name("dm_y").map(|y| y.as_str()));
    }
    if let (Some(m), Some(d)) = (caps.name("md_m"), caps.name("md_d")) {
        return calendar_day(today, m.as_str(), d.as_str(), caps.name("md_y").map(|y| y.as_str()));
    }
    if let Some(rel) = caps.name("rel") {
        return relative_day(today, &squash(rel.as_str()));
    }
    if let (Some(count), Some(unit)) = (caps.name("count"), caps.name("unit")) {
        let count = number_word(&count.as_str().to_ascii_lowercase())?;
        let days = if unit.as_str().to_ascii_lowercase().starts_with("week") {
            count * 7
        } else {
            count
        };
        return today.checked_add_days(Days::new(days));
    }
    if let Some(weekday) = caps.name("wd") {
        let weekday: Weekday = weekday.as_str().parse().ok()?;
        let modifier = caps.name("wd_mod").map(|m| squash(m.as_str()));
        return weekday_day(today, weekday, modifier.as_deref());
    }
    None
}

/// Lowercases and collapses inner whitespace so phrase matching does not depend on spacing.
fn squash(text: &str) -> String {
    text.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_ascii_lowercase()
}

fn number_word(word: &str) -> Option<u64> {
    let value = match word {
        "a" | "an" | "one" => 1,
        "two" => 2,
        "three" => 3,
        "four" => 4,
        "five" => 5,
        "six" => 6,
        "seven" => 7,
        "eight" => 8,
        "nine" => 9,
        "ten" => 10,
        digits => digits.parse().ok()?,
    };
    Some(value)
}

fn month_number(name: &str) -> Option<u32> {
    let lower = name.to_ascii_lowercase();
    let prefix = lower.get(..3)?;
    let number = match prefix {
        "jan" => 1,
        "feb" => 2,
        "mar" => 3,
        "apr" => 4,
        "may" => 5,
        "jun" => 6,
        "jul" => 7,
        "aug" => 8,
        "sep" => 9,
        "oct" => 10,
        "nov" => 11,
        "dec" => 12,
        _ => return None,
    };
    Some(number)
}

/// A day and month without a year means the next time that day comes round (today included),
/// because people announce plans, not history, with a bare date.
fn calendar_day(today: NaiveDate, month: &str, day: &str, year: Option<&str>) -> Option<NaiveDate> {
    let month = month_number(month)?;
    let day: u32 = day.parse().ok()?;
    if let Some(year) = year {
        return NaiveDate::from_ymd_opt(year.parse().ok()?, month, day);
    }
    let this_year = NaiveDate::from_ymd_opt(today.year(), month, day);
    match this_year {
        Some(date) if date >= today => Some(date),
        _ => NaiveDate::from_ymd_opt(today.year().checked_add(1)?, month, day),
    }
}

fn monday_of_next_week(today: NaiveDate) -> Option<NaiveDate> {
    today.checked_add_days(Days::new(7 - u64::from(today.weekday().num_days_from_monday())))
}

fn relative_day(today: NaiveDate, phrase: &str) -> Option<NaiveDate> {
    match phrase {
        "today" | "tonight" | "this morning" | "this afternoon" | "this evening" => Some(today),
        "tomorrow" => today.checked_add_days(Days::new(1)),
        "the day after tomorrow" => today.checked_add_days(Days::new(2)),
        // A week or weekend "next" means the following calendar week (weeks start on Monday).
        "next week" => monday_of_next_week(today),
        "next weekend" => monday_of_next_week(today)?.checked_add_days(Days::new(5)),
        "this weekend" => {
            let until_saturday = (7 + 5 - i64::from(today.weekday().num_days_from_monday())) % 7;
            // On a Sunday the weekend under way is meant, so "this weekend" is today.
            if today.weekday() == Weekday::Sun {
                Some(today)
            } else {
                today.checked_add_days(Days::new(until_saturday.unsigned_abs()))
            }
        }
        "next month" => today.with_day(1)?.checked_add_months(Months::new(1)),
        _ => None,
    }
}

/// "Friday" and "this Friday" mean the next Friday from today (today itself for "this");
/// "next Friday" means the Friday of the following calendar week.
fn weekday_day(today: NaiveDate, weekday: Weekday, modifier: Option<&str>) -> Option<NaiveDate> {
    if modifier == Some("next") {
        return monday_of_next_week(today)?.checked_add_days(Days::new(u64::from(weekday.num_days_from_monday())));
    }
    let ahead = (7 + i64::from(weekday.num_days_from_monday()) - i64::from(today.weekday().num_days_from_monday())) % 7;
    let ahead = if ahead == 0 && modifier != Some("this") {
        7
    } else {
        ahead
    };
    today.checked_add_days(Days::new(ahead.unsigned_abs()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Wednesday 6 May 2026.
    fn wednesday() -> NaiveDate {
        NaiveDate::from_ymd_opt(2026, 5, 6).unwrap()
    }

    fn resolved(clause: &str) -> Option<String> {
        find_date(clause, wednesday()).map(|hit| hit.date.to_string())
    }

    #[test]
    fn relative_phrases_resolve_against_the_turn_day() {
        let cases = [
            ("I fly tomorrow", "2026-05-07"),
            ("dinner tonight", "2026-05-06"),
            ("the day after tomorrow", "2026-05-08"),
            ("next week", "2026-05-11"),
            ("next month", "2026-06-01"),
            ("this weekend", "2026-05-09"),
            ("next weekend", "2026-05-16"),
            ("in 3 days", "2026-05-09"),
            ("in two weeks", "2026-05-20"),
            ("on Friday", "2026-05-08"),
            ("this Wednesday", "2026-05-06"),
            ("on Wednesday", "2026-05-13"),
            ("next Monday", "2026-05-11"),
            ("next Friday", "2026-05-15"),
        ];
        for (clause, expected) in cases {
            assert_eq!(resolved(clause).as_deref(), Some(expected), "{clause}");
        }
    }

    #[test]
    fn calendar_dates_resolve_with_and_without_a_year() {
        let cases = [
            ("on May 3", "2027-05-03"),
            ("May 6", "2026-05-06"),
            ("on June 3rd", "2026-06-03"),
            ("3 May 2026", "2026-05-03"),
            ("the 12th of August", "2026-08-12"),
            ("Sept. 9, 2027", "2027-09-09"),
            ("2026-05-03", "2026-05-03"),
        ];
        for (clause, expected) in cases {
            assert_eq!(resolved(clause).as_deref(), Some(expected), "{clause}");
        }
    }

    #[test]
    fn routines_impossible_dates_and_vague_words_are_not_dates() {
        for clause in [
            "every Monday",
            "each friday",
            "February 30",
            "2026-13-01",
            "soon",
            "someday",
            "I may 3x",
        ] {
            assert_eq!(resolved(clause), None, "{clause}");
        }
    }

    #[test]
    fn the_span_covers_a_leading_on() {
        let hit = find_date("I fly to Rome on Friday", wednesday()).unwrap();
        assert_eq!(&"I fly to Rome on Friday"[hit.start..hit.end], "on Friday");
    }
}
