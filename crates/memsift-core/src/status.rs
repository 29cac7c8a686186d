//! The closed vocabularies of the data model: roles, statuses, purposes, lanes and temporal kinds.
//!
//! Each is stored as its snake_case text form, which is also what `--json` prints, so an admin
//! reading `sqlite3`, `psql` or the CLI sees the same words.

use std::fmt;

use serde::{Deserialize, Serialize};

/// The error returned when a word is not one of an enum's values.
#[derive(Debug, thiserror::Error)]
#[error("`{input}` is not a valid {kind}: expected one of {}", .expected.trim_end())]
pub struct UnknownValue {
    /// What was given.
    pub input: String,
    /// Which vocabulary was expected.
    pub kind: &'static str,
    /// The accepted words, comma separated.
    pub expected: &'static str,
}

macro_rules! string_enum {
    ($(#[$doc:meta])* $name:ident, $kind:literal, { $($(#[$vdoc:meta])* $variant:ident => $text:literal),+ $(,)? }) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
        pub enum $name {
            $(
                $(#[$vdoc])*
                #[serde(rename = $text)]
                $variant,
            )+
        }

        impl $name {
            /// Every value, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            /// The stored text form.
            pub fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $text,)+
                }
            }

            /// Parses the stored text form.
            pub fn parse(input: &str) -> Result<Self, UnknownValue> {
                match input {
                    $($text => Ok($name::$variant),)+
                    _ => Err(UnknownValue {
                        input: input.to_owned(),
                        kind: $kind,
                        expected: concat!($($text, " "),+),
                    }),
                }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl TryFrom<String> for $name {
            type Error = UnknownValue;
            fn try_from(input: String) -> Result<Self, Self::Error> {
                Self::parse(&input)
            }
        }

        impl std::str::FromStr for $name {
            type Err = UnknownValue;
            fn from_str(input: &str) -> Result<Self, Self::Err> {
                Self::parse(input)
            }
        }
    };
}

string_enum!(
    /// Who spoke a message.
    Role, "role", {
        /// The person the memories are about.
        User => "user",
        /// The assistant; its words are context, never a source of facts.
        Assistant => "assistant",
        /// Tool output shown to the assistant.
        Tool => "tool",
        /// A system notice; never extracted.
        System => "system",
    }
);

string_enum!(
    /// Where a segment is in its life.
    SegmentStatus, "segment status", {
        /// Still receiving messages.
        Open => "open",
        /// Closed by a boundary or idle timeout; waiting for extraction.
        Closed => "closed",
        /// Claimed by a worker; extraction requests are in flight.
        Extracting => "extracting",
        /// Every extraction result has been applied.
        Extracted => "extracted",
        /// The last attempt failed; another attempt is due.
        Failed => "failed",
        /// Out of attempts; an admin must look (`last_error` says why).
        Dead => "dead",
    }
);

string_enum!(
    /// Where one LLM request attempt is in its life.
    RequestStatus, "request status", {
        /// Built and stored, not yet sent.
        Planned => "planned",
        /// Sent (inside a provider batch, or to an immediate endpoint).
        Submitted => "submitted",
        /// The provider answered; the raw output is stored but not applied yet.
        Succeeded => "succeeded",
        /// The provider answered with an error for this request.
        Errored => "errored",
        /// The provider's processing window passed before this request ran.
        Expired => "expired",
        /// The request was cancelled before it ran.
        Canceled => "canceled",
        /// The output was processed and written in one transaction.
        Applied => "applied",
        /// Out of attempts.
        Dead => "dead",
        /// Quarantined: the answer was recorded but applying it failed `max_apply_attempts` times;
        /// `error` says why. Kept (with its output) for an admin and `memsift replay`.
        Failed => "failed",
    }
);

string_enum!(
    /// Where one provider batch is in its life.
    BatchStatus, "batch status", {
        /// Requests assigned; nothing sent yet.
        Planned => "planned",
        /// Intent recorded; the create call may or may not have reached the provider.
        Submitting => "submitting",
        /// The provider accepted it; polling.
        Submitted => "submitted",
        /// The provider finished it; results not fully ingested.
        Ended => "ended",
        /// Every result was fanned out.
        Ingested => "ingested",
        /// A provider batch we could not match, or one we gave up reconciling.
        Orphaned => "orphaned",
        /// The provider rejected it outright.
        Failed => "failed",
    }
);

string_enum!(
    /// What an LLM request is for; the first half of the `{purpose}_{tier}` config key.
    Purpose, "purpose", {
        /// Turning a segment into memories.
        Extraction => "extraction",
        /// Classifying a link between two memories.
        Relationship => "relationship",
        /// Proposing a merge of a cluster of memories.
        Consolidation => "consolidation",
        /// Independently reviewing a proposed merge.
        ConsolidationReview => "consolidation_review",
        /// Trimming or splitting a verbose memory.
        Refinement => "refinement",
        /// Reviewing dormant entities.
        EntityGc => "entity_gc",
        /// Summarising a segment.
        Summary => "summary",
        /// Reviewing one extracted candidate; the review may only narrow it.
        ExtractionReview => "extraction_review",
    }
);

string_enum!(
    /// How a request reaches a model.
    Lane, "lane", {
        /// Provider batch APIs: half price, results within 24 hours.
        Batch => "batch",
        /// One synchronous call per request.
        Immediate => "immediate",
        /// Offline deterministic rules: no provider, no key, no spend.
        Heuristic => "heuristic",
    }
);

string_enum!(
    /// How long a fact holds, as the extractor labels it.
    Temporal, "temporal kind", {
        /// Something that happened once.
        OneOff => "one_off",
        /// A repeating pattern.
        Recurring => "recurring",
        /// A lasting fact, preference or rule.
        Durable => "durable",
        /// Not labelled, or not one of the above.
        Unknown => "unknown",
    }
);

impl Temporal {
    /// Normalises a model's label: anything outside the four values becomes `unknown`,
    /// because guessing `one_off` would let a lasting fact be treated as disposable.
    pub fn normalize(input: &str) -> Temporal {
        Temporal::parse(input.trim().to_ascii_lowercase().as_str()).unwrap_or(Temporal::Unknown)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_value_round_trips_through_its_text() {
        for status in SegmentStatus::ALL {
            assert_eq!(SegmentStatus::parse(status.as_str()).unwrap(), *status);
        }
        for purpose in Purpose::ALL {
            let json = serde_json::to_string(purpose).unwrap();
            assert_eq!(json, format!("\"{}\"", purpose.as_str()));
        }
    }

    #[test]
    fn an_unknown_word_lists_the_accepted_ones() {
        let err = Lane::parse("fast").unwrap_err().to_string();
        assert!(err.contains("`fast` is not a valid lane"), "{err}");
        assert!(err.contains("batch immediate heuristic"), "{err}");
    }

    #[test]
    fn temporal_labels_normalise_to_unknown_rather_than_guess() {
        assert_eq!(Temporal::normalize(" Durable "), Temporal::Durable);
        assert_eq!(Temporal::normalize("sometimes"), Temporal::Unknown);
        assert_eq!(Temporal::normalize(""), Temporal::Unknown);
    }
}
