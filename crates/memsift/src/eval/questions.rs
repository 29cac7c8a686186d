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

/// What an evaluation file holds: the messages to import, the questions to ask, and one line for
/// each piece of evidence refused because no turn of the question's user has it (LoCoMo's own
/// file cites a few such labels, `D` or `D:11:26`; a question left with none is not asked).
#[derive(Debug)]
pub struct EvalFile {
    /// The messages to import.
    pub messages: Vec<NewMessage>,
    /// The questions to ask.
    pub questions: Vec<Question>,
    /// One line per refused label, naming the question.
    pub refused: Vec<String>,
}

/// Reads `path` into the messages to import and the questions to ask.
pub fn read(path: &Path, format: EvalFormat, max_message_bytes: usize) -> Result<EvalFile, QuestionsError> {
    let file = path.display().to_string();
    // Bounded like an import's LoCoMo file: a device or a huge file is one line, not a stall.
    let text = memsift_import::read_json_text(path)?;
    match format {
        EvalFormat::Locomo => {
            let messages = memsift_import::parse_locomo(&file, &text, max_message_bytes)?;
            let labels = labels_by_user(&messages);
            let mut refused = Vec::new();
            let mut questions = locomo_questions(&file, &text)?;
            for question in &mut questions {
                let known = labels.get(question.user.as_str());
                question.evidence.retain(|label| {
                    let matched = known.is_some_and(|known| known.contains(label.as_str()));
                    if !matched {
                        refused.push(format!(
                            "{file}: {}, \"{}\": evidence `{label}` is no turn of that conversation; it is not scored",
                            question.user, question.text
                        ));
                    }
                    matched
                });
            }
            questions.retain(|question| !question.evidence.is_empty());
            Ok(EvalFile {
                messages,
                questions,
                refused,
            })
        }
        EvalFormat::Memsift => {
            let (messages, questions) = own_format(&file, &text, max_message_bytes)?;
            Ok(EvalFile {
                messages,
                questions,
                refused: Vec::new(),
            })
        }
    }
}

/// Each user's message ids (external ids), by canonical user id.
fn labels_by_user(messages: &[NewMessage]) -> std::collections::HashMap<&str, BTreeSet<&str>> {
    let mut labels: std::collections::HashMap<&str, BTreeSet<&str>> = std::collections::HashMap::new();
    for message in messages {
        if let Some(id) = message.external_id.as_deref() {
            labels.entry(message.user_external_id.as_str()).or_default().insert(id);
        }
    }
    labels
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
    let labels = labels_by_user(&messages);
    let mut questions = Vec::with_capacity(parsed.questions.len());
    for (index, question) in parsed.questions.into_iter().enumerate() {
        if question.evidence.is_empty() {
            return Err(bad(format!("question #{} has no evidence", index + 1)));
        }
        let user = memsift_core::message::canonical_user_id(&question.user).map_err(|error| {
            bad(format!(
                "question #{}: user `{}`: {error}",
                index + 1,
                question.user.escape_debug()
            ))
        })?;
        let known = labels.get(user.as_str());
        if let Some(unknown) = question
            .evidence
            .iter()
            .find(|label| !known.is_some_and(|known| known.contains(label.as_str())))
        {
            return Err(bad(format!(
                "question #{} (\"{}\") cites `{unknown}`, which no message of user `{user}` has as its `id`",
                index + 1,
                question.question
            )));
        }
        questions.push(Question {
            user,
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
        assert_eq!(
            error,
            "f.json: question #1 (\"Where?\") cites `m-2`, which no message of user `maya` has as its `id`; see README.md, \"Evaluating retrieval\", for the format"
        );
        let fixed = text.replace("m-2", "m-1");
        let (messages, questions) = own_format("f.json", &fixed, 1 << 20).unwrap();
        assert_eq!((messages.len(), questions.len()), (1, 1));
        // Another user's id is no evidence for this user's question.
        let other_user = fixed.replace(r#""questions": [{"user": "maya""#, r#""questions": [{"user": "noor""#);
        let error = own_format("f.json", &other_user, 1 << 20).unwrap_err().to_string();
        assert!(error.contains("no message of user `noor`"), "{error}");
    }

    /// LoCoMo's own file cites a few labels no turn has: each is refused in a line naming the
    /// question (not scored as a miss), and a question left with no evidence is not asked.
    #[test]
    fn locomo_evidence_no_turn_has_is_refused_naming_the_question() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("locomo.json");
        let file = serde_json::json!([{"sample_id": "conv-1", "conversation": {
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [{"speaker": "A", "dia_id": "D1:1", "text": "I live in Lisbon."}]},
            "qa": [
                {"question": "Where?", "answer": "Lisbon", "evidence": ["D1:1", "D"], "category": 1},
                {"question": "Who?", "answer": "x", "evidence": ["D:11:26"], "category": 1}]},
            {"sample_id": "conv-2", "conversation": {
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [{"speaker": "B", "dia_id": "D1:2", "text": "Hi."}]},
            "qa": [{"question": "Other's?", "answer": "x", "evidence": ["D1:1"], "category": 1}]}]);
        std::fs::write(&path, file.to_string()).unwrap();
        let read = read(&path, EvalFormat::Locomo, 1 << 20).unwrap();
        assert_eq!(read.questions.len(), 1);
        assert_eq!(read.questions[0].evidence, BTreeSet::from(["D1:1".to_owned()]));
        let name = path.display();
        assert_eq!(
            read.refused,
            [
                format!(
                    "{name}: locomo:conv-1, \"Where?\": evidence `D` is no turn of that conversation; it is not scored"
                ),
                format!(
                    "{name}: locomo:conv-1, \"Who?\": evidence `D:11:26` is no turn of that conversation; it is not scored"
                ),
                format!(
                    "{name}: locomo:conv-2, \"Other's?\": evidence `D1:1` is no turn of that conversation; it is not scored"
                ),
            ]
        );
    }
}
