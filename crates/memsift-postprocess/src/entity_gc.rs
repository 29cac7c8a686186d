//! Entity garbage collection: find look-alike entities for a dormant, thinly linked one and ask whether to merge
//! it into one of them, delete it, or keep it.
//!
//! Unlike the other stages the request shows real entity ids: the answer names a merge target, and the reference
//! asked for one without ever showing any ids, so every merge it proposed pointed nowhere.

use std::collections::BTreeSet;

use memsift_core::prompt::Prompt;
use memsift_core::status::Purpose;
use serde::{Deserialize, Serialize};

use crate::answer::{action, read_object, required_text};
use crate::{AnswerError, StageRequest};

/// An entity no memory has mentioned for this long is dormant and worth a review.
pub const DORMANT_DAYS: i64 = 45;
/// Entities with fewer links than this are orphans, deleted without asking.
pub const MIN_LINKS: i64 = 1;
/// Entities with more links than this are established and not reviewed.
pub const MAX_LINKS: i64 = 5;
/// At most this many look-alikes are shown, best first.
pub const MAX_ENTITY_CANDIDATES: usize = 10;

/// At most this many of the entity's memory texts are shown: enough to tell who or what it is.
const MAX_MEMORY_TEXTS: usize = 5;

/// Names at least this similar (Jaro-Winkler, lower-cased) are look-alikes, typos and spelling variants included.
const MIN_NAME_SIMILARITY: f64 = 0.85;

/// ... provided the shorter name is at least this fraction of the longer one's length. Winkler's bonus rewards a
/// shared prefix, so without this "Mel" would look like every "Melanie" and "Melvin"; a nickname may well be
/// another person, while the token rule still pairs "Caroline" with "Caroline Smith".
const MIN_NAME_LENGTH_RATIO: f64 = 0.6;

/// An entity as the stage sees it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EntityRef {
    /// The entity's real id, shown to the model so it can name a merge target.
    pub id: String,
    /// The name as stored.
    pub name: String,
    /// The coarse kind (`person`, `place`…).
    pub kind: String,
}

/// The look-alikes of `entity` among `others`: same kind, not itself, and a similar name (a close spelling, or all
/// of one name's words inside the other's). Best first, at most [`MAX_ENTITY_CANDIDATES`].
pub fn name_candidates(entity: &EntityRef, others: &[EntityRef]) -> Vec<EntityRef> {
    let name = entity.name.to_lowercase();
    let mut scored: Vec<(f64, &EntityRef)> = others
        .iter()
        .filter(|other| other.id != entity.id && other.kind.eq_ignore_ascii_case(&entity.kind))
        .filter_map(|other| {
            let other_name = other.name.to_lowercase();
            let similarity = strsim::jaro_winkler(&name, &other_name);
            let similar_spelling =
                similarity >= MIN_NAME_SIMILARITY && length_ratio(&name, &other_name) >= MIN_NAME_LENGTH_RATIO;
            (similar_spelling || words_contained(&name, &other_name)).then_some((similarity, other))
        })
        .collect();
    scored.sort_by(|(a_score, a), (b_score, b)| b_score.total_cmp(a_score).then_with(|| a.id.cmp(&b.id)));
    scored
        .into_iter()
        .take(MAX_ENTITY_CANDIDATES)
        .map(|(_, other)| other.clone())
        .collect()
}

fn length_ratio(a: &str, b: &str) -> f64 {
    let (a_len, b_len) = (a.chars().count(), b.chars().count());
    if a_len.max(b_len) == 0 {
        return 0.0;
    }
    a_len.min(b_len) as f64 / a_len.max(b_len) as f64
}

/// Whether every word of one name is a word of the other (and neither is empty).
fn words_contained(a: &str, b: &str) -> bool {
    let words = |name: &str| -> BTreeSet<String> { crate::words::tokens(name).into_iter().collect() };
    let (a_words, b_words) = (words(a), words(b));
    !a_words.is_empty() && !b_words.is_empty() && (a_words.is_subset(&b_words) || b_words.is_subset(&a_words))
}

/// What to do with a reviewed entity.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EntityVerdict {
    /// Move its links to the candidate with this id, then delete it.
    Merge {
        /// One of the candidates' ids.
        target: String,
    },
    /// It names nothing worth keeping.
    Delete,
    /// It is a real, distinct thing.
    Keep,
}

/// The user message of an entity GC request.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct EntityGcTask {
    pub(crate) task: String,
    pub(crate) entity: EntityRef,
    pub(crate) memories: Vec<String>,
    pub(crate) candidates: Vec<EntityRef>,
}

/// One request reviewing `entity`, shown with up to five of its memories' texts and each candidate with its id
/// and kind.
pub fn entity_gc_request(
    prompt: &Prompt,
    entity: &EntityRef,
    candidates: &[EntityRef],
    memory_texts: &[String],
) -> StageRequest {
    StageRequest::new(
        prompt,
        &EntityGcTask {
            task: Purpose::EntityGc.as_str().to_owned(),
            entity: entity.clone(),
            memories: memory_texts.iter().take(MAX_MEMORY_TEXTS).cloned().collect(),
            candidates: candidates.to_vec(),
        },
    )
}

