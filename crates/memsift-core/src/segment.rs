//! The rule that decides segment membership when a message arrives.
//!
//! Membership is explicit: each message row carries its segment id. This function only decides
//! whether the message joins the open segment or starts a new one; it never looks at other rows.

use chrono::{DateTime, Duration, Utc};

/// What to do with an arriving message, given the conversation's open segment (if any).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placement {
    /// Append to the open segment.
    Join,
    /// Close the open segment (it went idle) and start a new one with this message.
    CloseAndStart,
    /// There is no open segment: start one.
    Start,
}

/// Decides where a message at `at` goes, given the open segment's last message time.
pub fn place_message(
    open_segment_last_at: Option<DateTime<Utc>>,
    at: DateTime<Utc>,
    idle_timeout: Duration,
) -> Placement {
    match open_segment_last_at {
        None => Placement::Start,
        Some(last) if at - last >= idle_timeout => Placement::CloseAndStart,
        Some(_) => Placement::Join,
    }
}

/// Whether an open segment whose last message was at `last_at` has been idle long enough to close.
pub fn is_idle(last_at: DateTime<Utc>, now: DateTime<Utc>, idle_timeout: Duration) -> bool {
    now - last_at >= idle_timeout
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(minute: i64) -> DateTime<Utc> {
        DateTime::<Utc>::UNIX_EPOCH + Duration::minutes(minute)
    }

    #[test]
    fn a_gap_of_the_idle_timeout_starts_a_new_segment() {
        let idle = Duration::minutes(60);
        assert_eq!(place_message(None, at(0), idle), Placement::Start);
        assert_eq!(place_message(Some(at(0)), at(59), idle), Placement::Join);
        assert_eq!(place_message(Some(at(0)), at(60), idle), Placement::CloseAndStart);
        assert!(!is_idle(at(0), at(59), idle));
        assert!(is_idle(at(0), at(60), idle));
    }
}
