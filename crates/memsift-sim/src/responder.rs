//! Responders: who writes the simulated model's answer to one request.
//!
//! Every responder sees the request's turns as the `<turn>` transcript parsed back, so an
//! extraction request is answered from the same turns a real model would read. The heuristic and
//! LoCoMo responders answer post-processing requests (whose user message names a `task`) with
//! `memsift_postprocess::offline`, the judge the offline lane uses.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::path::Path;
use std::sync::Mutex;

use memsift_core::contract::{ExtractedItem, Turn};
use memsift_core::status::Temporal;

use crate::error::SimConfigError;

/// What a responder is asked.
#[derive(Debug, Clone, Copy)]
pub struct ResponderRequest<'a> {
    /// The model named in the request.
    pub model: &'a str,
    /// The system prompt text.
    pub system: &'a str,
    /// The user messages' text, joined.
    pub user_text: &'a str,
    /// The turns found in the user text.
    pub turns: &'a [Turn],
}

/// What a responder answers.
#[derive(Debug, Clone, PartialEq)]
pub enum ResponderReply {
    /// The model's text.
    Text(String),
    /// An error answer: an HTTP error on the immediate lane, an `errored` result in a batch.
    Error {
        /// HTTP status.
        status: u16,
        /// Provider error type, e.g. `invalid_request_error`.
        kind: String,
        /// The message.
        message: String,
    },
}

/// Writes answers. Called with the simulator's state locked, so it must be quick and must not block.
pub trait Responder: Send + Sync + std::fmt::Debug + 'static {
    /// The answer to one request.
    fn respond(&self, request: &ResponderRequest<'_>) -> ResponderReply;
}

/// Answers with `memsift_heuristic::extract_json` over the request's turns.
#[derive(Debug, Clone, Copy, Default)]
pub struct HeuristicResponder;

impl Responder for HeuristicResponder {
    fn respond(&self, request: &ResponderRequest<'_>) -> ResponderReply {
        if let Some(answer) = memsift_postprocess::offline::offline_answer(request.user_text) {
            return ResponderReply::Text(answer);
        }
        ResponderReply::Text(memsift_heuristic::extract_json(request.turns))
    }
}

/// Answers with the LoCoMo observations whose evidence turns appear in the request, in the compact
/// form the extraction prompt asks for (text and evidence; every other field is at its default).
///
/// An observation is included when any of its `dia_id`s is a turn label of the request, and its
/// `evidence_turns` keep only the labels present, so an answer never cites a turn the request did
/// not show (a chunk boundary can split an observation's evidence).
#[derive(Debug)]
pub struct LocomoResponder {
    observations: Vec<(String, Vec<String>)>,
    by_dia_id: HashMap<String, Vec<usize>>,
    /// The conversation each observation belongs to (an index into `speakers`).
    sample_of: Vec<usize>,
    /// Each conversation's two speakers: dia_ids (`D1:3`) repeat across conversations, so the
    /// request's speaker names pick the conversation.
    speakers: Vec<[String; 2]>,
}

