//! Field-level cleaning of one item: text, dates, flags, labels and entity kinds.
//!
//! Each function turns a model's loosely typed value into our closed form and says when it had to repair or
//! discard something, so the caller can count it; none of them can fail the item on its own.

use chrono::{DateTime, FixedOffset, NaiveDate, NaiveDateTime, TimeZone, Utc};
use memsift_core::status::Temporal;

use crate::dedupe::{
    BAG_BUCKETS, FuzzyText, NORMALIZED_BUCKET, Signature, compact_ascii_key, is_collapsed_printable_ascii,
};
use crate::loose::LooseValue;

/// Link kinds a memory may declare towards known memories (the link validator's vocabulary).
pub const RELATIONSHIP_TYPES: [&str; 6] = [
    "conflicts",
    "supersedes",
    "causes",
    "instance_of",
    "invalidated_by",
    "motivated_by",
];

/// The closed set of entity kinds; anything else becomes `other`.
pub const ENTITY_KINDS: [&str; 7] = ["person", "place", "organization", "pet", "product", "event", "other"];

/// Shortest entity name kept, in characters.
pub const MIN_ENTITY_CHARS: usize = 2;

/// Phrases that make a memory private whatever the model said (address, health, family, money, contact).
///
/// The model labels categories; this list is the deterministic half for the phrasings we have seen, because
/// marking a private fact public costs more than marking a public one private. Matched on lowercased text at a
/// word start, so `live in` does not fire inside `alive in`.
pub const SENSITIVE_PHRASES: &[&str] = &[
    "address is",
    "allerg",
    "anxiety",
    "bank account",
    "birthday",
    "credit card",
    "date of birth",
    "debt",
    "depress",
    "diagnos",
    "disorder",
    "divorc",
    "email address",
    "home address",
    "illness",
    "income",
    "live at",
    "live in",
    "lives at",
    "lives in",
    "living in",
    "medication",
    "moved to",
    "my boyfriend",
    "my girlfriend",
    "my husband",
    "my partner",
    "my wife",
    "passport",
    "password",
    "phone number",
    "postcode",
    "pregnan",
    "prescri",
    "real name",
    "salary",
    "social security",
    "street address",
    "surgery",
    "therapist",
    "therapy",
    "zip code",
];

/// Bytes that continue a word: ASCII letters and digits, and every byte of a multi-byte character, so a phrase
/// never starts inside a word. A table, because this test runs on every byte of every item.
const IS_WORD_BYTE: [bool; 256] = word_bytes();

const fn word_bytes() -> [bool; 256] {
    let mut table = [false; 256];
    let mut byte = 0usize;
    while byte < 256 {
        table[byte] = (byte as u8).is_ascii_alphanumeric() || byte >= 0x80;
        byte += 1;
    }
    table
}

/// For each lowercase ASCII letter, the range of [`SENSITIVE_PHRASES`] starting with it (the list is sorted), so a
/// word start is compared with a handful of phrases instead of all of them.
const PHRASES_BY_FIRST_LETTER: [(usize, usize); 26] = phrases_by_first_letter();

const fn phrases_by_first_letter() -> [(usize, usize); 26] {
    let mut ranges = [(0usize, 0usize); 26];
    let mut index = 0;
    while index < SENSITIVE_PHRASES.len() {
        let first = SENSITIVE_PHRASES[index].as_bytes()[0];
        assert!(
            first.is_ascii_lowercase(),
            "phrases start with a lowercase ASCII letter"
        );
        if index > 0 {
            assert!(
                SENSITIVE_PHRASES[index - 1].as_bytes()[0] <= first,
                "phrases are sorted by first letter"
            );
        }
        let letter = (first - b'a') as usize;
        if ranges[letter].1 == 0 {
            ranges[letter].0 = index;
        }
        ranges[letter].1 = index + 1;
        index += 1;
    }
    ranges
}

/// A cleaned text and whether characters had to be removed.
pub(crate) struct CleanText {
    pub text: String,
    pub stripped_controls: bool,
}

