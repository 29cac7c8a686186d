//! Finds the first date phrase in a clause and resolves it against the day the turn was said.
//!
//! Relative phrases ("yesterday", "last Saturday", "two weeks ago", "next month") become a
//! calendar day, week, month or year, so a memory read months later still says when. Phrases
//! whose meaning is too vague to store ("soon", "a few days ago", "someday") are not dates.
//! A bare weekday or day of the month points backwards in a past-tense sentence ("On Friday
//! we went …") and forwards otherwise ("I fly on Friday"), because that is how people use them.

use std::sync::LazyLock;

use chrono::{Datelike, Days, Months, NaiveDate, Weekday};
use regex::{Captures, Regex};

/// How much of the calendar a date phrase names; the resolved date is the first day of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Span {
    Day,
    Weekend,
    Week,
    Month,
    Year,
}

/// Whether a phrase looks back, forward or at the day it was said.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Direction {
    Past,
    Today,
    Future,
}

/// The tense of the sentence a phrase sits in, which decides where bare weekdays point.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Tense {
    Past,
    NotPast,
}

/// A date phrase found in a clause, with the period it resolves to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct DateHit {
    /// The first day of the period the phrase names.
    pub date: NaiveDate,
    pub span: Span,
    pub direction: Direction,
    /// Byte offset where the phrase (including a leading `on`) starts in the clause.
    pub start: usize,
    /// Byte offset just past the phrase.
    pub end: usize,
}

impl DateHit {
    /// The period as words a memory can carry: "on 7 May 2023", "in the week of 1 May 2023".
    pub(crate) fn phrase(&self) -> String {
        let day = self.date.format("%-d %B %Y");
        match self.span {
            Span::Day => format!("on {day}"),
            Span::Weekend => format!("on the weekend of {day}"),
            Span::Week => format!("in the week of {day}"),
            Span::Month => format!("in {}", self.date.format("%B %Y")),
            Span::Year => format!("in {}", self.date.year()),
        }
    }

    /// The first day of the period, as the contract's `happens_at`.
    pub(crate) fn iso(&self) -> String {
        self.date.format("%Y-%m-%d").to_string()
    }
}

const MONTHS: &str = "january|february|march|april|may|june|july|august|september|october|november|december|\
                      jan|feb|mar|apr|jun|jul|aug|sept|sep|oct|nov|dec";
const WEEKDAYS: &str = "monday|tuesday|wednesday|thursday|friday|saturday|sunday";
const COUNTS: &str =
    r"\d{1,3}|a|an|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|a\s+couple\s+of|couple\s+of";

