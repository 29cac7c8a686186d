//! The extraction reviewer: an optional second look at one extracted candidate that may only narrow it.
//!
//! A review can shorten the text to words already in it, lower the confidence, or bring the expiry earlier; it can
//! never add a word, raise the confidence or extend a validity window. So a reviewer that hallucinates can make a
//! memory vaguer or shorter-lived, but never wrong in a new way.

use chrono::{DateTime, NaiveDate, NaiveDateTime, Utc};
use memsift_core::contract::ExtractedItem;
use memsift_core::prompt::Prompt;
use memsift_core::status::Purpose;
use memsift_core::text::collapse_whitespace;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::answer::{number, read_object, required_text};
use crate::{AnswerError, StageRequest};

/// What a reviewer returned for one candidate.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReviewedItem {
    /// The text the reviewer proposes.
    pub text: String,
    /// The reviewer's confidence, 0.0 to 1.0.
    pub confidence: f64,
    /// When the event happens (ISO-8601), as the reviewer reads it.
    pub happens_at: Option<String>,
    /// When the fact stops being true (ISO-8601), as the reviewer reads it.
    pub expires_at: Option<String>,
}

/// The user message of an extraction review request.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct ExtractionReviewTask {
    pub(crate) task: String,
    pub(crate) item: ReviewedItem,
}

/// One request reviewing one extracted candidate.
pub fn extraction_review_request(prompt: &Prompt, item: &ExtractedItem) -> StageRequest {
    StageRequest::new(
        prompt,
        &ExtractionReviewTask {
            task: Purpose::ExtractionReview.as_str().to_owned(),
            item: ReviewedItem {
                text: item.text.clone(),
                confidence: item.confidence,
                happens_at: item.happens_at.clone(),
                expires_at: item.expires_at.clone(),
            },
        },
    )
}

/// Reads `{"text":"…","confidence":0.8,"happens_at":…,"expires_at":…}`; a cut-off answer is refused.
pub fn parse_extraction_review_answer(raw: &str) -> Result<ReviewedItem, AnswerError> {
    let object = read_object(raw, true)?;
    let text = required_text(&object, "text")?;
    let confidence = match object.get("confidence") {
        None | Some(Value::Null) => return Err(AnswerError::MissingField { field: "confidence" }),
        Some(value) => number(value)
            .ok_or_else(|| AnswerError::Invalid(format!("`confidence` should be a number, not {value}")))?,
    };
    let date = |field: &str| {
        object
            .get(field)
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|date| !date.is_empty())
            .map(str::to_owned)
    };
    Ok(ReviewedItem {
        text,
        confidence: confidence.clamp(0.0, 1.0),
        happens_at: date("happens_at"),
        expires_at: date("expires_at"),
    })
}

/// The original item narrowed by the review, and never widened.
///
/// - text: the review's, only if it is non-empty, no longer than the original and every content word of it is a
///   content word of the original; otherwise the original's.
/// - confidence: the lower of the two.
/// - expires_at: the review's when it is earlier than the original's, or when the original had none (an expiry
///   shortens validity); never a later one, and never one that does not read as a date.
/// - happens_at and everything else: the original's (when an event happens is not a validity bound).
pub fn narrow(original: &ExtractedItem, review: &ReviewedItem) -> ExtractedItem {
    let mut narrowed = original.clone();
    let text = collapse_whitespace(&review.text);
    if is_narrowing(&original.text, &text) {
        narrowed.text = text;
    }
    if review.confidence.is_finite() && review.confidence < original.confidence {
        narrowed.confidence = review.confidence.max(0.0);
    }
    if let Some(review_expiry) = review.expires_at.as_deref().and_then(instant_of) {
        let earlier = match original.expires_at.as_deref() {
            None => true,
            Some(original_expiry) => instant_of(original_expiry).is_some_and(|original| review_expiry < original),
        };
        if earlier {
            narrowed.expires_at = review.expires_at.as_deref().map(str::trim).map(str::to_owned);
        }
    }
    narrowed
}