/// Trims, collapses whitespace and strips control and zero-width characters in one pass.
///
/// Controls are removed rather than turned into spaces (except real whitespace), because a stray NUL inside a word
/// is an encoding accident, not a word break.
pub(crate) fn clean_text(raw: &str) -> CleanText {
    if is_already_clean(raw) || is_already_clean_unicode(raw) {
        return CleanText {
            text: raw.to_owned(),
            stripped_controls: false,
        };
    }
    let mut text = String::with_capacity(raw.len());
    let mut stripped_controls = false;
    let mut pending_space = false;
    for c in raw.chars() {
        if c.is_whitespace() {
            pending_space = !text.is_empty();
            continue;
        }
        if c.is_control() || is_zero_width(c) {
            stripped_controls = true;
            continue;
        }
        if pending_space {
            text.push(' ');
            pending_space = false;
        }
        text.push(c);
    }
    CleanText {
        text,
        stripped_controls,
    }
}

/// Printable ASCII with single inner spaces: what nearly every model text is, and needs only a copy.
fn is_already_clean(raw: &str) -> bool {
    let bytes = raw.as_bytes();
    let mut previous = b' ';
    for &byte in bytes {
        if !(b' '..=b'~').contains(&byte) || (byte == b' ' && previous == b' ') {
            return false;
        }
        previous = byte;
    }
    previous != b' ' || bytes.is_empty()
}

/// [`is_already_clean`] for text with non-ASCII characters: single spaces its only whitespace, and no control or
/// zero-width characters, so cleaning it is a copy too.
fn is_already_clean_unicode(raw: &str) -> bool {
    let mut previous_is_space = true;
    for c in raw.chars() {
        if c == ' ' {
            if previous_is_space {
                return false;
            }
            previous_is_space = true;
            continue;
        }
        if c.is_whitespace() || c.is_control() || is_zero_width(c) {
            return false;
        }
        previous_is_space = false;
    }
    !previous_is_space || raw.is_empty()
}

/// Characters that `clean_text` removes although they are neither whitespace nor controls.
fn is_zero_width(c: char) -> bool {
    matches!(c, '\u{200B}'..='\u{200D}' | '\u{2060}' | '\u{FEFF}')
}

/// Everything validation and dedupe need from an item's text.
pub(crate) struct AnalyzedText {
    /// Trimmed and whitespace-collapsed, controls removed.
    pub text: String,
    pub stripped_controls: bool,
    /// The fuzzy bounds' summary of `text`; its normalized form is computed only when a comparison needs it.
    pub signature: Signature,
    /// `memsift_core::text::dedupe_key` of `text`.
    pub exact_key: String,
    /// [`mentions_private_fact`] of the normalized text.
    pub mentions_private: bool,
}

impl AnalyzedText {
    /// Cleans, normalizes, keys and scans a text. Nearly every model text is printable ASCII with single inner
    /// spaces; for those all of it happens in one pass over the bytes, where separate passes (clean, lowercase,
    /// histogram, key, phrases) were the bulk of the per-item cost. Anything else takes the general path.
    pub(crate) fn of(raw: &str) -> Self {
        if let Some(analyzed) = Self::of_clean_ascii(raw) {
            return analyzed;
        }
        let cleaned = clean_text(raw);
        // Text that only needed its whitespace collapsed or controls removed is clean ASCII now.
        if let Some(analyzed) = Self::of_clean_ascii(&cleaned.text) {
            return Self {
                stripped_controls: cleaned.stripped_controls,
                ..analyzed
            };
        }
        let (fuzzy, exact_key) = FuzzyText::of_clean_with_exact_key(&cleaned.text);
        let mentions_private = mentions_private_fact(fuzzy.normalized());
        Self {
            text: cleaned.text,
            stripped_controls: cleaned.stripped_controls,
            signature: *fuzzy.signature(),
            exact_key,
            mentions_private,
        }
    }

    /// The fast path; `None` unless `raw` is non-empty printable ASCII with single inner spaces (what
    /// [`is_already_clean`] accepts), for which cleaning is a copy and normalizing is lowercasing. The lowercased
    /// copy is compacted into the key in place, after the phrase scan has read each word of it; the histogram
    /// folds case itself.
    fn of_clean_ascii(raw: &str) -> Option<Self> {
        let bytes = raw.as_bytes();
        if bytes.is_empty() || bytes.len() > usize::from(u16::MAX) || !is_collapsed_printable_ascii(bytes) {
            return None;
        }
        let mut key = bytes.to_ascii_lowercase();
        let mut mentions_private = false;
        // The text is at most u16::MAX bytes long, so no count can overflow.
        let mut bag = [0u16; BAG_BUCKETS];
        compact_ascii_key(
            &mut key,
            |byte| bag[usize::from(NORMALIZED_BUCKET[usize::from(byte)]) % BAG_BUCKETS] += 1,
            |rest| {
                if !mentions_private {
                    mentions_private = phrase_starts(rest);
                }
            },
        );
        // ASCII in, ASCII out: the conversion succeeds; `?` only avoids an `expect`.
        let exact_key = String::from_utf8(key).ok()?;
        Some(Self {
            text: raw.to_owned(),
            stripped_controls: false,
            signature: Signature::of_counted_clean_ascii(bytes.len(), bag),
            exact_key,
            mentions_private,
        })
    }
}