impl LocomoResponder {
    /// Loads the observations of a LoCoMo JSON file (`locomo10.json` format).
    pub fn load(path: &Path) -> Result<Self, SimConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| SimConfigError::Read {
            path: path.to_owned(),
            source,
        })?;
        Self::from_json(&text).map_err(|message| SimConfigError::Parse {
            path: path.to_owned(),
            message,
        })
    }

    /// Parses LoCoMo JSON text.
    pub fn from_json(text: &str) -> Result<Self, String> {
        let samples: Vec<serde_json::Value> = serde_json::from_str(text).map_err(|error| error.to_string())?;
        let mut observations = Vec::new();
        let mut sample_of = Vec::new();
        let mut speakers = Vec::new();
        for sample in &samples {
            let conversation = sample.get("conversation");
            let speaker = |key: &str| {
                conversation
                    .and_then(|c| c.get(key))
                    .and_then(|name| name.as_str())
                    .unwrap_or_default()
                    .to_owned()
            };
            let sample_idx = speakers.len();
            speakers.push([speaker("speaker_a"), speaker("speaker_b")]);
            let Some(sessions) = sample.get("observation").and_then(|value| value.as_object()) else {
                continue;
            };
            // Sessions in numeric order so answers list observations in conversation order.
            let mut ordered: BTreeMap<u32, &serde_json::Value> = BTreeMap::new();
            for (name, value) in sessions {
                let number = name
                    .trim_start_matches("session_")
                    .trim_end_matches("_observation")
                    .parse()
                    .unwrap_or(u32::MAX);
                ordered.insert(number, value);
            }
            for speakers in ordered.values().filter_map(|value| value.as_object()) {
                for items in speakers.values().filter_map(|value| value.as_array()) {
                    for item in items {
                        if let Some(observation) = parse_observation(item) {
                            observations.push(observation);
                            sample_of.push(sample_idx);
                        }
                    }
                }
            }
        }
        let mut by_dia_id: HashMap<String, Vec<usize>> = HashMap::new();
        for (index, (_, dia_ids)) in observations.iter().enumerate() {
            for dia_id in dia_ids {
                by_dia_id.entry(dia_id.clone()).or_default().push(index);
            }
        }
        Ok(Self {
            observations,
            by_dia_id,
            sample_of,
            speakers,
        })
    }

    /// How many observations were loaded.
    pub fn len(&self) -> usize {
        self.observations.len()
    }

    /// Whether none were.
    pub fn is_empty(&self) -> bool {
        self.observations.is_empty()
    }
}

/// The known memories an extraction request shows, as their lines read (`[short id] text`, between
/// "Known memories" and "Conversation:"), unescaped.
fn known_memory_texts(user_text: &str) -> std::collections::HashSet<String> {
    let Some(start) = user_text.find("Known memories (") else {
        return std::collections::HashSet::new();
    };
    let block = &user_text[start..];
    let block = &block[..block.find("\nConversation:").unwrap_or(block.len())];
    block
        .lines()
        .skip(1)
        .filter_map(|line| line.strip_prefix('[')?.split_once("] ").map(|(_, text)| text))
        .map(|text| text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&"))
        .collect()
}

/// A text as one line, as a request shows a known memory: whitespace runs collapsed.
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// `[text, "D1:3"]`, `[text, ["D1:3", "D1:5"]]` or `[text, "D1:3, D1:5"]`.
fn parse_observation(item: &serde_json::Value) -> Option<(String, Vec<String>)> {
    let text = item.get(0)?.as_str()?.to_owned();
    let raw: Vec<&str> = match item.get(1)? {
        serde_json::Value::String(ids) => vec![ids.as_str()],
        serde_json::Value::Array(ids) => ids.iter().filter_map(|id| id.as_str()).collect(),
        _ => return None,
    };
    let dia_ids: Vec<String> = raw
        .iter()
        .flat_map(|ids| ids.split([',', ';', ' ']))
        .map(str::trim)
        .filter(|id| !id.is_empty())
        .map(str::to_owned)
        .collect();
    (!dia_ids.is_empty()).then_some((text, dia_ids))
}

impl Responder for LocomoResponder {
    fn respond(&self, request: &ResponderRequest<'_>) -> ResponderReply {
        // Post-processing requests (relationships, consolidation, …) get the offline judge's
        // answer: LoCoMo has observations, not verdicts.
        if let Some(answer) = memsift_postprocess::offline::offline_answer(request.user_text) {
            return ResponderReply::Text(answer);
        }
        let labels: Vec<&str> = request.turns.iter().map(|turn| turn.label.as_str()).collect();
        let request_speakers: Vec<&str> = request
            .turns
            .iter()
            .filter_map(|turn| turn.speaker.as_deref())
            .collect();
        let same_conversation = |index: usize| {
            let [a, b] = &self.speakers[self.sample_of[index]];
            // A file without speaker names cannot tell conversations apart: answer from all.
            (a.is_empty() && b.is_empty()) || request_speakers.iter().all(|speaker| speaker == a || speaker == b)
        };
        let mut chosen: Vec<usize> = labels
            .iter()
            .filter_map(|label| self.by_dia_id.get(*label))
            .flatten()
            .copied()
            .filter(|index| same_conversation(*index))
            .collect();
        chosen.sort_unstable();
        chosen.dedup();
        // As the prompt asks ("do not restate them"), what the request shows as known is not written
        // again: a continuation of a cut answer shows the items it kept.
        let known = known_memory_texts(request.user_text);
        chosen.retain(|index| !known.contains(&one_line(&self.observations[*index].0)));
        let items: Vec<ExtractedItem> = chosen
            .into_iter()
            .map(|index| {
                let (text, dia_ids) = &self.observations[index];
                let evidence = dia_ids
                    .iter()
                    .filter(|id| labels.contains(&id.as_str()))
                    .cloned()
                    .collect();
                ExtractedItem::new(text.clone(), Temporal::Unknown, evidence)
            })
            .collect();
        ResponderReply::Text(
            serde_json::to_string(&items).expect("extracted items always serialise: plain strings and numbers"),
        )
    }
}

type ReplyFn = Box<dyn Fn(&ResponderRequest<'_>) -> ResponderReply + Send + Sync>;

/// Canned answers for tests: a queue served in order, then a closure (or `[]`).
#[derive(Default)]
pub struct ScriptedResponder {
    queue: Mutex<VecDeque<ResponderReply>>,
    fallback: Option<ReplyFn>,
}

impl std::fmt::Debug for ScriptedResponder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScriptedResponder")
            .field("queued", &self.lock().len())
            .field("fallback", &self.fallback.is_some())
            .finish()
    }
}

