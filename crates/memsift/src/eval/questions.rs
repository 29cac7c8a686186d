//! Annotated conversations for `memsift eval retrieval`: the messages to import and the questions
//! to ask, each with the turns that hold its answer.
//!
//! Two formats are read. `locomo` is the LoCoMo benchmark's file (its `conversation` sessions
//! become messages of user `locomo:<sample_id>`; its `qa` items of categories 1–4 become
//! questions, their `evidence` dia_ids the turns). `memsift` is this project's own, for people
//! who bring their own conversations (README.md, "Evaluating retrieval"):
//!
//! ```json
//! {"messages": [ …lines of the JSONL import format, each with an "id"… ],
//!  "questions": [{"user": "maya", "question": "Where does Maya live?", "evidence": ["m-17"]}]}
//! ```

use std::collections::BTreeSet;
use std::path::Path;

use memsift_core::message::NewMessage;
use serde::Deserialize;
use serde_json::Value;

/// One question and where its answer is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Question {
    /// The user (external id) whose memories answer it.
    pub user: String,
    /// The question.
    pub text: String,
    /// The labels (source message ids) of the turns that hold the answer.
    pub evidence: BTreeSet<String>,
}

/// The formats `memsift eval retrieval` reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum EvalFormat {
    /// The LoCoMo benchmark's JSON file.
    Locomo,
    /// `{"messages": [...], "questions": [...]}` (README.md).
    Memsift,
}

/// Why an evaluation file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum QuestionsError {
    /// The file cannot be read.
    #[error("cannot read {file}: {source}")]
    Read {
        /// The file.
        file: String,
        /// Why.
        source: std::io::Error,
    },
    /// The messages do not import.
    #[error("{0}")]
    Import(#[from] memsift_import::ImportError),
    /// The questions are not what the format says.
    #[error("{file}: {problem}; see README.md, \"Evaluating retrieval\", for the format")]
    Bad {
        /// The file.
        file: String,
        /// What is wrong.
        problem: String,
    },
}

/// Reads `path` into the messages to import and the questions to ask.
pub fn read(
    path: &Path,
    format: EvalFormat,
    max_message_bytes: usize,
) -> Result<(Vec<NewMessage>, Vec<Question>), QuestionsError> {
    let file = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|source| QuestionsError::Read {
        file: file.clone(),
        source,
    })?;
    match format {
        EvalFormat::Locomo => {
            let messages = memsift_import::parse_locomo(&file, &text, max_message_bytes)?;
            Ok((messages, locomo_questions(&file, &text)?))
        }
        EvalFormat::Memsift => own_format(&file, &text, max_message_bytes),
    }
}

/// The evidence labels of one LoCoMo `evidence` list: entries may hold several ids separated by
/// `;` or `,` (as a few of the benchmark's do).
fn split_evidence(entries: &[Value]) -> BTreeSet<String> {
    entries
        .iter()
        .filter_map(Value::as_str)
        .flat_map(|entry| entry.split([';', ',']))
        .map(str::trim)
        .filter(|label| !label.is_empty())
        .map(str::to_owned)
        .collect()
}

fn locomo_questions(file: &str, text: &str) -> Result<Vec<Question>, QuestionsError> {
    let bad = |problem: String| QuestionsError::Bad {
        file: file.to_owned(),
        problem,
    };
    let root: Value = serde_json::from_str(text).map_err(|error| bad(format!("not valid JSON ({error})")))?;
    let samples = root
        .as_array()
        .ok_or_else(|| bad("not a list of conversations".to_owned()))?;
    let mut questions = Vec::new();
    for sample in samples {
        let sample_id = sample
            .get("sample_id")
            .and_then(Value::as_str)
            .ok_or_else(|| bad("a conversation has no `sample_id`".to_owned()))?;
        for item in sample.get("qa").and_then(Value::as_array).into_iter().flatten() {
            // Category 5 questions are adversarial (their answer is not in the conversation).
            let category = item.get("category").and_then(Value::as_i64).unwrap_or(0);
            let evidence = split_evidence(
                item.get("evidence")
                    .and_then(Value::as_array)
                    .map_or(&[], Vec::as_slice),
            );
            let Some(question) = item.get("question").and_then(Value::as_str) else {
                continue;
            };
            if !(1..=4).contains(&category) || evidence.is_empty() || question.trim().is_empty() {
                continue;
            }
            questions.push(Question {
                user: format!("locomo:{sample_id}"),
                text: question.to_owned(),
                evidence,
            });
        }
    }
    Ok(questions)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct OwnFile {
    messages: Vec<Value>,
    questions: Vec<OwnQuestion>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct OwnQuestion {
    user: String,
    question: String,
    evidence: Vec<String>,
}

fn own_format(
    file: &str,
    text: &str,
    max_message_bytes: usize,
) -> Result<(Vec<NewMessage>, Vec<Question>), QuestionsError> {
    let bad = |problem: String| QuestionsError::Bad {
        file: file.to_owned(),
        problem,
    };
    let parsed: OwnFile = serde_json::from_str(text).map_err(|error| bad(format!("{error}")))?;
    let lines: String = parsed.messages.iter().map(|message| format!("{message}\n")).collect();
    let messages = memsift_import::parse_jsonl(file, &lines, max_message_bytes)?;
    let labels: BTreeSet<&str> = messages
        .iter()
        .filter_map(|message| message.external_id.as_deref())
        .collect();
    let mut questions = Vec::with_capacity(parsed.questions.len());
    for (index, question) in parsed.questions.into_iter().enumerate() {
        if question.evidence.is_empty() {
            return Err(bad(format!("question #{} has no evidence", index + 1)));
        }
        if let Some(unknown) = question.evidence.iter().find(|label| !labels.contains(label.as_str())) {
            return Err(bad(format!(
                "question #{} cites `{unknown}`, which no message has as its `id`",
                index + 1
            )));
        }
        questions.push(Question {
            user: question.user.trim().to_owned(),
            text: question.question,
            evidence: question.evidence.into_iter().collect(),
        });
    }
    Ok((messages, questions))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locomo_questions_of_categories_one_to_four_with_split_evidence() {
        let text = r#"[{"sample_id": "conv-1", "conversation": {}, "qa": [
            {"question": "Where?", "answer": "x", "evidence": ["D1:3; D1:5"], "category": 1},
            {"question": "Trick?", "answer": "x", "evidence": ["D1:3"], "category": 5},
            {"question": "None?", "answer": "x", "evidence": [], "category": 2}]}]"#;
        let questions = locomo_questions("f.json", text).unwrap();
        assert_eq!(questions.len(), 1);
        assert_eq!(questions[0].user, "locomo:conv-1");
        assert_eq!(
            questions[0].evidence,
            BTreeSet::from(["D1:3".to_owned(), "D1:5".to_owned()])
        );
    }

    #[test]
    fn the_own_format_refuses_evidence_no_message_has() {
        let text = r#"{"messages": [{"user": "maya", "conversation": "c", "role": "user", "content": "I live in Lisbon.",
            "timestamp": "2026-03-01T10:00:00Z", "id": "m-1"}],
            "questions": [{"user": "maya", "question": "Where?", "evidence": ["m-2"]}]}"#;
        let error = own_format("f.json", text, 1 << 20).unwrap_err().to_string();
        assert!(error.contains("cites `m-2`"), "{error}");
        let fixed = text.replace("m-2", "m-1");
        let (messages, questions) = own_format("f.json", &fixed, 1 << 20).unwrap();
        assert_eq!((messages.len(), questions.len()), (1, 1));
    }
}
