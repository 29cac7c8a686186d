//! Typed ids: every row id is a UUIDv7 (time-sortable) wrapped in its own newtype.
//!
//! Ids are stored as hyphenated text on both backends, so they read the same in `sqlite3`,
//! `psql` and the provider's `custom_id` field (36 characters, inside the 64-character limit).

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// The error returned when a string is not a valid id.
#[derive(Debug, thiserror::Error)]
#[error("`{input}` is not a valid {kind} id: expected a UUID such as 0190f1c2-7d3e-7a4b-8c5d-6e7f80912345")]
pub struct IdParseError {
    /// What was given.
    pub input: String,
    /// Which kind of id was expected.
    pub kind: &'static str,
}

macro_rules! define_id {
    ($(#[$doc:meta])* $name:ident, $kind:literal) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(Uuid);

        impl $name {
            /// A new, time-ordered id.
            pub fn new_v7() -> Self {
                Self(Uuid::now_v7())
            }

            /// Wraps an existing UUID.
            pub fn from_uuid(uuid: Uuid) -> Self {
                Self(uuid)
            }

            /// A fixed id from its 128 bits (fixtures and tests that need ids which sort as
            /// they are numbered).
            pub const fn from_u128(value: u128) -> Self {
                Self(Uuid::from_u128(value))
            }

            /// The underlying UUID.
            pub fn as_uuid(&self) -> Uuid {
                self.0
            }

            /// Parses the hyphenated (or simple) text form.
            pub fn parse(input: &str) -> Result<Self, IdParseError> {
                Uuid::parse_str(input.trim())
                    .map(Self)
                    .map_err(|_| IdParseError { input: input.to_owned(), kind: $kind })
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Display::fmt(&self.0.hyphenated(), f)
            }
        }

        impl TryFrom<String> for $name {
            type Error = IdParseError;
            fn try_from(input: String) -> Result<Self, Self::Error> {
                Self::parse(&input)
            }
        }

        impl FromStr for $name {
            type Err = IdParseError;
            fn from_str(input: &str) -> Result<Self, Self::Err> {
                Self::parse(input)
            }
        }
    };
}

define_id!(
    /// A user whose conversations are mined (one row of `users`).
    UserId, "user"
);
define_id!(
    /// A segment: a closed run of messages that is extracted as one unit.
    SegmentId, "segment"
);
define_id!(
    /// One message of a conversation.
    MessageId, "message"
);
define_id!(
    /// One long-term memory.
    MemoryId, "memory"
);
define_id!(
    /// One LLM request attempt; its text form is the provider `custom_id`.
    RequestId, "request"
);
define_id!(
    /// One provider batch as we track it (our id, not the provider's).
    BatchId, "batch"
);
define_id!(
    /// One entity (person, place, organisation…) named by memories.
    EntityId, "entity"
);
define_id!(
    /// One journaled change to a user's memories (a row of `operations`), the handle `undo` takes.
    OperationId, "operation"
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip_through_text_and_fit_a_custom_id() {
        let id = RequestId::new_v7();
        let text = id.to_string();
        assert_eq!(text.len(), 36);
        assert!(text.chars().all(|c| c.is_ascii_alphanumeric() || c == '-'));
        assert_eq!(RequestId::parse(&text).unwrap(), id);
    }

    #[test]
    fn a_bad_id_names_the_input_and_the_kind() {
        let err = SegmentId::parse("seg-42").unwrap_err();
        assert!(err.to_string().contains("`seg-42` is not a valid segment id"));
    }

    #[test]
    fn v7_ids_sort_by_creation() {
        let a = MemoryId::new_v7();
        let b = MemoryId::new_v7();
        assert!(a < b);
    }
}