impl ScriptedResponder {
    /// An empty script: every answer is `[]`.
    pub fn new() -> Self {
        Self::default()
    }

    /// A script whose answers come from `reply` once the queue is empty.
    pub fn from_fn(reply: impl Fn(&ResponderRequest<'_>) -> ResponderReply + Send + Sync + 'static) -> Self {
        Self {
            queue: Mutex::new(VecDeque::new()),
            fallback: Some(Box::new(reply)),
        }
    }

    /// Queues a text answer.
    pub fn push_text(&self, text: impl Into<String>) -> &Self {
        self.lock().push_back(ResponderReply::Text(text.into()));
        self
    }

    /// Queues any answer.
    pub fn push(&self, reply: ResponderReply) -> &Self {
        self.lock().push_back(reply);
        self
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<ResponderReply>> {
        self.queue
            .lock()
            .expect("script mutex is never poisoned: nothing panics while holding it")
    }
}

impl Responder for ScriptedResponder {
    fn respond(&self, request: &ResponderRequest<'_>) -> ResponderReply {
        if let Some(reply) = self.lock().pop_front() {
            return reply;
        }
        match &self.fallback {
            Some(reply) => reply(request),
            None => ResponderReply::Text("[]".to_owned()),
        }
    }
}

#[cfg(test)]
mod tests {
    use chrono::{DateTime, Utc};
    use memsift_core::status::Role;

    use super::*;

    fn turn(label: &str) -> Turn {
        Turn {
            label: label.to_owned(),
            role: Role::User,
            speaker: Some("Caroline".to_owned()),
            content: "hello".to_owned(),
            at: DateTime::parse_from_rfc3339("2023-05-08T13:56:00Z")
                .unwrap()
                .with_timezone(&Utc),
        }
    }

    #[test]
    fn locomo_answers_with_observations_citing_only_turns_in_the_request() {
        let json = r#"[{"observation": {"session_1_observation": {"Caroline": [
            ["Caroline went to a support group.", "D1:3"],
            ["Caroline likes painting.", "D1:5, D1:9"],
            ["Unrelated.", ["D2:1"]]
        ]}}}]"#;
        let responder = LocomoResponder::from_json(json).unwrap();
        assert_eq!(responder.len(), 3);
        let turns = vec![turn("D1:3"), turn("D1:5")];
        let request = ResponderRequest {
            model: "m",
            system: "",
            user_text: "",
            turns: &turns,
        };
        let ResponderReply::Text(text) = responder.respond(&request) else {
            panic!("locomo answers with text")
        };
        // The compact form a model following the prompt writes: nothing at its default.
        assert_eq!(
            text,
            r#"[{"text":"Caroline went to a support group.","evidence_turns":["D1:3"]},{"text":"Caroline likes painting.","evidence_turns":["D1:5"]}]"#
        );
        let items: Vec<ExtractedItem> = serde_json::from_str(&text).unwrap();
        assert_eq!(items.len(), 2);
        assert_eq!(items[0].evidence_turns, vec!["D1:3"]);
        assert_eq!(items[1].text, "Caroline likes painting.");
        assert_eq!(items[1].evidence_turns, vec!["D1:5"]);
    }

    #[test]
    fn locomo_answers_only_from_the_conversation_whose_speakers_are_in_the_request() {
        let json = r#"[
            {"conversation": {"speaker_a": "Caroline", "speaker_b": "Melanie"},
             "observation": {"session_1_observation": {"Caroline": [["Caroline went to a support group.", "D1:3"]]}}},
            {"conversation": {"speaker_a": "Jon", "speaker_b": "Gina"},
             "observation": {"session_1_observation": {"Jon": [["Jon lost his job.", "D1:3"]]}}}
        ]"#;
        let responder = LocomoResponder::from_json(json).unwrap();
        let mut jon = turn("D1:3");
        jon.speaker = Some("Jon".to_owned());
        let turns = vec![jon];
        let request = ResponderRequest {
            model: "m",
            system: "",
            user_text: "",
            turns: &turns,
        };
        let ResponderReply::Text(text) = responder.respond(&request) else {
            panic!("locomo answers with text")
        };
        let items: Vec<ExtractedItem> = serde_json::from_str(&text).unwrap();
        let texts: Vec<&str> = items.iter().map(|item| item.text.as_str()).collect();
        assert_eq!(texts, vec!["Jon lost his job."]);
    }

    #[test]
    fn locomo_does_not_restate_what_the_request_shows_as_known() {
        let json = r#"[{"observation": {"session_1_observation": {"Caroline": [
            ["Caroline went to a  support group.", "D1:3"],
            ["Caroline likes <painting> & pottery.", "D1:5"],
            ["Caroline has a dog.", "D1:5"]
        ]}}}]"#;
        let responder = LocomoResponder::from_json(json).unwrap();
        let turns = vec![turn("D1:3"), turn("D1:5")];
        let answer = |user_text: &str| {
            let request = ResponderRequest {
                model: "m",
                system: "",
                user_text,
                turns: &turns,
            };
            let ResponderReply::Text(text) = responder.respond(&request) else {
                panic!("locomo answers with text")
            };
            let items: Vec<ExtractedItem> = serde_json::from_str(&text).unwrap();
            items.into_iter().map(|item| item.text).collect::<Vec<_>>()
        };
        assert_eq!(answer("Known memories: none.\n\nConversation:\n").len(), 3);
        // The payload's lines: collapsed whitespace, markup escaped.
        let shown = "Today's date: 2023-05-08.\n\nKnown memories (short id in brackets; do not restate them):\n\
                     [k1] Caroline went to a support group.\n[k2] Caroline likes &lt;painting&gt; &amp; pottery.\n\
                     \nConversation:\n<turn label=\"D1:3\">Caroline has a dog.</turn>";
        assert_eq!(answer(shown), ["Caroline has a dog."]);
    }

    #[test]
    fn a_script_serves_its_queue_then_its_fallback() {
        let script = ScriptedResponder::from_fn(|request| ResponderReply::Text(format!("model {}", request.model)));
        script.push_text("first");
        let request = ResponderRequest {
            model: "m",
            system: "",
            user_text: "",
            turns: &[],
        };
        assert_eq!(script.respond(&request), ResponderReply::Text("first".into()));
        assert_eq!(script.respond(&request), ResponderReply::Text("model m".into()));
    }
}
