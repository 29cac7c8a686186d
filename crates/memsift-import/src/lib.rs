//! Import formats: JSONL messages and the LoCoMo benchmark file, parsed fully before anything is stored.
//!
//! Parsing the whole file first is what makes a bad line harmless: the error names the file, the
//! line and the problem, and the store is untouched because nothing was written yet. Writing then
//! happens in one transaction (`Store::ingest`), so a failure there also leaves the store as it was.
//!
//! Every format refuses a message whose text is longer than the `max_message_bytes` it is given
//! (`[ingest] max_message_bytes`), so one oversized message refuses its whole file or request;
//! files are read with bounds (`read`), so a device or a huge file is refused too.

use chrono::{DateTime, Duration, NaiveDate, NaiveDateTime, Utc};
use memsift_core::MemoryId;
use memsift_core::message::NewMessage;
use memsift_core::status::Role;
use serde::Deserialize;
use serde_json::Value;

mod read;

pub use read::{
    MAX_JSON_FILE_BYTES, MAX_JSON_VALUES, MAX_JSONL_FILE_BYTES, max_jsonl_line_bytes, read_file, read_json_text,
};

/// The import formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ImportFormat {
    /// One JSON message per line (schema in README.md).
    Jsonl,
    /// The LoCoMo benchmark file (a JSON list of conversations).
    Locomo,
}

impl ImportFormat {
    /// Every format, by the name the CLI takes.
    pub const NAMES: [&str; 2] = ["jsonl", "locomo"];
}

impl std::str::FromStr for ImportFormat {
    type Err = String;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        match name {
            "jsonl" => Ok(ImportFormat::Jsonl),
            "locomo" => Ok(ImportFormat::Locomo),
            other => Err(format!("unknown import format `{other}`; use jsonl or locomo")),
        }
    }
}

/// Why a file could not be imported; the store was not changed.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    /// The file could not be read.
    #[error("{file}: cannot read: {source}")]
    Read {
        /// The file.
        file: String,
        /// Why.
        source: std::io::Error,
    },
    /// The file holds more than a file of its format may ([`MAX_JSONL_FILE_BYTES`],
    /// [`MAX_JSON_FILE_BYTES`], [`MAX_JSON_VALUES`]); nothing of it was stored.
    #[error("{file}: more than {limit} {what}; split it into smaller files")]
    FileTooLarge {
        /// The file.
        file: String,
        /// The limit it is over.
        limit: u64,
        /// What the limit counts, and of what, e.g. "bytes, the most a JSONL file may hold".
        what: &'static str,
    },
    /// A JSONL line is longer than any message within `[ingest] max_message_bytes` can be.
    #[error(
        "{file}:{line}: the line is longer than {limit} bytes, more than any message within [ingest] max_message_bytes can take (6 bytes per byte of text, as JSON escapes them, plus 64 KiB for the other fields); is this a JSONL file? split the message or raise the limit"
    )]
    LineTooLong {
        /// The file.
        file: String,
        /// 1-based line number.
        line: usize,
        /// The longest line read.
        limit: u64,
    },
    /// A line (or, for LoCoMo, a place in the file) is wrong.
    #[error("{file}:{line}: {problem}")]
    Bad {
        /// The file.
        file: String,
        /// 1-based line number.
        line: usize,
        /// What is wrong and how to fix it.
        problem: String,
    },
    /// A message's text is longer than `[ingest] max_message_bytes`.
    #[error(
        "{file}:{line}: {field} is {n_bytes} bytes, over the limit of {limit} bytes ([ingest] max_message_bytes); split the message or raise the limit"
    )]
    TooLarge {
        /// The file.
        file: String,
        /// 1-based line number.
        line: usize,
        /// The field holding the text, and for LoCoMo the turn.
        field: String,
        /// The text's length in bytes (UTF-8).
        n_bytes: usize,
        /// The limit it is over.
        limit: usize,
    },
}

