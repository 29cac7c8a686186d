//! Relationship classification: one request per memory classifies every candidate neighbour at once.
//!
//! The reference sent one request per pair, repeating the instructions and the memory for every candidate; here
//! a memory and its (at most [`MAX_CANDIDATES`]) nearest neighbours go in one request, and the answer lists one
//! verdict per candidate. A verdict reads "<memory> <kind> <candidate>": the memory is the link's source.

use std::collections::{HashMap, HashSet};

use memsift_core::MemoryId;
use memsift_core::prompt::Prompt;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::answer::{number, optional_text, read_elements};
use crate::{AnswerError, LabelledText, MemoryText, StageRequest, index_of_label, labelled};

/// Verdicts below this confidence are dropped: a wrong `supersedes` hides a true memory, so only confident
/// links are written.
pub const MIN_LINK_CONFIDENCE: f64 = 0.7;

/// Neighbours less similar than this are not worth asking about: below it, pairs are rarely about the same thing.
pub const CANDIDATE_MIN_COSINE: f32 = 0.75;

/// At most this many candidates per request, which keeps the answer short and the labels unambiguous.
pub const MAX_CANDIDATES: usize = 20;

/// The label prefix of candidates (`c1`, `c2`…).
const CANDIDATE_PREFIX: char = 'c';

/// How a memory relates to a candidate, read as "<memory> <kind> <candidate>".
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum LinkKind {
    /// Both cannot be true at once.
    Conflicts,
    /// The memory replaces the candidate, which is no longer current.
    Supersedes,
    /// The memory brings about the candidate.
    Causes,
    /// The memory is a specific case of the candidate.
    InstanceOf,
    /// The memory is made untrue by the candidate.
    InvalidatedBy,
    /// The memory happens because of the candidate.
    MotivatedBy,
}

impl LinkKind {
    /// Every kind, in declaration order.
    pub const ALL: &'static [LinkKind] = &[
        LinkKind::Conflicts,
        LinkKind::Supersedes,
        LinkKind::Causes,
        LinkKind::InstanceOf,
        LinkKind::InvalidatedBy,
        LinkKind::MotivatedBy,
    ];

    /// The stored and prompted text form.
    pub fn as_str(self) -> &'static str {
        match self {
            LinkKind::Conflicts => "conflicts",
            LinkKind::Supersedes => "supersedes",
            LinkKind::Causes => "causes",
            LinkKind::InstanceOf => "instance_of",
            LinkKind::InvalidatedBy => "invalidated_by",
            LinkKind::MotivatedBy => "motivated_by",
        }
    }

    /// Reads a kind, tolerating case, spaces and hyphens (`Instance of` reads as `instance_of`); `None` for
    /// `none` and for anything unknown.
    pub fn parse(input: &str) -> Option<LinkKind> {
        let normalised = input.trim().to_ascii_lowercase().replace([' ', '-'], "_");
        LinkKind::ALL.iter().copied().find(|kind| kind.as_str() == normalised)
    }

    /// Which memory a link of this kind marks as superseded: `supersedes` marks the candidate (the
    /// target), `invalidated_by` marks the memory (the source); other kinds mark none.
    pub fn superseded_end(self) -> Option<SupersededEnd> {
        match self {
            LinkKind::Supersedes => Some(SupersededEnd::Candidate),
            LinkKind::InvalidatedBy => Some(SupersededEnd::Memory),
            _ => None,
        }
    }
}

/// The side of "<memory> <kind> <candidate>" a superseding kind marks as no longer current.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SupersededEnd {
    /// The classified memory (the link's source).
    Memory,
    /// The candidate (the link's target).
    Candidate,
}

impl std::fmt::Display for LinkKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One accepted verdict of a relationship answer.
#[derive(Clone, Debug, PartialEq)]
pub struct LinkVerdict {
    /// Index into the candidates the request was built from.
    pub candidate: usize,
    /// "<memory> <kind> <candidate>".
    pub kind: LinkKind,
    /// 0.0 to 1.0, at least [`MIN_LINK_CONFIDENCE`].
    pub confidence: f64,
    /// The model's one-line reason, kept for the admin pages.
    pub reasoning: String,
}

/// The user message of a relationship request.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct RelationshipTask {
    pub(crate) task: String,
    pub(crate) memory: String,
    pub(crate) candidates: Vec<HintedCandidate>,
}

/// A candidate of a relationship request, with what the extractor said of the pair, if anything.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct HintedCandidate {
    #[serde(flatten)]
    pub(crate) labelled: LabelledText,
    /// "memory <kind> candidate" or "candidate <kind> memory": the extractor's `relationship_type`
    /// and its direction, for the judge to confirm or overrule.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) extractor_said: Option<String>,
}