/// Whether `candidate` says no more than `original`: not longer, and made only of the original's content words.
fn is_narrowing(original: &str, candidate: &str) -> bool {
    if candidate.is_empty() || candidate.chars().count() > collapse_whitespace(original).chars().count() {
        return false;
    }
    let original_words = crate::words::content_set(original);
    crate::words::content_words(candidate)
        .iter()
        .all(|word| original_words.contains(word))
}

/// An ISO-8601 date or date-time as an instant; a bare date stands for the start of its day (UTC), so a date-time
/// later that same day counts as later.
pub(crate) fn instant_of(text: &str) -> Option<DateTime<Utc>> {
    let text = text.trim();
    if let Ok(with_offset) = DateTime::parse_from_rfc3339(text) {
        return Some(with_offset.with_timezone(&Utc));
    }
    for format in ["%Y-%m-%dT%H:%M:%S%.f", "%Y-%m-%dT%H:%M", "%Y-%m-%d %H:%M:%S"] {
        if let Ok(naive) = NaiveDateTime::parse_from_str(text, format) {
            return Some(naive.and_utc());
        }
    }
    NaiveDate::parse_from_str(text, "%Y-%m-%d")
        .ok()
        .and_then(|date| date.and_hms_opt(0, 0, 0))
        .map(|naive| naive.and_utc())
}

#[cfg(test)]
mod tests {
    use memsift_core::status::Temporal;
    use proptest::prelude::*;

    use super::*;
    use crate::testing::prompt;

    fn item(text: &str, confidence: f64, expires_at: Option<&str>) -> ExtractedItem {
        let mut item = ExtractedItem::new(text, Temporal::Durable, vec!["t1".to_owned()]);
        item.confidence = confidence;
        item.expires_at = expires_at.map(str::to_owned);
        item.happens_at = Some("2024-06-01".to_owned());
        item
    }

    fn review(text: &str, confidence: f64, expires_at: Option<&str>) -> ReviewedItem {
        ReviewedItem {
            text: text.to_owned(),
            confidence,
            happens_at: Some("2030-01-01".to_owned()),
            expires_at: expires_at.map(str::to_owned),
        }
    }

    #[test]
    fn a_shorter_text_of_the_same_words_is_taken_and_a_new_word_is_not() {
        let original = item("Caroline is training for the Berlin marathon in September", 0.9, None);
        let shorter = narrow(
            &original,
            &review("Caroline is training for the Berlin marathon", 0.9, None),
        );
        assert_eq!(shorter.text, "Caroline is training for the Berlin marathon");
        let widened = narrow(
            &original,
            &review("Caroline is training for the Paris marathon", 0.9, None),
        );
        assert_eq!(widened.text, original.text);
        let empty = narrow(&original, &review("  ", 0.9, None));
        assert_eq!(empty.text, original.text);
    }

    #[test]
    fn confidence_only_goes_down_and_happens_at_never_moves() {
        let original = item("Caroline has a dog named Max", 0.8, None);
        assert_eq!(narrow(&original, &review(&original.text, 0.95, None)).confidence, 0.8);
        assert_eq!(narrow(&original, &review(&original.text, 0.5, None)).confidence, 0.5);
        assert_eq!(
            narrow(&original, &review(&original.text, f64::NAN, None)).confidence,
            0.8
        );
        assert_eq!(
            narrow(&original, &review(&original.text, 0.5, None)).happens_at,
            original.happens_at
        );
    }

