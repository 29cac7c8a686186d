//! The one place memsift reads a query's language: which words say nothing, which join two
//! names, how words are stemmed for the lexicons, and what time a query names. Ranking code asks
//! [`language`] and holds no word of any language; English is the one implementation.

mod english;
mod time;

use chrono::{DateTime, Utc};
use rust_stemmers::Stemmer;

pub use english::English;
pub use time::{Relative, TimeRange};

/// How queries (and the texts they are matched against) in one language are read.
pub trait QueryLanguage: Sync {
    /// Whether `word` (lower case) is too common to say what a text is about.
    fn is_stopword(&self, word: &str) -> bool;
    /// Whether `word` (lower case), standing between two names, joins them ("Ana and Noor"): then
    /// neither is the one asked about.
    fn joins_names(&self, word: &str) -> bool;
    /// The stemmer for index and query terms.
    fn stemmer(&self) -> Stemmer;
    /// The time range `query` names, the most precise first; relative phrases resolve at `now`.
    fn time_range(&self, query: &str, now: DateTime<Utc>) -> Option<TimeRange>;
}

/// The language queries are read in.
pub fn language() -> &'static dyn QueryLanguage {
    &English
}