/// For each pair of lowercase ASCII letters, the range of [`SENSITIVE_PHRASES`] starting with it (the list is
/// sorted), so nearly every word start is ruled out by one lookup.
const PHRASES_BY_PREFIX: [(u8, u8); 26 * 26] = phrases_by_prefix();

const fn phrases_by_prefix() -> [(u8, u8); 26 * 26] {
    let mut ranges = [(0u8, 0u8); 26 * 26];
    assert!(SENSITIVE_PHRASES.len() < 256, "phrase indices fit in a byte");
    let mut index = 0;
    while index < SENSITIVE_PHRASES.len() {
        let phrase = SENSITIVE_PHRASES[index].as_bytes();
        assert!(
            phrase.len() >= 2 && phrase[0].is_ascii_lowercase() && phrase[1].is_ascii_lowercase(),
            "phrases start with two lowercase ASCII letters"
        );
        let prefix = (phrase[0] - b'a') as usize * 26 + (phrase[1] - b'a') as usize;
        if index > 0 {
            let before = SENSITIVE_PHRASES[index - 1].as_bytes();
            let before_prefix = (before[0] - b'a') as usize * 26 + (before[1] - b'a') as usize;
            assert!(before_prefix <= prefix, "phrases are sorted by their first two letters");
        }
        if ranges[prefix].1 == 0 {
            ranges[prefix].0 = index as u8;
        }
        ranges[prefix].1 = index as u8 + 1;
        index += 1;
    }
    ranges
}

/// Whether lowercased text that starts at a word start begins with one of [`SENSITIVE_PHRASES`], looked up by
/// its first two letters (every phrase has at least two).
fn phrase_starts(rest: &[u8]) -> bool {
    let [first, second, ..] = *rest else {
        return false;
    };
    if !first.is_ascii_lowercase() || !second.is_ascii_lowercase() {
        return false;
    }
    let (start, end) = PHRASES_BY_PREFIX[usize::from(first - b'a') * 26 + usize::from(second - b'a')];
    // Compared byte by byte from the third: common words share a phrase's first letters ("the" and "therapy"), and
    // a call to memcmp for each cost more than the one or two bytes that tell them apart.
    SENSITIVE_PHRASES[usize::from(start)..usize::from(end)]
        .iter()
        .any(|phrase| {
            let phrase = phrase.as_bytes();
            rest.len() >= phrase.len() && phrase[2..].iter().zip(&rest[2..]).all(|(a, b)| a == b)
        })
}

/// The outcome of reading an optional date field.
pub(crate) enum DateField {
    Absent,
    Valid(DateTime<Utc>),
    Invalid,
}

/// Reads a date as UTC; naive dates and datetimes are taken in the user's offset (the prompt shows local times).
pub(crate) fn parse_date_field(value: Option<&LooseValue<'_>>, user_offset: FixedOffset) -> DateField {
    match value {
        None | Some(LooseValue::Null) => DateField::Absent,
        Some(LooseValue::String(text)) => {
            let text = text.trim();
            if text.is_empty() || text.eq_ignore_ascii_case("null") || text.eq_ignore_ascii_case("none") {
                return DateField::Absent;
            }
            parse_date(text, user_offset).map_or(DateField::Invalid, DateField::Valid)
        }
        Some(_) => DateField::Invalid,
    }
}

fn parse_date(text: &str, user_offset: FixedOffset) -> Option<DateTime<Utc>> {
    if let Ok(at) = DateTime::parse_from_rfc3339(text) {
        return Some(at.with_timezone(&Utc));
    }
    for format in [
        "%Y-%m-%d %H:%M:%S%.f%:z",
        "%Y-%m-%dT%H:%M:%S%.f%z",
        "%Y-%m-%d %H:%M:%S%.f%z",
    ] {
        if let Ok(at) = DateTime::parse_from_str(text, format) {
            return Some(at.with_timezone(&Utc));
        }
    }
    let naive = [
        "%Y-%m-%dT%H:%M:%S%.f",
        "%Y-%m-%d %H:%M:%S%.f",
        "%Y-%m-%dT%H:%M",
        "%Y-%m-%d %H:%M",
    ]
    .iter()
    .find_map(|format| NaiveDateTime::parse_from_str(text, format).ok())
    .or_else(|| {
        NaiveDate::parse_from_str(text, "%Y-%m-%d")
            .ok()
            .and_then(|date| date.and_hms_opt(0, 0, 0))
    })?;
    user_offset
        .from_local_datetime(&naive)
        .single()
        .map(|at| at.with_timezone(&Utc))
}