/// What the extractor said about a pair when it wrote one of them: "<from> <kind> <the other>".
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExtractorHint {
    /// Its `relationship_type`.
    pub kind: LinkKind,
    /// Whether the classified memory's item said it (else the candidate's did).
    pub from_memory: bool,
}

impl ExtractorHint {
    /// The hint as the request shows it.
    pub(crate) fn said(&self) -> String {
        let (subject, object) = if self.from_memory {
            ("memory", "candidate")
        } else {
            ("candidate", "memory")
        };
        format!("{subject} {} {object}", self.kind)
    }

    /// Reads a request's `extractor_said` back.
    pub(crate) fn read(said: &str) -> Option<ExtractorHint> {
        let words: Vec<&str> = said.split_whitespace().collect();
        let [subject, kind, object] = words[..] else {
            return None;
        };
        let from_memory = match (subject, object) {
            ("memory", "candidate") => true,
            ("candidate", "memory") => false,
            _ => return None,
        };
        Some(ExtractorHint {
            kind: LinkKind::parse(kind)?,
            from_memory,
        })
    }

    /// The hint as a verdict on "<memory> <kind> <candidate>": its kind, or the inverse kind when
    /// the candidate's item said it; `None` for a kind without an inverse (`instance_of`).
    pub fn as_verdict_kind(&self) -> Option<LinkKind> {
        if self.from_memory {
            return Some(self.kind);
        }
        match self.kind {
            LinkKind::Conflicts => Some(LinkKind::Conflicts),
            LinkKind::Supersedes => Some(LinkKind::InvalidatedBy),
            LinkKind::InvalidatedBy => Some(LinkKind::Supersedes),
            LinkKind::Causes => Some(LinkKind::MotivatedBy),
            LinkKind::MotivatedBy => Some(LinkKind::Causes),
            LinkKind::InstanceOf => None,
        }
    }
}

/// One request classifying how `memory` relates to each of `candidates` (labelled `c1`, `c2`…).
///
/// The caller passes at most [`MAX_CANDIDATES`] candidates, already filtered by [`CANDIDATE_MIN_COSINE`].
pub fn relationship_request(prompt: &Prompt, memory: &MemoryText, candidates: &[MemoryText]) -> StageRequest {
    relationship_request_with_hints(prompt, memory, candidates, &[])
}

/// [`relationship_request`] with what the extractor said of each pair (`hints[i]` for
/// `candidates[i]`; missing entries say nothing), passed on for the judge to confirm or overrule.
pub fn relationship_request_with_hints(
    prompt: &Prompt,
    memory: &MemoryText,
    candidates: &[MemoryText],
    hints: &[Option<ExtractorHint>],
) -> StageRequest {
    let candidates = labelled(CANDIDATE_PREFIX, candidates)
        .into_iter()
        .enumerate()
        .map(|(index, labelled)| HintedCandidate {
            labelled,
            extractor_said: hints.get(index).and_then(Option::as_ref).map(ExtractorHint::said),
        })
        .collect();
    StageRequest::new(
        prompt,
        &RelationshipTask {
            task: memsift_core::status::Purpose::Relationship.as_str().to_owned(),
            memory: memory.text.clone(),
            candidates,
        },
    )
}

/// The reference's way: one request for one pair (`a` as the memory, `b` as its only candidate).
///
/// Kept only to measure what batching the candidates saves; the answer reads with the same parser.
pub fn relationship_pair_request(prompt: &Prompt, a: &MemoryText, b: &MemoryText) -> StageRequest {
    relationship_request(prompt, a, std::slice::from_ref(b))
}

/// Reads a relationship answer: `[{"candidate":"c2","kind":"supersedes","confidence":0.9,"reasoning":"…"}]`.
///
/// `none`, unknown kinds, labels outside `c1..=c<n_candidates>`, missing or low confidences and non-objects are
/// dropped (a wrong link costs more than a missing one); of duplicates per (candidate, kind) the most confident is
/// kept. Verdicts come out in the order of their first appearance. Only an answer with no readable JSON is an
/// error; `[]` is a valid answer.
pub fn parse_relationship_answer(raw: &str, n_candidates: usize) -> Result<Vec<LinkVerdict>, AnswerError> {
    let mut values = read_elements(raw)?.values;
    // `{"verdicts": [...]}` and the like: a lone object that is not a verdict but holds one list is that list.
    if let [Value::Object(wrapper)] = values.as_slice()
        && !wrapper.contains_key("candidate")
        && let [Value::Array(inner)] = wrapper.values().collect::<Vec<_>>().as_slice()
    {
        values = inner.clone();
    }
    let mut verdicts: Vec<LinkVerdict> = Vec::new();
    let mut position_by_key: HashMap<(usize, LinkKind), usize> = HashMap::new();
    for value in &values {
        let Some(verdict) = verdict_of(value, n_candidates) else {
            continue;
        };
        match position_by_key.get(&(verdict.candidate, verdict.kind)) {
            Some(&position) => {
                if verdict.confidence > verdicts[position].confidence {
                    verdicts[position] = verdict;
                }
            }
            None => {
                position_by_key.insert((verdict.candidate, verdict.kind), verdicts.len());
                verdicts.push(verdict);
            }
        }
    }
    Ok(verdicts)
}