/// Why the body of `POST /v1/users/{user}/messages` was refused; the text names the message and field.
#[derive(Debug, thiserror::Error)]
pub enum BodyError {
    /// The body or one of its messages is malformed (the API answers 400).
    #[error("{0}")]
    Invalid(String),
    /// A message's text is longer than `[ingest] max_message_bytes` (the API answers 413).
    #[error("{0}")]
    TooLarge(String),
}

/// One line of the JSONL format.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct JsonlMessage {
    user: String,
    conversation: String,
    role: String,
    content: String,
    timestamp: String,
    #[serde(default)]
    boundary: bool,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    speaker: Option<String>,
    #[serde(default)]
    referenced_memory_ids: Vec<String>,
}

/// Parses JSONL text; `file` names it in errors. Blank lines are skipped. A `content` longer than
/// `max_message_bytes` refuses the whole text.
pub fn parse_jsonl(file: &str, text: &str, max_message_bytes: usize) -> Result<Vec<NewMessage>, ImportError> {
    let mut messages = Vec::new();
    for (line_idx, line) in text.lines().enumerate() {
        messages.extend(parse_jsonl_line(file, line_idx + 1, line, max_message_bytes)?);
    }
    Ok(messages)
}

/// Parses one JSONL line (`None` for a blank one); `file` and `line_number` name it in errors.
pub(crate) fn parse_jsonl_line(
    file: &str,
    line_number: usize,
    line: &str,
    max_message_bytes: usize,
) -> Result<Option<NewMessage>, ImportError> {
    let bad = |problem: String| ImportError::Bad {
        file: file.to_owned(),
        line: line_number,
        problem,
    };
    if line.trim().is_empty() {
        return Ok(None);
    }
    let row: JsonlMessage = serde_json::from_str(line).map_err(|error| bad(describe_json_error(&error)))?;
    let role = Role::parse(row.role.trim()).map_err(|error| bad(format!("field `role`: {error}")))?;
    let at = parse_timestamp(&row.timestamp).ok_or_else(|| {
        bad(format!(
            "field `timestamp`: `{}` is not a time; use RFC 3339 such as 2026-03-01T10:00:00Z",
            row.timestamp
        ))
    })?;
    for (field, value) in [("user", &row.user), ("conversation", &row.conversation)] {
        if value.trim().is_empty() {
            return Err(bad(format!("field `{field}` is empty; give the host application's id")));
        }
    }
    let user = memsift_core::message::canonical_user_id(&row.user)
        .map_err(|error| bad(format!("field `user` `{}`: {error}", row.user.escape_debug())))?;
    if row.content.trim().is_empty() {
        return Err(bad(
            "field `content` is empty; drop the line or give the message text".to_owned()
        ));
    }
    if row.content.len() > max_message_bytes {
        return Err(ImportError::TooLarge {
            file: file.to_owned(),
            line: line_number,
            field: "field `content`".to_owned(),
            n_bytes: row.content.len(),
            limit: max_message_bytes,
        });
    }
    let referenced_memory_ids = row
        .referenced_memory_ids
        .iter()
        .map(|id| {
            MemoryId::parse(id.trim()).map_err(|_| {
                bad(format!(
                    "field `referenced_memory_ids`: `{id}` is not a memory id; give the ids memsift returned (UUIDs)"
                ))
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Some(NewMessage {
        user_external_id: user,
        conversation_key: row.conversation.trim().to_owned(),
        segment_name: None,
        role,
        speaker: row.speaker,
        content: row.content,
        at,
        external_id: row.id,
        boundary_after: row.boundary,
        referenced_memory_ids,
    }))
}

/// Parses the body of `POST /v1/users/{user}/messages`: a JSON list of messages in the JSONL
/// schema without `user`, which the path gives. Each message goes through [`parse_jsonl`], so the
/// API names the same fields with the same fixes; errors say `message #N` (1-based).
pub fn parse_api_messages(user: &str, body: &[u8], max_message_bytes: usize) -> Result<Vec<NewMessage>, BodyError> {
    let invalid = BodyError::Invalid;
    let root: Value = serde_json::from_slice(body).map_err(|error| {
        invalid(format!(
            "the body is not valid JSON ({}); send a list of messages",
            error.to_string().split(" at line ").next().unwrap_or("")
        ))
    })?;
    let list = root
        .as_array()
        .ok_or_else(|| invalid("the body must be a JSON list of messages, e.g. [{\"conversation\": …}]".to_owned()))?;
    if list.is_empty() {
        return Err(invalid(
            "the body is an empty list; send at least one message".to_owned(),
        ));
    }
    let mut lines = String::new();
    for (idx, message) in list.iter().enumerate() {
        let mut object = message
            .as_object()
            .cloned()
            .ok_or_else(|| invalid(format!("message #{}: not a JSON object", idx + 1)))?;
        if object.contains_key("user") {
            return Err(invalid(format!(
                "message #{}: field `user` comes from the path; remove it from the message",
                idx + 1
            )));
        }
        object.insert("user".to_owned(), Value::String(user.to_owned()));
        // serde_json writes one object per line, so line N of this text is message N.
        lines.push_str(&Value::Object(object).to_string());
        lines.push('\n');
    }
    parse_jsonl("body", &lines, max_message_bytes).map_err(|error| match error {
        ImportError::Bad { line, problem, .. } => invalid(format!(
            "message #{line}: {}",
            problem.replace("each line needs user, ", "each message needs ")
        )),
        ImportError::TooLarge {
            line, n_bytes, limit, ..
        } => BodyError::TooLarge(format!(
            "message #{line}: field `content` is {n_bytes} bytes, over the limit of {limit} bytes ([ingest] max_message_bytes); split the message"
        )),
        other => invalid(other.to_string()),
    })
}

fn describe_json_error(error: &serde_json::Error) -> String {
    let message = error.to_string();
    // serde_json appends " at line 1 column N"; the line is ours to report, the column helps.
    let message = message.split(" at line ").next().unwrap_or(&message).to_owned();
    if message.starts_with("missing field")
        || message.starts_with("unknown field")
        || message.starts_with("invalid type")
    {
        format!("{message}; each line needs user, conversation, role, content, timestamp (see README.md)")
    } else {
        format!("not valid JSON ({message}, column {})", error.column())
    }
}

fn parse_timestamp(input: &str) -> Option<DateTime<Utc>> {
    let input = input.trim();
    if let Ok(at) = DateTime::parse_from_rfc3339(input) {
        return Some(at.with_timezone(&Utc));
    }
    // A naive time is taken as UTC, as documented in README.md.
    for format in ["%Y-%m-%dT%H:%M:%S%.f", "%Y-%m-%d %H:%M:%S%.f"] {
        if let Ok(naive) = NaiveDateTime::parse_from_str(input, format) {
            return Some(naive.and_utc());
        }
    }
    None
}

/// Seconds between consecutive turns of a LoCoMo session, which only dates the session as a whole.
const LOCOMO_TURN_SPACING_SECS: i64 = 30;

/// Parses the LoCoMo file: one user per conversation, one segment per session, turn ids kept.
///
/// Both speakers are the user's side of the conversation (role `user`, with `speaker` set), so
/// every LoCoMo observation has a source turn; the session is closed by a boundary after its
/// last turn. Turn `i` of a session is dated `session_<n>_date_time + 30 s · i`. A turn whose text
/// (with its photo caption) is longer than `max_message_bytes` refuses the whole file.
pub fn parse_locomo(file: &str, text: &str, max_message_bytes: usize) -> Result<Vec<NewMessage>, ImportError> {
    let bad = |line: usize, problem: String| ImportError::Bad {
        file: file.to_owned(),
        line,
        problem,
    };
    let root: Value = serde_json::from_str(text).map_err(|error| {
        bad(
            error.line(),
            format!(
                "not valid JSON ({})",
                error.to_string().split(" at line ").next().unwrap_or("")
            ),
        )
    })?;
    let samples = root.as_array().ok_or_else(|| {
        bad(
            1,
            "expected a JSON list of conversations (locomo10.json's shape)".to_owned(),
        )
    })?;
    let mut messages = Vec::new();
    for (sample_idx, sample) in samples.iter().enumerate() {
        let where_ = |detail: &str| format!("conversation #{}: {detail}", sample_idx + 1);
        let sample_id = sample
            .get("sample_id")
            .and_then(Value::as_str)
            .ok_or_else(|| bad(1, where_("missing `sample_id`")))?;
        let conversation = sample
            .get("conversation")
            .and_then(Value::as_object)
            .ok_or_else(|| bad(1, where_("missing `conversation` object")))?;
        let mut session_numbers: Vec<u32> = conversation
            .keys()
            .filter_map(|key| key.strip_prefix("session_")?.parse().ok())
            .collect();
        session_numbers.sort_unstable();
        for session_number in session_numbers {
            let session_key = format!("session_{session_number}");
            let date_key = format!("{session_key}_date_time");
            let date_text = conversation
                .get(&date_key)
                .and_then(Value::as_str)
                .ok_or_else(|| bad(1, format!("{sample_id}: missing `{date_key}`")))?;
            let started = parse_locomo_date(date_text).ok_or_else(|| {
                bad(
                    1,
                    format!("{sample_id}: `{date_key}` = `{date_text}` is not like `1:56 pm on 8 May, 2023`"),
                )
            })?;
            let turns = conversation
                .get(&session_key)
                .and_then(Value::as_array)
                .ok_or_else(|| bad(1, format!("{sample_id}: `{session_key}` is not a list of turns")))?;
            for (turn_idx, turn) in turns.iter().enumerate() {
                let field = |name: &str| -> Result<&str, ImportError> {
                    turn.get(name).and_then(Value::as_str).ok_or_else(|| {
                        bad(
                            1,
                            format!("{sample_id} {session_key} turn #{}: missing `{name}`", turn_idx + 1),
                        )
                    })
                };
                let mut content = field("text")?.to_owned();
                if let Some(caption) = turn.get("blip_caption").and_then(Value::as_str) {
                    content.push_str(&format!(" [shares a photo: {caption}]"));
                }
                if content.len() > max_message_bytes {
                    // The file is one JSON value, so its places are named by turn, like every
                    // other LoCoMo error, rather than by a line.
                    return Err(ImportError::TooLarge {
                        file: file.to_owned(),
                        line: 1,
                        field: format!("{sample_id} {session_key} turn #{} `text`", turn_idx + 1),
                        n_bytes: content.len(),
                        limit: max_message_bytes,
                    });
                }
                messages.push(NewMessage {
                    user_external_id: format!("locomo:{sample_id}"),
                    conversation_key: sample_id.to_owned(),
                    segment_name: Some(session_key.clone()),
                    role: Role::User,
                    speaker: Some(field("speaker")?.to_owned()),
                    content,
                    at: started + Duration::seconds(LOCOMO_TURN_SPACING_SECS * turn_idx as i64),
                    external_id: Some(field("dia_id")?.to_owned()),
                    boundary_after: turn_idx + 1 == turns.len(),
                    referenced_memory_ids: Vec::new(),
                });
            }
        }
    }
    Ok(messages)
}

fn parse_locomo_date(input: &str) -> Option<DateTime<Utc>> {
    // "1:56 pm on 8 May, 2023"
    let (time, date) = input.trim().split_once(" on ")?;
    let date = NaiveDate::parse_from_str(date.trim(), "%d %B, %Y").ok()?;
    let (clock, meridiem) = time.trim().split_once(' ')?;
    let (hour, minute) = clock.split_once(':')?;
    let (hour, minute): (u32, u32) = (hour.parse().ok()?, minute.parse().ok()?);
    let hour = match (meridiem.to_ascii_lowercase().as_str(), hour) {
        ("am", 12) => 0,
        ("am", hour) => hour,
        ("pm", 12) => 12,
        ("pm", hour) => hour + 12,
        _ => return None,
    };
    Some(date.and_hms_opt(hour, minute, 0)?.and_utc())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The default `[ingest] max_message_bytes`, far above every message these tests write.
    const LIMIT: usize = 1 << 20;

    #[test]
    fn a_bad_line_names_file_line_and_fix() {
        let text = "{\"user\":\"a\",\"conversation\":\"c\",\"role\":\"user\",\"content\":\"hi\",\"timestamp\":\"2026-03-01T10:00:00Z\"}\n\
                    {\"user\":\"a\",\"conversation\":\"c\",\"role\":\"user\",\"content\":\"hi\",\"timestamp\":\"yesterday\"}\n";
        let error = parse_jsonl("chat.jsonl", text, LIMIT).unwrap_err().to_string();
        assert_eq!(
            error,
            "chat.jsonl:2: field `timestamp`: `yesterday` is not a time; use RFC 3339 such as 2026-03-01T10:00:00Z"
        );
        let error = parse_jsonl("chat.jsonl", "{\"user\": \"a\",", LIMIT)
            .unwrap_err()
            .to_string();
        assert!(error.starts_with("chat.jsonl:1: not valid JSON"), "{error}");
        let error = parse_jsonl("chat.jsonl", "{\"user\":\"a\",\"role\":\"bot\"}", LIMIT)
            .unwrap_err()
            .to_string();
        assert!(
            error.starts_with("chat.jsonl:1: missing field `conversation`"),
            "{error}"
        );
        let line = "{\"user\":\"a\",\"conversation\":\"c\",\"role\":\"bot\",\"content\":\"x\",\"timestamp\":\"2026-03-01T10:00:00Z\"}";
        let error = parse_jsonl("chat.jsonl", line, LIMIT).unwrap_err().to_string();
        assert!(
            error.contains("`bot` is not a valid role: expected one of user assistant tool system"),
            "{error}"
        );
    }

    #[test]
    fn jsonl_fields_map_onto_messages() {
        let line = "{\"user\":\" ana \",\"conversation\":\"c1\",\"role\":\"assistant\",\"content\":\"ok\",\"timestamp\":\"2026-03-01 10:00:00\",\"boundary\":true,\"id\":\"m7\"}";
        let messages = parse_jsonl("x", line, LIMIT).unwrap();
        assert_eq!(messages[0].user_external_id, "ana");
        assert_eq!(messages[0].role, Role::Assistant);
        assert!(messages[0].boundary_after);
        assert_eq!(messages[0].external_id.as_deref(), Some("m7"));
        assert_eq!(messages[0].at.to_rfc3339(), "2026-03-01T10:00:00+00:00");
    }

    #[test]
    fn locomo_dates_parse_in_twelve_hour_form() {
        assert_eq!(
            parse_locomo_date("1:56 pm on 8 May, 2023").unwrap().to_rfc3339(),
            "2023-05-08T13:56:00+00:00"
        );
        assert_eq!(
            parse_locomo_date("12:09 am on 13 September, 2023")
                .unwrap()
                .to_rfc3339(),
            "2023-09-13T00:09:00+00:00"
        );
        assert!(parse_locomo_date("sometime in May").is_none());
    }

    #[test]
    fn locomo_sessions_become_closed_segments_with_turn_ids() {
        let text = r#"[{"sample_id":"conv-1","conversation":{"speaker_a":"A","speaker_b":"B",
            "session_2_date_time":"9:00 am on 2 May, 2023","session_2":[{"speaker":"B","dia_id":"D2:1","text":"later"}],
            "session_1_date_time":"1:56 pm on 1 May, 2023","session_1":[
              {"speaker":"A","dia_id":"D1:1","text":"hi"},
              {"speaker":"B","dia_id":"D1:2","text":"look","img_url":["x"],"blip_caption":"a photo of a dog"}]}}]"#;
        let messages = parse_locomo("locomo.json", text, LIMIT).unwrap();
        let summary: Vec<(&str, &str, bool, &str)> = messages
            .iter()
            .map(|m| {
                (
                    m.external_id.as_deref().unwrap(),
                    m.segment_name.as_deref().unwrap(),
                    m.boundary_after,
                    m.content.as_str(),
                )
            })
            .collect();
        assert_eq!(
            summary,
            vec![
                ("D1:1", "session_1", false, "hi"),
                ("D1:2", "session_1", true, "look [shares a photo: a photo of a dog]"),
                ("D2:1", "session_2", true, "later"),
            ]
        );
        assert_eq!(messages[1].at - messages[0].at, Duration::seconds(30));
        assert_eq!(messages[0].user_external_id, "locomo:conv-1");
    }

    /// Characters of each UTF-8 width, so a size can land inside a character.
    const WIDE: [char; 4] = ['a', 'é', '€', '🦀'];

    /// A text of `WIDE` characters picked by `picks`, grown until it is at least `n_bytes` long.
    fn text_of_at_least(n_bytes: usize, picks: &[usize]) -> String {
        let mut text = String::new();
        for pick in picks.iter().cycle() {
            if text.len() >= n_bytes {
                break;
            }
            text.push(WIDE[pick % WIDE.len()]);
        }
        text
    }

    fn jsonl_line(content: &str) -> String {
        serde_json::json!({
            "user": "ana", "conversation": "c1", "role": "user",
            "content": content, "timestamp": "2026-03-01T10:00:00Z",
        })
        .to_string()
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]

        /// Sizes around the limit (above the few bytes of the other messages), in characters of
        /// one to four bytes: a message is accepted exactly when its UTF-8 length is within
        /// `max_message_bytes`, in every format, and a refusal names the place, the size and the
        /// setting.
        #[test]
        fn messages_are_accepted_exactly_up_to_the_byte_limit(
            limit in 16usize..4096,
            offset in -6i64..=6,
            picks in proptest::collection::vec(0usize..4, 1..16),
        ) {
            let target = (limit as i64 + offset).max(1) as usize;
            let content = text_of_at_least(target, &picks);
            let fits = content.len() <= limit;

            let file = [jsonl_line("before"), jsonl_line(&content), jsonl_line("after")].join("\n");
            match parse_jsonl("chat.jsonl", &file, limit) {
                Ok(messages) => {
                    proptest::prop_assert!(fits, "{} bytes passed a limit of {}", content.len(), limit);
                    proptest::prop_assert_eq!(&messages[1].content, &content);
                }
                Err(error) => {
                    proptest::prop_assert!(!fits, "{} bytes refused under a limit of {}: {}", content.len(), limit, error);
                    proptest::prop_assert_eq!(
                        error.to_string(),
                        format!(
                            "chat.jsonl:2: field `content` is {} bytes, over the limit of {limit} bytes ([ingest] max_message_bytes); split the message or raise the limit",
                            content.len()
                        )
                    );
                }
            }

            let body = serde_json::json!([
                {"conversation": "c1", "role": "user", "content": "before", "timestamp": "2026-03-01T10:00:00Z"},
                {"conversation": "c1", "role": "user", "content": content, "timestamp": "2026-03-01T10:01:00Z"},
            ]);
            match parse_api_messages("ana", body.to_string().as_bytes(), limit) {
                Ok(messages) => proptest::prop_assert!(fits && messages.len() == 2),
                Err(BodyError::TooLarge(message)) => {
                    proptest::prop_assert!(!fits);
                    proptest::prop_assert!(
                        message.starts_with("message #2: field `content` is ") && message.contains("max_message_bytes"),
                        "{}", message
                    );
                }
                Err(BodyError::Invalid(message)) => proptest::prop_assert!(false, "{}", message),
            }

            let locomo = serde_json::json!([{"sample_id": "conv-1", "conversation": {
                "session_1_date_time": "1:56 pm on 8 May, 2023",
                "session_1": [
                    {"speaker": "A", "dia_id": "D1:1", "text": "before"},
                    {"speaker": "B", "dia_id": "D1:2", "text": content},
                ],
            }}]);
            match parse_locomo("locomo.json", &locomo.to_string(), limit) {
                Ok(messages) => proptest::prop_assert!(fits && messages.len() == 2),
                Err(error) => {
                    proptest::prop_assert!(!fits, "{}", error);
                    let error = error.to_string();
                    proptest::prop_assert!(
                        error.starts_with("locomo.json:1: conv-1 session_1 turn #2 `text` is ")
                            && error.contains("max_message_bytes"),
                        "{}", error
                    );
                }
            }
        }

    }
}