/// [`Temporal::normalize`] without its allocation: this runs on every item.
pub(crate) fn parse_temporal(label: &str) -> Temporal {
    let label = label.trim();
    [
        Temporal::OneOff,
        Temporal::Recurring,
        Temporal::Durable,
        Temporal::Unknown,
    ]
    .into_iter()
    .find(|temporal| temporal.as_str().eq_ignore_ascii_case(label))
    .unwrap_or(Temporal::Unknown)
}

/// Reads `sensitive`: a boolean, or the strings `true`/`false`. `None` means the value was present but unusable.
pub(crate) fn parse_flag(value: Option<&LooseValue<'_>>) -> Option<bool> {
    match value {
        None | Some(LooseValue::Null) => Some(false),
        Some(LooseValue::Bool(flag)) => Some(*flag),
        Some(LooseValue::String(text)) => match text.trim().to_ascii_lowercase().as_str() {
            "true" | "yes" => Some(true),
            "false" | "no" | "" => Some(false),
            _ => None,
        },
        Some(_) => None,
    }
}

/// Whether a lowercased text names something private (see [`SENSITIVE_PHRASES`]).
///
/// One pass over word starts, comparing only phrases with the same first byte: this runs on every item, and
/// forty substring searches per text were the processor's hottest loop.
pub fn mentions_private_fact(lowercased: &str) -> bool {
    let bytes = lowercased.as_bytes();
    let mut previous_is_word = false;
    for (at, &byte) in bytes.iter().enumerate() {
        let is_word = IS_WORD_BYTE[usize::from(byte)];
        if is_word && !previous_is_word && byte.is_ascii_lowercase() {
            let rest = &bytes[at..];
            let (first, end) = PHRASES_BY_FIRST_LETTER[usize::from(byte - b'a')];
            // Comparing the second byte inline rules out nearly every phrase without a call to memcmp.
            let second = rest.get(1).copied();
            if SENSITIVE_PHRASES[first..end]
                .iter()
                .any(|phrase| phrase.as_bytes().get(1).copied() == second && rest.starts_with(phrase.as_bytes()))
            {
                return true;
            }
        }
        previous_is_word = is_word;
    }
    false
}

/// Maps a model's entity kind onto [`ENTITY_KINDS`], accepting the usual synonyms (spaCy labels included).
pub fn normalize_entity_kind(raw: &str) -> &'static str {
    let raw = raw.trim();
    ENTITY_KIND_SYNONYMS
        .iter()
        .find(|(synonyms, _)| synonyms.iter().any(|synonym| synonym.eq_ignore_ascii_case(raw)))
        .map_or("other", |(_, kind)| kind)
}