    #[test]
    fn expiry_can_be_added_or_brought_forward_but_never_pushed_back() {
        let open = item("Caroline is in Berlin", 0.9, None);
        assert_eq!(
            narrow(&open, &review(&open.text, 0.9, Some("2024-07-01")))
                .expires_at
                .as_deref(),
            Some("2024-07-01")
        );
        assert_eq!(
            narrow(&open, &review(&open.text, 0.9, Some("next summer"))).expires_at,
            None
        );
        let bounded = item("Caroline is in Berlin", 0.9, Some("2024-07-01"));
        let earlier = narrow(&bounded, &review(&bounded.text, 0.9, Some("2024-06-15T12:00:00Z")));
        assert_eq!(earlier.expires_at.as_deref(), Some("2024-06-15T12:00:00Z"));
        let later = narrow(&bounded, &review(&bounded.text, 0.9, Some("2024-07-01T10:00:00")));
        assert_eq!(later.expires_at.as_deref(), Some("2024-07-01"));
        let removed = narrow(&bounded, &review(&bounded.text, 0.9, None));
        assert_eq!(removed.expires_at.as_deref(), Some("2024-07-01"));
    }

    #[test]
    fn the_request_and_answer_carry_the_reviewed_fields() {
        let original = item("Caroline is in Berlin", 0.9, None);
        let request = extraction_review_request(&prompt("extraction_review"), &original);
        assert!(
            request
                .user_message
                .starts_with(r#"{"task":"extraction_review","item":{"text":"Caroline is in Berlin""#)
        );
        let reviewed = parse_extraction_review_answer(
            "```json\n{\"text\": \"Caroline is in Berlin\", \"confidence\": \"0.7\", \"happens_at\": null, \"expires_at\": \"2024-07-01\",}\n```",
        )
        .unwrap();
        assert_eq!(
            reviewed,
            review("Caroline is in Berlin", 0.7, Some("2024-07-01")).with_happens_at(None)
        );
        assert_eq!(
            parse_extraction_review_answer(r#"{"text":"x"}"#),
            Err(AnswerError::MissingField { field: "confidence" })
        );
    }

    impl ReviewedItem {
        fn with_happens_at(mut self, happens_at: Option<&str>) -> Self {
            self.happens_at = happens_at.map(str::to_owned);
            self
        }
    }

    fn date() -> impl Strategy<Value = Option<String>> {
        prop_oneof![
            Just(None),
            (2020i32..2030, 1u32..13, 1u32..29).prop_map(|(y, m, d)| Some(format!("{y}-{m:02}-{d:02}"))),
            (2020i32..2030, 1u32..13, 1u32..29, 0u32..24)
                .prop_map(|(y, m, d, h)| Some(format!("{y}-{m:02}-{d:02}T{h:02}:00:00Z"))),
            "[a-z ]{0,10}".prop_map(Some),
        ]
    }

    proptest! {
        #[test]
        fn narrowing_never_widens(
            original_text in "[A-Za-z ]{1,60}",
            review_text in "[A-Za-z ]{0,80}",
            original_confidence in 0.0f64..=1.0,
            review_confidence in -1.0f64..=2.0,
            original_expiry in date(),
            review_expiry in date(),
        ) {
            let mut original = item(&original_text, original_confidence, None);
            original.expires_at = original_expiry;
            let mut reviewed = review(&review_text, review_confidence, None);
            reviewed.expires_at = review_expiry;
            let narrowed = narrow(&original, &reviewed);
            prop_assert!(narrowed.text.chars().count() <= original.text.chars().count());
            let original_words = crate::words::content_set(&original.text);
            prop_assert!(crate::words::content_words(&narrowed.text).iter().all(|w| original_words.contains(w)));
            prop_assert!(narrowed.confidence <= original.confidence);
            prop_assert_eq!(&narrowed.happens_at, &original.happens_at);
            if let Some(bound) = original.expires_at.as_deref().and_then(instant_of) {
                let after = narrowed.expires_at.as_deref().and_then(instant_of);
                prop_assert!(after.is_some_and(|after| after <= bound), "expiry moved from {bound} to {after:?}");
            } else if original.expires_at.is_some() {
                prop_assert_eq!(&narrowed.expires_at, &original.expires_at);
            }
        }
    }
}
