//! Segment summaries: a short account of what a closed segment was about, for listings and search context.

use memsift_core::contract::Turn;
use memsift_core::prompt::Prompt;
use memsift_core::status::Purpose;
use serde::{Deserialize, Serialize};

use crate::answer::{read_object, required_text};
use crate::{AnswerError, StageRequest};

/// The longest summary accepted, in characters.
const MAX_SUMMARY_CHARS: usize = 2000;

/// One turn of a summary request.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct SummaryTurn {
    /// The speaker's name when the source names speakers, else the role (`user`, `assistant`).
    pub(crate) speaker: String,
    pub(crate) text: String,
}

/// The user message of a summary request.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct SummaryTask {
    pub(crate) task: String,
    pub(crate) turns: Vec<SummaryTurn>,
}

/// One request summarising a segment's turns.
pub fn summary_request(prompt: &Prompt, turns: &[Turn]) -> StageRequest {
    let turns = turns
        .iter()
        .map(|turn| SummaryTurn {
            speaker: turn
                .speaker
                .as_deref()
                .map(str::trim)
                .filter(|name| !name.is_empty())
                .unwrap_or(turn.role.as_str())
                .to_owned(),
            text: turn.content.clone(),
        })
        .collect();
    StageRequest::new(
        prompt,
        &SummaryTask {
            task: Purpose::Summary.as_str().to_owned(),
            turns,
        },
    )
}

/// Reads `{"summary":"…"}`: 1 to 2000 characters once whitespace is collapsed; a cut-off answer is refused.
pub fn parse_summary_answer(raw: &str) -> Result<String, AnswerError> {
    let summary = required_text(&read_object(raw, true)?, "summary")?;
    let n_chars = summary.chars().count();
    if n_chars == 0 || n_chars > MAX_SUMMARY_CHARS {
        return Err(AnswerError::Invalid(format!(
            "a summary must have 1 to {MAX_SUMMARY_CHARS} characters, this one has {n_chars}"
        )));
    }
    Ok(summary)
}

#[cfg(test)]
pub(crate) mod tests {
    use chrono::{TimeZone, Utc};
    use memsift_core::status::Role;

    use super::*;
    use crate::testing::prompt;

    /// A turn as the pipeline would pass it.
    pub(crate) fn turn(role: Role, speaker: Option<&str>, content: &str) -> Turn {
        Turn {
            label: "t1".to_owned(),
            role,
            speaker: speaker.map(str::to_owned),
            content: content.to_owned(),
            at: Utc.with_ymd_and_hms(2024, 5, 1, 9, 0, 0).unwrap(),
        }
    }

    #[test]
    fn the_request_names_speakers_or_roles() {
        let turns = [
            turn(Role::User, Some("Caroline"), "I adopted a dog."),
            turn(Role::Assistant, None, "Congratulations!"),
        ];
        let request = summary_request(&prompt("summary"), &turns);
        assert_eq!(
            request.user_message,
            r#"{"task":"summary","turns":[{"speaker":"Caroline","text":"I adopted a dog."},{"speaker":"assistant","text":"Congratulations!"}]}"#
        );
    }

    #[test]
    fn summaries_are_collapsed_and_bounded() {
        assert_eq!(
            parse_summary_answer("Summary:\n```json\n{\"summary\": \"Caroline  adopted\\na dog.\"}\n```"),
            Ok("Caroline adopted a dog.".to_owned())
        );
        assert!(parse_summary_answer(r#"{"summary":"  "}"#).is_err());
        assert!(parse_summary_answer(&format!(r#"{{"summary":"{}"}}"#, "a".repeat(2001))).is_err());
        assert_eq!(
            parse_summary_answer(r#"{"gist":"x"}"#),
            Err(AnswerError::MissingField { field: "summary" })
        );
    }
}