/// Labels models use for each kind, spaCy's included; matched case-insensitively without allocating.
const ENTITY_KIND_SYNONYMS: [(&[&str], &str); 6] = [
    (&["person", "people", "human", "per", "character"], "person"),
    (
        &["place", "location", "loc", "gpe", "city", "country", "fac", "facility"],
        "place",
    ),
    (
        &["organization", "organisation", "org", "company", "institution", "team"],
        "organization",
    ),
    (&["pet", "animal"], "pet"),
    (&["product", "brand", "work_of_art", "book", "game"], "product"),
    (&["event", "holiday"], "event"),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cleaning_collapses_whitespace_and_drops_controls() {
        let clean = clean_text("  a\u{0}b \t\n c\u{200B}d  ");
        assert_eq!(clean.text, "ab cd");
        assert!(clean.stripped_controls);
        assert!(!clean_text("plain text").stripped_controls);
    }

    #[test]
    fn the_one_pass_text_analysis_matches_the_general_one() {
        let texts = [
            "Caroline moved to Boston (lives in Back Bay)",
            "He is ALLERGIC to nuts; my WIFE knows",
            "plain text with 42 numbers--and dashes",
            "alive in concert",
            "x",
            "Lives",
            "ends with phrase live in",
            " leading space",
            "double  space",
            "tab\there",
            "café lives in paris",
            "",
        ];
        for raw in texts {
            let general = {
                let cleaned = clean_text(raw);
                let (fuzzy, exact_key) = FuzzyText::of_clean_with_exact_key(&cleaned.text);
                let private = mentions_private_fact(fuzzy.normalized());
                (
                    cleaned.text,
                    cleaned.stripped_controls,
                    *fuzzy.signature(),
                    exact_key,
                    private,
                )
            };
            let analyzed = AnalyzedText::of(raw);
            assert_eq!(
                (
                    analyzed.text.clone(),
                    analyzed.stripped_controls,
                    analyzed.signature,
                    analyzed.exact_key.clone(),
                    analyzed.mentions_private
                ),
                general,
                "{raw:?}"
            );
            let general_fuzzy = FuzzyText::new(&analyzed.text);
            assert!(
                crate::dedupe::similarity_of(
                    &analyzed.text,
                    &analyzed.signature,
                    &analyzed.text,
                    general_fuzzy.signature(),
                    1.0
                )
                .is_some(),
                "{raw:?}"
            );
            assert_eq!(
                analyzed.exact_key,
                memsift_core::text::dedupe_key(&analyzed.text),
                "{raw:?}"
            );
        }
    }

    #[test]
    fn the_prefix_table_agrees_with_the_first_letter_scan() {
        let mut texts: Vec<String> = Vec::new();
        for phrase in SENSITIVE_PHRASES {
            texts.push(format!("x {phrase} y"));
            texts.push(format!("a{phrase}"));
            texts.push(format!("({phrase}"));
            texts.push(phrase[..phrase.len() - 1].to_owned());
            texts.push((*phrase).to_owned());
        }
        texts.extend(["", "l", "my", "zip", "m y wife", "9lives in"].map(str::to_owned));
        for text in &texts {
            let fast = AnalyzedText::of(text);
            assert_eq!(fast.mentions_private, mentions_private_fact(text), "{text:?}");
        }
    }

    #[test]
    fn naive_dates_are_read_in_the_users_offset() {
        let paris = FixedOffset::east_opt(3600).unwrap();
        let utc = FixedOffset::east_opt(0).unwrap();
        let at = parse_date("2024-05-01T10:00:00", paris).unwrap();
        assert_eq!(at.to_rfc3339(), "2024-05-01T09:00:00+00:00");
        assert_eq!(
            parse_date("2024-05-01", paris).unwrap().to_rfc3339(),
            "2024-04-30T23:00:00+00:00"
        );
        assert_eq!(
            parse_date("2024-05-01T10:00:00Z", paris).unwrap().to_rfc3339(),
            "2024-05-01T10:00:00+00:00"
        );
        assert_eq!(
            parse_date("2024-05-01 10:00", utc).unwrap().to_rfc3339(),
            "2024-05-01T10:00:00+00:00"
        );
        assert!(parse_date("next tuesday", utc).is_none());
        assert!(parse_date("2024-02-30", utc).is_none());
    }

    #[test]
    fn private_phrases_match_at_word_starts_only() {
        assert!(mentions_private_fact("she lives in boston"));
        assert!(mentions_private_fact("he is allergic to nuts"));
        assert!(!mentions_private_fact("the band was alive in concert"));
        assert!(!mentions_private_fact("likes iced coffee"));
    }

    #[test]
    fn temporal_parsing_agrees_with_core() {
        for label in ["durable", " One_Off ", "RECURRING", "unknown", "sometimes", ""] {
            assert_eq!(parse_temporal(label), Temporal::normalize(label), "{label:?}");
        }
    }

    #[test]
    fn the_clean_fast_path_agrees_with_the_general_one() {
        for text in ["plain text", " lead", "trail ", "two  spaces", "tab\there", ""] {
            assert_eq!(is_already_clean(text), clean_text_slow(text) == text, "{text:?}");
        }
        // Non-ASCII text always takes the general path.
        assert!(!is_already_clean("café"));
    }

    fn clean_text_slow(text: &str) -> String {
        text.split_whitespace().collect::<Vec<_>>().join(" ")
    }

    #[test]
    fn entity_kinds_fold_into_the_closed_set() {
        assert_eq!(normalize_entity_kind(" PERSON "), "person");
        assert_eq!(normalize_entity_kind("GPE"), "place");
        assert_eq!(normalize_entity_kind("spaceship"), "other");
        for kind in ENTITY_KINDS {
            assert_eq!(normalize_entity_kind(kind), kind);
        }
    }
}