static DATE_PHRASE: LazyLock<Regex> = LazyLock::new(|| {
    let pattern = format!(
        r"(?ix)
        \b(?:on\s+|for\s+)?(?:
            (?P<iso_y>\d{{4}})-(?P<iso_m>\d{{1,2}})-(?P<iso_d>\d{{1,2}})
          | (?:the\s+)?(?P<dm_d>\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?(?P<dm_m>{MONTHS})\.?(?:,?\s+(?P<dm_y>\d{{4}}))?
          | (?P<md_m>{MONTHS})\.?\s+(?:the\s+)?(?P<md_d>\d{{1,2}})(?:st|nd|rd|th)?(?:,?\s+(?P<md_y>\d{{4}}))?
          | (?P<rel>the\s+day\s+after\s+tomorrow|the\s+day\s+before\s+yesterday|tomorrow|today|tonight|yesterday
                |last\s+night|this\s+(?:morning|afternoon|evening)|(?:this\s+past|last|next|this)\s+(?:week|weekend)
                |(?:last|next|this)\s+(?:month|year)|earlier\s+this\s+(?:week|month|year))
          | (?P<ago_count>{COUNTS})\s+(?P<ago_unit>days?|weeks?|months?|years?)\s+ago
          | in\s+(?P<count>{COUNTS})\s+(?P<unit>days?|weeks?|months?|years?)
          | (?:(?P<wd_mod>this\s+past|last|past|this\s+coming|this|next|coming)\s+)?(?P<wd>{WEEKDAYS})
        )\b"
    );
    Regex::new(&pattern).expect("the date pattern is a fixed literal exercised by every date test")
});

/// Finds the first resolvable date phrase in `clause` of a present or future sentence.
pub(crate) fn find_date(clause: &str, today: NaiveDate) -> Option<DateHit> {
    find_date_in(clause, today, Tense::NotPast)
}

/// Finds the first resolvable date phrase in `clause`, resolved relative to `today`.
///
/// Weekdays preceded by `every` or `each` describe a routine, not a date, so they are skipped.
pub(crate) fn find_date_in(clause: &str, today: NaiveDate, tense: Tense) -> Option<DateHit> {
    for caps in DATE_PHRASE.captures_iter(clause) {
        let Some(whole) = caps.get(0) else { continue };
        let before = clause[..whole.start()].to_ascii_lowercase();
        if before.ends_with("every ") || before.ends_with("each ") {
            continue;
        }
        if let Some((date, span, direction)) = resolve(&caps, today, tense) {
            return Some(DateHit {
                date,
                span,
                direction,
                start: whole.start(),
                end: whole.end(),
            });
        }
    }
    None
}

/// The first calendar day `text` names with its year (an ISO date or "7 May 2023"): the dates
/// this lane writes into memories, which need no day of speaking to read.
pub(crate) fn stated_day(text: &str) -> Option<NaiveDate> {
    DATE_PHRASE.captures_iter(text).find_map(|caps| {
        let has_year = caps.name("iso_y").is_some() || caps.name("dm_y").is_some() || caps.name("md_y").is_some();
        if !has_year {
            return None;
        }
        // With the year given, the day of speaking plays no part.
        resolve(&caps, NaiveDate::MIN, Tense::NotPast).map(|(date, _, _)| date)
    })
}

type Resolved = (NaiveDate, Span, Direction);

fn resolve(caps: &Captures<'_>, today: NaiveDate, tense: Tense) -> Option<Resolved> {
    if let (Some(y), Some(m), Some(d)) = (caps.name("iso_y"), caps.name("iso_m"), caps.name("iso_d")) {
        let date = NaiveDate::from_ymd_opt(
            y.as_str().parse().ok()?,
            m.as_str().parse().ok()?,
            d.as_str().parse().ok()?,
        )?;
        return Some((date, Span::Day, direction_of(date, today)));
    }
    let calendar = match (
        caps.name("dm_m"),
        caps.name("dm_d"),
        caps.name("md_m"),
        caps.name("md_d"),
    ) {
        (Some(m), Some(d), _, _) => Some((m, d, caps.name("dm_y"))),
        (_, _, Some(m), Some(d)) => Some((m, d, caps.name("md_y"))),
        _ => None,
    };
    if let Some((month, day, year)) = calendar {
        let date = calendar_day(today, month.as_str(), day.as_str(), year.map(|y| y.as_str()), tense)?;
        return Some((date, Span::Day, direction_of(date, today)));
    }
    if let Some(rel) = caps.name("rel") {
        return relative(today, &squash(rel.as_str()));
    }
    if let (Some(count), Some(unit)) = (caps.name("ago_count"), caps.name("ago_unit")) {
        let count = number_word(&squash(count.as_str()))?;
        return shifted(today, count, unit.as_str(), false);
    }
    if let (Some(count), Some(unit)) = (caps.name("count"), caps.name("unit")) {
        let count = number_word(&squash(count.as_str()))?;
        return shifted(today, count, unit.as_str(), true);
    }
    if let Some(weekday) = caps.name("wd") {
        let weekday: Weekday = weekday.as_str().parse().ok()?;
        let modifier = caps.name("wd_mod").map(|m| squash(m.as_str()));
        let date = weekday_day(today, weekday, modifier.as_deref(), tense)?;
        return Some((date, Span::Day, direction_of(date, today)));
    }
    None
}

fn direction_of(date: NaiveDate, today: NaiveDate) -> Direction {
    match date.cmp(&today) {
        std::cmp::Ordering::Less => Direction::Past,
        std::cmp::Ordering::Equal => Direction::Today,
        std::cmp::Ordering::Greater => Direction::Future,
    }
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
        "two" | "a couple of" | "couple of" => 2,
        "three" => 3,
        "four" => 4,
        "five" => 5,
        "six" => 6,
        "seven" => 7,
        "eight" => 8,
        "nine" => 9,
        "ten" => 10,
        "eleven" => 11,
        "twelve" => 12,
        digits => digits.parse().ok()?,
    };
    Some(value)
}

