//! A message as the import formats and the HTTP API hand it to the store, its idempotency key,
//! and the one canonical form of a user id every path in and every lookup goes through.

use chrono::{DateTime, Utc};
use unicode_normalization::UnicodeNormalization;

use crate::MemoryId;
use crate::status::Role;
use crate::text::short_hash;

/// One message to ingest.
#[derive(Clone, Debug, PartialEq)]
pub struct NewMessage {
    /// The host application's id for the user.
    pub user_external_id: String,
    /// The conversation (session) key; segments never span two conversations.
    pub conversation_key: String,
    /// A name for the segment this message starts, if the source has one (a LoCoMo session).
    pub segment_name: Option<String>,
    /// Who spoke.
    pub role: Role,
    /// The speaker's name, when the source names speakers.
    pub speaker: Option<String>,
    /// The text.
    pub content: String,
    /// When it was said.
    pub at: DateTime<Utc>,
    /// The source's id for the message (a LoCoMo `dia_id`), kept so memories can cite it.
    pub external_id: Option<String>,
    /// Close the segment after this message.
    pub boundary_after: bool,
    /// Memories the host application showed the assistant for this turn (retrieval hits); they
    /// become the known-memory context of the chunk, so the model can mark updates to them.
    pub referenced_memory_ids: Vec<MemoryId>,
}

impl NewMessage {
    /// The idempotency key: the source id when there is one, else a hash of what was said when.
    pub fn dedupe_key(&self) -> String {
        match &self.external_id {
            Some(external_id) => format!("id:{}\u{1f}{}", self.conversation_key, external_id),
            None => {
                let material = format!(
                    "{}\u{1f}{}\u{1f}{}\u{1f}{}",
                    self.conversation_key,
                    self.at.timestamp_millis(),
                    self.role.as_str(),
                    self.content
                );
                format!("h:{}", short_hash(material.as_bytes(), 32))
            }
        }
    }
}

/// The longest user id memsift stores, in bytes of its canonical form.
pub const MAX_USER_ID_BYTES: usize = 512;

/// The prefix erasure gives the ids of erased users; no live user may carry it.
pub const ERASED_USER_PREFIX: &str = "erased:";

/// Why a user id cannot be stored faithfully; each message names the fix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UserIdError {
    /// Nothing but whitespace.
    #[error("the user id is empty; give the host application's user id")]
    Empty,
    /// A control character (U+0000 included), which no listing or path can show faithfully.
    #[error("the user id holds the control character U+{0:04X}; send the id without control characters")]
    Control(u32),
    /// U+FFFD, which is what a lossy decoding leaves: two different ids would read the same.
    #[error("the user id holds U+FFFD (the replacement character); send the id as the host application stores it")]
    Replacement,
    /// Longer than [`MAX_USER_ID_BYTES`].
    #[error("the user id is {0} bytes, over the limit of 512; use a shorter id (a hash of a long one)")]
    TooLong(usize),
    /// Starts with the prefix erasure reserves.
    #[error("the user id starts with `erased:`, which memsift reserves for erased users; use another id")]
    Reserved,
}

/// The canonical form of a user id: surrounding whitespace trimmed, then Unicode NFC, so every
/// spelling that differs only there is one user. Ids that could not be stored and read back as
/// given are refused rather than altered: control characters (U+0000 included, which PostgreSQL
/// cannot store and which would otherwise become U+FFFD), U+FFFD itself (another id's altered
/// form), more than 512 bytes, or the prefix erasure reserves.
pub fn canonical_user_id(raw: &str) -> Result<String, UserIdError> {
    let canonical: String = raw.trim().nfc().collect();
    if canonical.is_empty() {
        return Err(UserIdError::Empty);
    }
    if let Some(control) = canonical.chars().find(|c| c.is_control()) {
        return Err(UserIdError::Control(u32::from(control)));
    }
    if canonical.contains('\u{FFFD}') {
        return Err(UserIdError::Replacement);
    }
    if canonical.len() > MAX_USER_ID_BYTES {
        return Err(UserIdError::TooLong(canonical.len()));
    }
    if canonical.starts_with(ERASED_USER_PREFIX) {
        return Err(UserIdError::Reserved);
    }
    Ok(canonical)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use unicode_normalization::UnicodeNormalization;

    use super::*;

    #[test]
    fn spellings_that_differ_in_surrounding_space_or_composition_are_one_id() {
        assert_eq!(canonical_user_id(" zz ").unwrap(), "zz");
        assert_eq!(canonical_user_id("Zoe\u{0301}").unwrap(), "Zo\u{e9}");
        assert_eq!(canonical_user_id("a\u{0}b"), Err(UserIdError::Control(0)));
        assert_eq!(canonical_user_id("a\u{FFFD}b"), Err(UserIdError::Replacement));
        assert_eq!(canonical_user_id(" \t "), Err(UserIdError::Empty));
        assert_eq!(canonical_user_id("erased:x"), Err(UserIdError::Reserved));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        /// Any string is refused or has one canonical form, which every respelling (padding,
        /// decomposed or composed) reaches and which is its own canonical form.
        #[test]
        fn every_spelling_of_an_id_reaches_one_canonical_form(raw in any::<String>(), pad in "[ \u{a0}\u{3000}]{0,3}") {
            match canonical_user_id(&raw) {
                Err(_) => {}
                Ok(canonical) => {
                    prop_assert_eq!(canonical_user_id(&canonical), Ok(canonical.clone()));
                    let nfd: String = raw.nfd().collect();
                    for spelling in [format!("{pad}{raw}{pad}"), nfd] {
                        prop_assert_eq!(canonical_user_id(&spelling), Ok(canonical.clone()));
                    }
                    prop_assert!(!canonical.contains(['\0', char::REPLACEMENT_CHARACTER]), "{:?}", canonical);
                }
            }
        }
    }
}
