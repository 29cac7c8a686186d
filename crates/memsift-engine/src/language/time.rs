//! Time ranges a query names, and the calendar arithmetic behind them: the same in every
//! language, whatever words named the time.

use chrono::{DateTime, Datelike, Duration, NaiveDate, TimeZone, Utc};

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

fn day_start(date: NaiveDate) -> DateTime<Utc> {
    Utc.from_utc_datetime(&date.and_hms_opt(0, 0, 0).expect("midnight exists"))
}

impl TimeRange {
    /// The day `year-month-day`; `None` when the calendar has no such day.
    pub fn day(year: i32, month: u32, day: u32) -> Option<TimeRange> {
        let date = NaiveDate::from_ymd_opt(year, month, day)?;
        Some(TimeRange {
            from: day_start(date),
            to: day_start(date) + Duration::days(1),
        })
    }

    /// The calendar month; `None` when there is no such month.
    pub fn month(year: i32, month: u32) -> Option<TimeRange> {
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

    /// The calendar year.
    pub fn year(year: i32) -> Option<TimeRange> {
        Some(TimeRange {
            from: day_start(NaiveDate::from_ymd_opt(year, 1, 1)?),
            to: day_start(NaiveDate::from_ymd_opt(year.checked_add(1)?, 1, 1)?),
        })
    }
}

/// A time named relative to now, whatever words named it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Relative {
    /// The day before today.
    Yesterday,
    /// Today.
    Today,
    /// The seven days before today.
    LastWeek,
    /// From this week's Monday to the end of today.
    ThisWeek,
    /// The calendar month before this one.
    LastMonth,
    /// This calendar month.
    ThisMonth,
    /// The calendar year before this one.
    LastYear,
    /// This calendar year.
    ThisYear,
}

impl Relative {
    /// The range this names at `now`.
    pub fn at(self, now: DateTime<Utc>) -> Option<TimeRange> {
        let today = now.date_naive();
        match self {
            Relative::Yesterday => TimeRange::day(today.year(), today.month(), today.day()).map(|range| TimeRange {
                from: range.from - Duration::days(1),
                to: range.from,
            }),
            Relative::Today => TimeRange::day(today.year(), today.month(), today.day()),
            Relative::LastWeek => Some(TimeRange {
                from: day_start(today) - Duration::days(7),
                to: day_start(today),
            }),
            Relative::ThisWeek => Some(TimeRange {
                from: day_start(today) - Duration::days(i64::from(today.weekday().num_days_from_monday())),
                to: day_start(today) + Duration::days(1),
            }),
            Relative::LastMonth => {
                let this = TimeRange::month(today.year(), today.month())?;
                let before = this.from - Duration::days(1);
                TimeRange::month(before.year(), before.month())
            }
            Relative::ThisMonth => TimeRange::month(today.year(), today.month()),
            Relative::LastYear => TimeRange::year(today.year() - 1),
            Relative::ThisYear => TimeRange::year(today.year()),
        }
    }
}