/// Whether a lower-cased word is part of how this lane writes a date ("in the week of 1 May
/// 2023"): a number, a month's name or "week".
pub(crate) fn is_date_word(word: &str) -> bool {
    word == "week" || word.chars().all(|c| c.is_ascii_digit()) || MONTHS.split('|').any(|month| month == word)
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

/// A day and month without a year means the next time that day comes round (today included)
/// in a plan, and the last time it came round in a past-tense sentence.
fn calendar_day(today: NaiveDate, month: &str, day: &str, year: Option<&str>, tense: Tense) -> Option<NaiveDate> {
    let month = month_number(month)?;
    let day: u32 = day.parse().ok()?;
    if let Some(year) = year {
        return NaiveDate::from_ymd_opt(year.parse().ok()?, month, day);
    }
    let this_year = NaiveDate::from_ymd_opt(today.year(), month, day);
    match (tense, this_year) {
        (Tense::NotPast, Some(date)) if date >= today => Some(date),
        (Tense::NotPast, _) => NaiveDate::from_ymd_opt(today.year().checked_add(1)?, month, day),
        (Tense::Past, Some(date)) if date <= today => Some(date),
        (Tense::Past, _) => NaiveDate::from_ymd_opt(today.year().checked_sub(1)?, month, day),
    }
}

fn monday_of(day: NaiveDate) -> Option<NaiveDate> {
    day.checked_sub_days(Days::new(u64::from(day.weekday().num_days_from_monday())))
}

fn first_of_month(day: NaiveDate) -> Option<NaiveDate> {
    day.with_day(1)
}

fn first_of_year(day: NaiveDate) -> Option<NaiveDate> {
    NaiveDate::from_ymd_opt(day.year(), 1, 1)
}

fn days(count: u64) -> Days {
    Days::new(count)
}

fn relative(today: NaiveDate, phrase: &str) -> Option<Resolved> {
    use Direction::{Future, Past, Today};
    let this_monday = monday_of(today)?;
    let resolved = match phrase {
        "today" | "tonight" | "this morning" | "this afternoon" | "this evening" => (today, Span::Day, Today),
        "tomorrow" => (today.checked_add_days(days(1))?, Span::Day, Future),
        "the day after tomorrow" => (today.checked_add_days(days(2))?, Span::Day, Future),
        "yesterday" | "last night" => (today.checked_sub_days(days(1))?, Span::Day, Past),
        "the day before yesterday" => (today.checked_sub_days(days(2))?, Span::Day, Past),
        // Weeks start on Monday; "next week" is the following calendar week.
        "this week" | "earlier this week" => (this_monday, Span::Week, Today),
        "next week" => (this_monday.checked_add_days(days(7))?, Span::Week, Future),
        "last week" | "this past week" => (this_monday.checked_sub_days(days(7))?, Span::Week, Past),
        "this weekend" => {
            // On a Sunday the weekend under way is meant.
            let saturday = this_monday.checked_add_days(days(5))?;
            let direction = if today >= saturday { Today } else { Future };
            (saturday, Span::Weekend, direction)
        }
        "next weekend" => (this_monday.checked_add_days(days(12))?, Span::Weekend, Future),
        "last weekend" | "this past weekend" => {
            // Said at the weekend, "last weekend" is the one before; on a weekday, the one just gone.
            let saturday = this_monday.checked_sub_days(days(2))?;
            (saturday, Span::Weekend, Past)
        }
        "this month" | "earlier this month" => (first_of_month(today)?, Span::Month, Today),
        "next month" => (
            first_of_month(today)?.checked_add_months(Months::new(1))?,
            Span::Month,
            Future,
        ),
        "last month" => (
            first_of_month(today)?.checked_sub_months(Months::new(1))?,
            Span::Month,
            Past,
        ),
        "this year" | "earlier this year" => (first_of_year(today)?, Span::Year, Today),
        "next year" => (
            NaiveDate::from_ymd_opt(today.year().checked_add(1)?, 1, 1)?,
            Span::Year,
            Future,
        ),
        "last year" => (
            NaiveDate::from_ymd_opt(today.year().checked_sub(1)?, 1, 1)?,
            Span::Year,
            Past,
        ),
        _ => return None,
    };
    Some(resolved)
}

/// `count` units before (or after) today: a day count keeps its day, longer units name their
/// period, since "three weeks ago" is not meant to the day.
fn shifted(today: NaiveDate, count: u64, unit: &str, forward: bool) -> Option<Resolved> {
    let unit = unit.to_ascii_lowercase();
    let direction = if forward { Direction::Future } else { Direction::Past };
    let shift_days = |n: u64| {
        if forward {
            today.checked_add_days(days(n))
        } else {
            today.checked_sub_days(days(n))
        }
    };
    let shift_months = |n: u64| {
        let months = Months::new(u32::try_from(n).ok()?);
        if forward {
            first_of_month(today)?.checked_add_months(months)
        } else {
            first_of_month(today)?.checked_sub_months(months)
        }
    };
    if unit.starts_with("day") {
        return Some((shift_days(count)?, Span::Day, direction));
    }
    if unit.starts_with("week") {
        return Some((monday_of(shift_days(count.checked_mul(7)?)?)?, Span::Week, direction));
    }
    if unit.starts_with("month") {
        return Some((shift_months(count)?, Span::Month, direction));
    }
    let years = i32::try_from(count).ok()?;
    let year = if forward {
        today.year().checked_add(years)?
    } else {
        today.year().checked_sub(years)?
    };
    Some((NaiveDate::from_ymd_opt(year, 1, 1)?, Span::Year, direction))
}

/// In a plan, "Friday" and "this Friday" mean the next Friday from today (today itself for
/// "this") and "next Friday" the Friday of the following calendar week; in a past-tense
/// sentence, "Friday" and "last Friday" mean the last Friday before today.
fn weekday_day(today: NaiveDate, weekday: Weekday, modifier: Option<&str>, tense: Tense) -> Option<NaiveDate> {
    let backwards =
        matches!(modifier, Some("last" | "past" | "this past")) || (tense == Tense::Past && modifier.is_none());
    if backwards {
        let behind =
            (7 + i64::from(today.weekday().num_days_from_monday()) - i64::from(weekday.num_days_from_monday())) % 7;
        let behind = if behind == 0 { 7 } else { behind };
        return today.checked_sub_days(days(behind.unsigned_abs()));
    }
    if modifier == Some("next") {
        return monday_of(today)?
            .checked_add_days(days(7))?
            .checked_add_days(days(u64::from(weekday.num_days_from_monday())));
    }
    let ahead = (7 + i64::from(weekday.num_days_from_monday()) - i64::from(today.weekday().num_days_from_monday())) % 7;
    let ahead = if ahead == 0 && modifier != Some("this") {
        7
    } else {
        ahead
    };
    today.checked_add_days(days(ahead.unsigned_abs()))
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

    fn said(clause: &str, tense: Tense) -> Option<String> {
        find_date_in(clause, wednesday(), tense).map(|hit| hit.phrase())
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
            ("in two weeks", "2026-05-18"),
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
    fn past_phrases_name_their_day_week_month_or_year() {
        let cases = [
            ("I went yesterday", "on 5 May 2026"),
            ("last night", "on 5 May 2026"),
            ("last Saturday", "on 2 May 2026"),
            ("last Wednesday", "on 29 April 2026"),
            ("two weeks ago", "in the week of 20 April 2026"),
            ("3 days ago", "on 3 May 2026"),
            ("a couple of months ago", "in March 2026"),
            ("last week", "in the week of 27 April 2026"),
            ("last weekend", "on the weekend of 2 May 2026"),
            ("last month", "in April 2026"),
            ("last year", "in 2025"),
            ("five years ago", "in 2021"),
        ];
        for (clause, expected) in cases {
            assert_eq!(said(clause, Tense::Past).as_deref(), Some(expected), "{clause}");
        }
    }

    #[test]
    fn bare_weekdays_and_days_point_back_in_the_past_tense() {
        assert_eq!(said("On Friday we went", Tense::Past).as_deref(), Some("on 1 May 2026"));
        assert_eq!(
            said("On Friday we go", Tense::NotPast).as_deref(),
            Some("on 8 May 2026")
        );
        assert_eq!(said("on June 3", Tense::Past).as_deref(), Some("on 3 June 2025"));
        assert_eq!(said("on May 3", Tense::Past).as_deref(), Some("on 3 May 2026"));
    }

    #[test]
    fn month_and_year_ends_roll_over() {
        let at = |y, m, d| NaiveDate::from_ymd_opt(y, m, d).unwrap();
        let phrase = |clause: &str, today| find_date_in(clause, today, Tense::Past).map(|hit| hit.phrase());
        assert_eq!(
            phrase("next month", at(2023, 1, 31)).as_deref(),
            Some("in February 2023")
        );
        assert_eq!(
            phrase("yesterday", at(2024, 1, 1)).as_deref(),
            Some("on 31 December 2023")
        );
        assert_eq!(
            phrase("tomorrow", at(2023, 12, 31)).as_deref(),
            Some("on 1 January 2024")
        );
        assert_eq!(
            phrase("last month", at(2024, 3, 31)).as_deref(),
            Some("in February 2024")
        );
        assert_eq!(phrase("next year", at(2023, 12, 31)).as_deref(), Some("in 2024"));
        assert_eq!(
            phrase("last week", at(2024, 1, 2)).as_deref(),
            Some("in the week of 25 December 2023")
        );
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
            "a few days ago",
            "in 99999 years",
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