fn verdict_of(value: &Value, n_candidates: usize) -> Option<LinkVerdict> {
    let object = value.as_object()?;
    let candidate = index_of_label(object.get("candidate")?.as_str()?, CANDIDATE_PREFIX, n_candidates)?;
    let kind = LinkKind::parse(object.get("kind")?.as_str()?)?;
    let confidence = number(object.get("confidence")?)?.min(1.0);
    (confidence >= MIN_LINK_CONFIDENCE).then(|| LinkVerdict {
        candidate,
        kind,
        confidence,
        reasoning: optional_text(object, "reasoning"),
    })
}

/// The pairs without self pairs, repeats and mirrors: of (a, b) and (b, a) the first seen is kept, so a pair
/// is classified once whichever memory found the other. Order is preserved.
pub fn unique_pairs(pairs: impl IntoIterator<Item = (MemoryId, MemoryId)>) -> Vec<(MemoryId, MemoryId)> {
    let mut seen = HashSet::new();
    pairs
        .into_iter()
        .filter(|(a, b)| a != b)
        .filter(|(a, b)| seen.insert(if a < b { (*a, *b) } else { (*b, *a) }))
        .collect()
}

/// The pairs oriented newer against older: each comes out as (the memory said later, the one said
/// earlier), by `said_at` and then by id, so the classified memory is the newer one whichever
/// memory found the other. A judge reads "<memory> <kind> <candidate>" with the memory the
/// latest word; first-seen order put the older memory first whenever it was the one being
/// related, and the change ("now lives in Porto") sat on the candidate's side. A pair with an end
/// of unknown time keeps its order.
pub fn newer_first<K: Ord>(
    pairs: impl IntoIterator<Item = (MemoryId, MemoryId)>,
    said_at: impl Fn(MemoryId) -> Option<K>,
) -> Vec<(MemoryId, MemoryId)> {
    pairs
        .into_iter()
        .map(|(a, b)| match (said_at(a), said_at(b)) {
            (Some(at_a), Some(at_b)) if (&at_a, a) < (&at_b, b) => (b, a),
            _ => (a, b),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{memories, prompt};

    #[test]
    fn kinds_round_trip_and_only_supersedes_and_invalidated_by_mark_an_end_superseded() {
        for kind in LinkKind::ALL {
            assert_eq!(LinkKind::parse(kind.as_str()), Some(*kind));
        }
        assert_eq!(LinkKind::parse(" Instance Of "), Some(LinkKind::InstanceOf));
        assert_eq!(LinkKind::parse("none"), None);
        let marking: Vec<_> = LinkKind::ALL
            .iter()
            .filter_map(|kind| Some((*kind, kind.superseded_end()?)))
            .collect();
        assert_eq!(
            marking,
            [
                (LinkKind::Supersedes, SupersededEnd::Candidate),
                (LinkKind::InvalidatedBy, SupersededEnd::Memory)
            ]
        );
    }

    #[test]
    fn the_request_labels_candidates_and_starts_with_the_task() {
        let memory = &memories(&["Caroline now lives in Berlin"])[0];
        let candidates = memories(&["Caroline lives in Lisbon", "Caroline has a dog"]);
        let request = relationship_request(&prompt("relationship"), memory, &candidates);
        assert!(
            request.user_message.starts_with(r#"{"task":"relationship""#),
            "{}",
            request.user_message
        );
        assert!(
            request
                .user_message
                .contains(r#"{"id":"c2","text":"Caroline has a dog"}"#)
        );
        assert!(
            !request.user_message.contains(&candidates[0].id.to_string()),
            "no UUIDs are shown"
        );
        assert_eq!(request.system, prompt("relationship").text);
    }

    #[test]
    fn wrapped_and_broken_answers_are_read_and_bad_verdicts_dropped() {
        let raw = "Here is my analysis:\n```json\n[\
            {\"candidate\": \"c1\", \"kind\": \"supersedes\", \"confidence\": 0.9, \"reasoning\": \"moved\"},\
            {\"candidate\": \"c2\", \"kind\": \"none\", \"confidence\": 0.95},\
            {\"candidate\": \"c3\", \"kind\": \"conflicts\", \"confidence\": 0.9},\
            {\"candidate\": \"c2\", \"kind\": \"rhymes_with\", \"confidence\": 0.9},\
            {\"candidate\": \"c2\", \"kind\": \"causes\", \"confidence\": 0.5},\
            {\"candidate\": \"c2\", \"kind\": \"conflicts\", \"confidence\": \"0.8\",},\
            {\"candidate\": \"c1\", \"kind\": \"supersedes\", \"confidence\": 0.95, \"reasoning\": \"again\"},\
            ]\n```";
        let verdicts = parse_relationship_answer(raw, 2).unwrap();
        assert_eq!(verdicts.len(), 2, "{verdicts:?}");
        assert_eq!((verdicts[0].candidate, verdicts[0].kind), (0, LinkKind::Supersedes));
        assert_eq!(verdicts[0].confidence, 0.95, "the most confident duplicate is kept");
        assert_eq!(verdicts[0].reasoning, "again");
        assert_eq!((verdicts[1].candidate, verdicts[1].kind), (1, LinkKind::Conflicts));
    }

    #[test]
    fn an_empty_list_is_an_answer_and_prose_is_not() {
        assert_eq!(parse_relationship_answer("[]", 3).unwrap(), []);
        assert!(parse_relationship_answer("They are unrelated.", 3).is_err());
        let wrapped = r#"{"verdicts": [{"candidate":"c1","kind":"causes","confidence":0.9}]}"#;
        assert_eq!(parse_relationship_answer(wrapped, 1).unwrap()[0].kind, LinkKind::Causes);
        let single = parse_relationship_answer(r#"{"candidate":"c1","kind":"causes","confidence":1.5}"#, 1).unwrap();
        assert_eq!(single[0].confidence, 1.0, "confidences are capped at 1");
    }

    #[test]
    fn one_request_for_n_candidates_costs_far_fewer_tokens_than_n_pair_requests() {
        use memsift_tokens::count_tokens;
        let memory =
            &memories(&["Caroline moved to Berlin in March 2024 to work as a nurse at the Charité hospital"])[0];
        let candidates = memories(&[
            "Caroline lives in Lisbon with her partner Tom",
            "Caroline works as a nurse at Hospital de Santa Maria",
            "Caroline is learning German on Duolingo every morning",
            "Caroline's sister Anna lives in Hamburg",
            "Caroline plans to visit Berlin in the spring",
            "Caroline does not like cold winters",
            "Caroline adopted a beagle named Max from a shelter",
            "Caroline studied nursing at the University of Porto",
            "Caroline wants to move abroad for her career",
            "Caroline volunteers at a refugee centre on weekends",
        ]);
        let prompt = prompt("relationship");
        let cost = |request: &StageRequest| count_tokens(&request.system) + count_tokens(&request.user_message);
        let one = cost(&relationship_request(&prompt, memory, &candidates));
        let per_pair: usize = candidates
            .iter()
            .map(|candidate| cost(&relationship_pair_request(&prompt, memory, candidate)))
            .sum();
        assert!(
            one * 4 < per_pair,
            "one request: {one} tokens; {} pair requests: {per_pair}",
            candidates.len()
        );
    }

    #[test]
    fn newer_first_puts_the_later_said_memory_first() {
        let ids: Vec<MemoryId> = (0..3).map(|_| MemoryId::new_v7()).collect();
        let at = |id: MemoryId| match ids.iter().position(|known| *known == id) {
            Some(0) => Some(30),
            Some(1) => Some(10),
            _ => None,
        };
        let oriented = newer_first([(ids[1], ids[0]), (ids[0], ids[1]), (ids[2], ids[0])], at);
        assert_eq!(oriented, [(ids[0], ids[1]), (ids[0], ids[1]), (ids[2], ids[0])]);
    }

    #[test]
    fn unique_pairs_drops_self_pairs_repeats_and_mirrors_keeping_order() {
        let ids: Vec<MemoryId> = (0..4).map(|_| MemoryId::new_v7()).collect();
        let (a, b, c, d) = (ids[0], ids[1], ids[2], ids[3]);
        let pairs = unique_pairs([(b, a), (a, a), (a, b), (c, d), (b, a), (d, c), (a, c)]);
        assert_eq!(pairs, [(b, a), (c, d), (a, c)]);
    }

    #[test]
    fn a_request_without_hints_shows_none() {
        let pair = memories(&["Ana runs.", "Ana swims."]);
        let request = relationship_request(&prompt("relationship"), &pair[0], &pair[1..]);
        assert!(
            !request.user_message.contains("extractor_said"),
            "{}",
            request.user_message
        );
    }
}