/// Reads `{"action":"merge","target_id":"…"}`, `{"action":"delete"}` or `{"action":"keep"}`.
///
/// A merge target must be one of `candidates`' ids: anything else is an error naming it, never a merge into an
/// entity the model was not shown.
pub fn parse_entity_gc_answer(raw: &str, candidates: &[EntityRef]) -> Result<EntityVerdict, AnswerError> {
    let object = read_object(raw, false)?;
    match action(&object)?.as_str() {
        "merge" => {
            let target = required_text(&object, "target_id")?;
            if !candidates.iter().any(|candidate| candidate.id == target) {
                let shown: Vec<&str> = candidates.iter().map(|candidate| candidate.id.as_str()).collect();
                return Err(AnswerError::Invalid(format!(
                    "merge target `{target}` is not one of the candidate ids shown ({})",
                    if shown.is_empty() {
                        "none".to_owned()
                    } else {
                        shown.join(", ")
                    }
                )));
            }
            Ok(EntityVerdict::Merge { target })
        }
        "delete" => Ok(EntityVerdict::Delete),
        "keep" => Ok(EntityVerdict::Keep),
        other => Err(AnswerError::Invalid(format!(
            "unknown entity action `{other}`: expected merge, delete or keep"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::prompt;

    fn entity(id: &str, name: &str, kind: &str) -> EntityRef {
        EntityRef {
            id: id.to_owned(),
            name: name.to_owned(),
            kind: kind.to_owned(),
        }
    }

    #[test]
    fn look_alikes_share_the_kind_and_a_similar_name_best_first() {
        let caroline = entity("e1", "Caroline", "person");
        let others = [
            entity("e1", "Caroline", "person"),
            entity("e2", "Caroline Smith", "person"),
            entity("e3", "Carolina", "person"),
            entity("e4", "Caroline", "place"),
            entity("e5", "Melanie", "person"),
            entity("e6", "caroline", "person"),
        ];
        let ids: Vec<String> = name_candidates(&caroline, &others).into_iter().map(|e| e.id).collect();
        assert_eq!(ids, ["e6", "e3", "e2"]);
    }

    #[test]
    fn a_short_prefix_is_not_a_look_alike_but_contained_words_are() {
        let mel = entity("e1", "Mel", "person");
        assert!(name_candidates(&mel, &[entity("e2", "Melanie", "person")]).is_empty());
        assert_eq!(name_candidates(&mel, &[entity("e3", "Mel Jones", "person")]).len(), 1);
    }

    #[test]
    fn candidates_are_capped() {
        let anna = entity("e0", "Anna", "person");
        let others: Vec<EntityRef> = (1..=15)
            .map(|i| entity(&format!("e{i:02}"), &format!("Anna {i}"), "person"))
            .collect();
        assert_eq!(name_candidates(&anna, &others).len(), MAX_ENTITY_CANDIDATES);
    }

    #[test]
    fn the_request_shows_real_ids_and_at_most_five_memories() {
        let texts: Vec<String> = (1..=7).map(|i| format!("Caroline fact {i}")).collect();
        let request = entity_gc_request(
            &prompt("entity_gc"),
            &entity("0190f1c2-aaaa", "Caroline", "person"),
            &[entity("0190f1c2-bbbb", "Caroline Smith", "person")],
            &texts,
        );
        assert!(
            request
                .user_message
                .starts_with(r#"{"task":"entity_gc","entity":{"id":"0190f1c2-aaaa""#)
        );
        assert!(
            request
                .user_message
                .contains(r#"{"id":"0190f1c2-bbbb","name":"Caroline Smith","kind":"person"}"#)
        );
        assert!(request.user_message.contains("fact 5") && !request.user_message.contains("fact 6"));
    }

    #[test]
    fn a_merge_must_target_a_shown_candidate() {
        let candidates = [entity("e2", "Caroline Smith", "person")];
        assert_eq!(
            parse_entity_gc_answer("```json\n{\"action\":\"merge\",\"target_id\":\"e2\"}\n```", &candidates),
            Ok(EntityVerdict::Merge {
                target: "e2".to_owned()
            })
        );
        let error = parse_entity_gc_answer(r#"{"action":"merge","target_id":"e9"}"#, &candidates).unwrap_err();
        assert!(
            error.to_string().contains("`e9`") && error.to_string().contains("e2"),
            "{error}"
        );
        assert_eq!(
            parse_entity_gc_answer(r#"{"action":"merge"}"#, &candidates),
            Err(AnswerError::MissingField { field: "target_id" })
        );
        assert_eq!(
            parse_entity_gc_answer("{'action': 'delete'}", &candidates),
            Ok(EntityVerdict::Delete)
        );
        assert_eq!(
            parse_entity_gc_answer(r#"{"action":"Keep",}"#, &[]),
            Ok(EntityVerdict::Keep)
        );
        assert!(parse_entity_gc_answer(r#"{"action":"rename"}"#, &[]).is_err());
    }
}
