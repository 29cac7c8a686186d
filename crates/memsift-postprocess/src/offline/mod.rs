//! The offline judge: deterministic, explainable rules that answer post-processing requests without a model.
//!
//! It reads the same user messages the request builders write and returns text in exactly the format the parsers
//! read, so it serves as the no-network heuristic lane and as the provider simulator's responder, the way
//! `memsift-heuristic` answers extraction. Its rules work on content words (see `words`) and are deliberately
//! conservative: each verdict's reasoning names the rule that produced it. Where the extractor's reading of a
//! sentence applies, the judge uses it (`memsift_heuristic::reading`): two memories about different people or
//! different days are not one fact, a split part must stand on its own, and a summary says what each speaker said
//! about themselves.

use std::collections::BTreeSet;

use memsift_core::contract::Turn;
use memsift_core::status::{Purpose, Role};
use memsift_core::text::collapse_whitespace;
use memsift_heuristic::reading;
use serde::de::DeserializeOwned;
use serde_json::json;

use crate::consolidation::{ConsolidationTask, ReviewTask};
use crate::relationship::{ExtractorHint, LinkKind, RelationshipTask};
use crate::reviewer::ExtractionReviewTask;
use crate::slots;
use crate::summary::SummaryTask;
use crate::task_of;
mod upkeep;

use crate::words::{
    CHANGE_MARKERS, contains_phrase, content_set, content_words, has_any, is_negated, jaccard, topic_set,
};

/// The version of the rule set, recorded on requests like a prompt version.
pub const OFFLINE_VERSION: &str = "offline-judge@1";

/// Topic overlap from which two memories are about the same thing (for conflicts, supersedes and merges).
const SAME_TOPIC_OVERLAP: f64 = 0.5;
/// Overlap from which a memory can be a specific case of a more general one.
const INSTANCE_OVERLAP: f64 = 0.4;
/// Overlap from which a stated reason can refer to the other memory.
const MOTIVATION_OVERLAP: f64 = 0.3;
/// Phrases that say a memory states a reason.
const MOTIVATION_MARKERS: &[&str] = &["because", "so that", "to help", "inspired"];
/// The offline reviewer's confidence ceiling: rules cannot vouch for a fact more than this.
const REVIEW_CONFIDENCE_CAP: f64 = 0.9;
/// Summaries read the first sentence of this many turns when no speaker states anything about themselves.
const SUMMARY_TURNS: usize = 3;
/// Summaries are at most this many of the speakers' statements.
const SUMMARY_STATEMENTS: usize = 3;
/// Offline summaries are cut to this many characters.
const SUMMARY_CHARS: usize = 300;
/// The longest merged text the judge proposes (the parser's limit).
const MAX_MERGED_CHARS: usize = 1000;

/// The judge's answer to a post-processing request, or `None` when the message is not one (or is malformed).
pub fn offline_answer(user_message: &str) -> Option<String> {
    let answer = match task_of(user_message)? {
        Purpose::Relationship => relationship(&read(user_message)?),
        Purpose::Consolidation => consolidation(&read(user_message)?),
        Purpose::ConsolidationReview => consolidation_review(&read(user_message)?),
        Purpose::Refinement => upkeep::refinement(&read(user_message)?),
        Purpose::EntityGc => upkeep::entity_gc(&read(user_message)?),
        Purpose::Summary => summary(&read(user_message)?),
        Purpose::ExtractionReview => extraction_review(read(user_message)?),
        Purpose::Extraction => return None,
    };
    Some(answer.to_string())
}

fn read<T: DeserializeOwned>(user_message: &str) -> Option<T> {
    serde_json::from_str(user_message).ok()
}

fn relationship(task: &RelationshipTask) -> serde_json::Value {
    let verdicts: Vec<_> = task
        .candidates
        .iter()
        .map(|candidate| {
            let hint = candidate.extractor_said.as_deref().and_then(ExtractorHint::read);
            let (kind, confidence, reasoning) = match classify(&task.memory, &candidate.labelled.text) {
                (None, _, why) => {
                    hinted(&task.memory, &candidate.labelled.text, hint.as_ref()).unwrap_or((None, 0.0, why))
                }
                verdict => verdict,
            };
            let candidate = &candidate.labelled;
            json!({
                "candidate": candidate.id,
                "kind": kind.map_or("none", LinkKind::as_str),
                "confidence": confidence,
                "reasoning": reasoning,
            })
        })
        .collect();
    json!(verdicts)
}

/// The first rule that matches "<memory> <kind> <candidate>", with its confidence and a reason naming it.
fn classify(memory: &str, candidate: &str) -> (Option<LinkKind>, f64, String) {
    if let Some((about, other)) = different_subjects(memory, candidate) {
        return (
            None,
            0.0,
            format!("subject rule: the memory is about {about}, the candidate about {other}"),
        );
    }
    let (memory_topic, candidate_topic) = (topic_set(memory), topic_set(candidate));
    let overlap = jaccard(&memory_topic, &candidate_topic);
    let negated = (is_negated(memory), is_negated(candidate));
    // Events on two different days are two events: neither contradicts nor replaces the other.
    if let (Some(day), Some(other_day)) = (reading::stated_day(memory), reading::stated_day(candidate))
        && day != other_day
    {
        return (
            None,
            0.0,
            format!("date rule: {day} and {other_day} are different events (overlap {overlap:.2})"),
        );
    }
    if overlap >= SAME_TOPIC_OVERLAP && negated.0 != negated.1 {
        let reason = format!("conflict rule: same topic (overlap {overlap:.2}) and only one side is negated");
        return (Some(LinkKind::Conflicts), 0.8, reason);
    }
    // The change rule fires on whichever side marks the change, so a pair reads the same in
    // either order: the marked side is the current one.
    let changed = (has_any(memory, CHANGE_MARKERS), has_any(candidate, CHANGE_MARKERS));
    if overlap >= SAME_TOPIC_OVERLAP && changed == (true, false) {
        let reason = format!("supersede rule: same topic (overlap {overlap:.2}) and only the memory marks a change");
        return (Some(LinkKind::Supersedes), 0.8, reason);
    }
    if overlap >= SAME_TOPIC_OVERLAP && changed == (false, true) {
        let reason = format!("supersede rule: same topic (overlap {overlap:.2}) and only the candidate marks a change");
        return (Some(LinkKind::InvalidatedBy), 0.8, reason);
    }
    // Unmarked, relationship requests pair a memory with candidates said before it, so of two values of one
    // slot (where someone lives, works, studies, whom they married) the memory's is the current one.
    let same_person = reading::subject(memory).is_some_and(|about| reading::subject(candidate) == Some(about));
    if same_person && let Some((slot, new, old)) = slots::replaced_value(memory, candidate) {
        let reason = format!(
            "slot rule: both say {} for the same person, and {new} was said after {old} (overlap {overlap:.2})",
            slot.as_str()
        );
        return (Some(LinkKind::Supersedes), 0.8, reason);
    }
    let candidate_words = content_set(candidate);
    let memory_words = content_set(memory);
    if overlap >= INSTANCE_OVERLAP
        && candidate_words.len() < memory_words.len()
        && candidate_words.is_subset(&memory_words)
    {
        let reason =
            format!("instance rule: the candidate's words are a strict subset of the memory's (overlap {overlap:.2})");
        return (Some(LinkKind::InstanceOf), 0.75, reason);
    }
    let states_a_reason = MOTIVATION_MARKERS.iter().any(|marker| contains_phrase(memory, marker));
    if overlap >= MOTIVATION_OVERLAP && states_a_reason {
        let reason = format!("motivation rule: the memory states a reason and shares its topic (overlap {overlap:.2})");
        return (Some(LinkKind::MotivatedBy), 0.72, reason);
    }
    (None, 0.0, format!("no rule matched (overlap {overlap:.2})"))
}

/// When no rule matched: the extractor's word on the pair, taken for the kinds that archive nothing
/// and when the two share a content word (the extractor read them together, which is evidence a
/// topic rule cannot see). A hint of `supersedes` or `invalidated_by` alone never archives a memory;
/// the slot and change rules must find the change in the texts.
fn hinted(memory: &str, candidate: &str, hint: Option<&ExtractorHint>) -> Option<(Option<LinkKind>, f64, String)> {
    let hint = hint?;
    let kind = hint.as_verdict_kind()?;
    if kind.superseded_end().is_some() || different_subjects(memory, candidate).is_some() {
        return None;
    }
    if content_set(memory).is_disjoint(&content_set(candidate)) {
        return None;
    }
    Some((
        Some(kind),
        0.72,
        format!(
            "hint rule: the extractor said \"{}\", and the texts share a word",
            hint.said()
        ),
    ))
}

/// The two people two memories are about, when each opens with a name and the names differ.
fn different_subjects(memory: &str, other: &str) -> Option<(String, String)> {
    let (about, other) = (reading::subject(memory)?, reading::subject(other)?);
    (about != other).then_some((about, other))
}

fn consolidation(task: &ConsolidationTask) -> serde_json::Value {
    let texts: Vec<String> = task
        .memories
        .iter()
        .map(|memory| collapse_whitespace(&memory.text))
        .collect();
    let Some(longest_idx) =
        (0..texts.len()).max_by_key(|&text_idx| (texts[text_idx].chars().count(), usize::MAX - text_idx))
    else {
        return json!({"action": "keep", "reasoning": "merge rule: no memories were given"});
    };
    let longest = &texts[longest_idx];
    let subject = content_words(longest).into_iter().next();
    let shares_subject = |text: &String| {
        different_subjects(text, longest).is_none()
            && (content_words(text).into_iter().next() == subject
                || jaccard(&content_set(text), &content_set(longest)) >= SAME_TOPIC_OVERLAP)
    };
    if texts.len() < 2 || !texts.iter().all(shares_subject) {
        return json!({"action": "keep", "reasoning": "merge rule: the memories do not share a subject"});
    }
    let mut covered = content_set(longest);
    let mut pieces = vec![without_end_punctuation(longest).to_owned()];
    let lead_words: Vec<String> = longest.split_whitespace().map(str::to_lowercase).collect();
    for (text_idx, text) in texts.iter().enumerate() {
        if text_idx == longest_idx {
            continue;
        }
        for clause in clauses(text) {
            let words = content_set(clause);
            if words.is_subset(&covered) {
                continue;
            }
            covered.extend(words);
            pieces.push(without_shared_lead(clause, &lead_words));
        }
    }
    let mut merged = format!("{}.", pieces.join("; "));
    if merged.chars().count() > MAX_MERGED_CHARS {
        merged = merged.chars().take(MAX_MERGED_CHARS).collect();
    }
    json!({
        "action": "merge",
        "text": merged,
        "reasoning": format!("merge rule: {} memories share a subject; the longest is kept with the clauses it does not cover", texts.len()),
    })
}

/// The sentence-level clauses of a text, split at `; `, `. `, `! ` and `? `, without end punctuation.
fn clauses(text: &str) -> Vec<&str> {
    split_after(text, &['.', ';', '!', '?'])
        .into_iter()
        .map(without_end_punctuation)
        .filter(|clause| !clause.is_empty())
        .collect()
}

/// The text cut after each of `terminators` that is followed by whitespace, so "2.5" and "Dr.Smith" stay whole;
/// parts are trimmed and keep their terminator.
fn split_after<'a>(text: &'a str, terminators: &[char]) -> Vec<&'a str> {
    let mut parts = Vec::new();
    let mut start = 0;
    for (at, c) in text.char_indices() {
        let end = at + c.len_utf8();
        if terminators.contains(&c) && text[end..].starts_with(char::is_whitespace) {
            parts.push(text[start..end].trim());
            start = end;
        }
    }
    parts.push(text[start..].trim());
    parts.retain(|part| !part.is_empty());
    parts
}

fn without_end_punctuation(text: &str) -> &str {
    text.trim().trim_end_matches(['.', ';', '!', '?']).trim_end()
}

/// The clause without the words it shares at its start with the kept text ("Caroline likes tea" after
/// "Caroline likes coffee" adds "tea"), so the merged text does not repeat its subject; the whole clause when
/// nothing or everything would be dropped.
fn without_shared_lead(clause: &str, lead_words: &[String]) -> String {
    let words: Vec<&str> = clause.split_whitespace().collect();
    let n_shared = words
        .iter()
        .zip(lead_words)
        .take_while(|(word, lead)| word.to_lowercase() == **lead)
        .count();
    if n_shared == 0 || n_shared == words.len() {
        return clause.to_owned();
    }
    words[n_shared..].join(" ")
}

fn consolidation_review(task: &ReviewTask) -> serde_json::Value {
    let proposal_words = content_set(&task.proposal);
    let mut missing: BTreeSet<String> = BTreeSet::new();
    for memory in &task.memories {
        missing.extend(content_set(&memory.text).difference(&proposal_words).cloned());
    }
    let originals_chars: usize = task.memories.iter().map(|memory| memory.text.chars().count()).sum();
    let proposal_chars = task.proposal.chars().count();
    let (approved, reasoning) = if !missing.is_empty() {
        let missing: Vec<String> = missing.into_iter().collect();
        (
            false,
            format!("review rule: the proposal loses the words {}", missing.join(", ")),
        )
    } else if proposal_chars > originals_chars {
        let reason = format!(
            "review rule: the proposal ({proposal_chars} characters) is longer than the originals together ({originals_chars})"
        );
        (false, reason)
    } else {
        (
            true,
            "review rule: every content word of every original is in the proposal, and it is no longer than them"
                .to_owned(),
        )
    };
    json!({"approved": approved, "reasoning": reasoning})
}

/// What each speaker said about themselves, as the extractor reads it; the first sentences of the first turns when
/// nobody said anything about themselves.
fn summary(task: &SummaryTask) -> serde_json::Value {
    let turns: Vec<Turn> = task
        .turns
        .iter()
        .enumerate()
        .map(|(index, turn)| {
            let role = match turn.speaker.as_str() {
                "assistant" => Role::Assistant,
                "system" => Role::System,
                "tool" => Role::Tool,
                _ => Role::User,
            };
            Turn {
                label: format!("s{index}"),
                role,
                speaker: (role == Role::User && turn.speaker != "user").then(|| turn.speaker.clone()),
                content: turn.text.clone(),
                // The undated reading never looks at the time.
                at: chrono::DateTime::UNIX_EPOCH,
            }
        })
        .collect();
    let statements = reading::statements(&turns);
    if !statements.is_empty() {
        let summary: String = collapse_whitespace(&statements[..statements.len().min(SUMMARY_STATEMENTS)].join(" "))
            .chars()
            .take(SUMMARY_CHARS)
            .collect();
        return json!({"summary": summary});
    }
    let sentences: Vec<&str> = task
        .turns
        .iter()
        .take(SUMMARY_TURNS)
        .map(|turn| first_sentence(&turn.text))
        .filter(|sentence| !sentence.is_empty())
        .collect();
    let summary: String = collapse_whitespace(&sentences.join(" "))
        .chars()
        .take(SUMMARY_CHARS)
        .collect();
    json!({"summary": summary})
}

fn first_sentence(text: &str) -> &str {
    let text = text.trim();
    let end = text
        .char_indices()
        .find(|(at, c)| matches!(c, '.' | '!' | '?') && text[at + c.len_utf8()..].starts_with(char::is_whitespace))
        .map_or(text.len(), |(at, c)| at + c.len_utf8());
    &text[..end]
}

fn extraction_review(task: ExtractionReviewTask) -> serde_json::Value {
    let mut item = task.item;
    item.confidence = item.confidence.min(REVIEW_CONFIDENCE_CAP);
    json!(item)
}

#[cfg(test)]
mod tests {
    use memsift_core::contract::ExtractedItem;
    use memsift_core::status::{Role, Temporal};

    use super::*;
    use crate::consolidation::{
        consolidation_request, parse_consolidation_answer, parse_review_answer, review_request,
    };
    use crate::relationship::{parse_relationship_answer, relationship_request};
    use crate::reviewer::{extraction_review_request, narrow, parse_extraction_review_answer};
    use crate::summary::tests::turn;
    use crate::summary::{parse_summary_answer, summary_request};
    use crate::testing::{memories, prompt};

    #[test]
    fn only_post_processing_requests_are_answered() {
        assert_eq!(offline_answer("<turn label=\"t1\">I live in Lisbon</turn>"), None);
        assert_eq!(offline_answer(r#"{"task":"extraction"}"#), None);
        assert_eq!(
            offline_answer(r#"{"task":"relationship","memory":42}"#),
            None,
            "a malformed request"
        );
    }

    #[test]
    fn relationship_verdicts_round_trip_through_the_parser() {
        let memory = &memories(&["Caroline now lives in Berlin"])[0];
        let candidates = memories(&[
            "Caroline lives in Lisbon",
            "Caroline does not eat meat",
            "Melanie plays the violin",
            "Caroline moved to Berlin in 2023",
        ]);
        let request = relationship_request(&prompt("relationship"), memory, &candidates);
        let answer = offline_answer(&request.user_message).unwrap();
        let verdicts = parse_relationship_answer(&answer, candidates.len()).unwrap();
        let found: Vec<(usize, LinkKind)> = verdicts
            .iter()
            .map(|verdict| (verdict.candidate, verdict.kind))
            .collect();
        assert_eq!(found, [(0, LinkKind::Supersedes)], "{answer}");
        assert!(verdicts[0].reasoning.contains("supersede rule"));
    }

    #[test]
    fn each_relationship_rule_fires_on_its_own_case() {
        let cases = [
            (
                "Caroline no longer eats meat",
                "Caroline eats meat",
                Some(LinkKind::Conflicts),
            ),
            (
                "Caroline switched to a vegan diet",
                "Caroline follows a vegan diet",
                Some(LinkKind::Supersedes),
            ),
            (
                "Caroline follows a vegan diet",
                "Caroline switched to a vegan diet",
                Some(LinkKind::InvalidatedBy),
            ),
            (
                "Caroline ran the Berlin marathon in 2023",
                "Caroline ran a marathon",
                Some(LinkKind::InstanceOf),
            ),
            (
                "Caroline adopted a dog because she loves animals",
                "Caroline loves animals",
                Some(LinkKind::InstanceOf),
            ),
            (
                "Caroline volunteers at the shelter because she loves dogs",
                "Caroline loves walking dogs",
                Some(LinkKind::MotivatedBy),
            ),
            ("Caroline plays chess", "Melanie paints landscapes", None),
            (
                "Caroline plays chess on Sundays",
                "Melanie plays chess on Sundays",
                None,
            ),
            ("Caroline now lives in Berlin", "Melanie lives in Berlin", None),
            (
                "Caroline went to a support group on 7 May 2023",
                "Caroline went to a support group on 3 July 2023",
                None,
            ),
        ];
        for (memory, candidate, expected) in cases {
            let (kind, confidence, reasoning) = classify(memory, candidate);
            assert_eq!(kind, expected, "{memory} / {candidate}: {reasoning}");
            assert_eq!(kind.is_some(), confidence >= 0.7, "{reasoning}");
        }
    }

    #[test]
    fn a_merge_of_a_shared_subject_round_trips_and_passes_the_review() {
        let cluster = memories(&[
            "Caroline likes green tea.",
            "Caroline likes green tea and jasmine tea in the morning.",
        ]);
        let request = consolidation_request(&prompt("consolidation"), &cluster);
        let proposal = parse_consolidation_answer(&offline_answer(&request.user_message).unwrap())
            .unwrap()
            .expect("a shared subject is merged");
        assert_eq!(
            proposal.text,
            "Caroline likes green tea and jasmine tea in the morning."
        );
        let review = review_request(&prompt("consolidation_review"), &cluster, &proposal.text);
        let verdict = parse_review_answer(&offline_answer(&review.user_message).unwrap()).unwrap();
        assert!(verdict.approved, "{}", verdict.reasoning);
    }

    #[test]
    fn a_merge_keeps_the_clauses_the_longest_text_lacks() {
        let cluster = memories(&[
            "Caroline moved to Berlin in 2023.",
            "Caroline moved to Berlin for a job at Siemens.",
        ]);
        let request = consolidation_request(&prompt("consolidation"), &cluster);
        let proposal = parse_consolidation_answer(&offline_answer(&request.user_message).unwrap())
            .unwrap()
            .unwrap();
        assert_eq!(proposal.text, "Caroline moved to Berlin for a job at Siemens; in 2023.");
        let review = review_request(&prompt("consolidation_review"), &cluster, &proposal.text);
        assert!(
            parse_review_answer(&offline_answer(&review.user_message).unwrap())
                .unwrap()
                .approved
        );
    }

    #[test]
    fn unrelated_memories_are_kept_apart() {
        for texts in [
            ["Caroline plays chess on Sundays.", "Melanie paints landscapes."],
            ["Caroline likes green tea.", "Melanie likes green tea."],
        ] {
            let cluster = memories(&texts);
            let request = consolidation_request(&prompt("consolidation"), &cluster);
            assert_eq!(
                parse_consolidation_answer(&offline_answer(&request.user_message).unwrap()),
                Ok(None),
                "{texts:?}"
            );
        }
    }

    #[test]
    fn the_review_names_the_words_a_proposal_lost_and_refuses_padding() {
        let cluster = memories(&["Caroline likes green tea.", "Caroline drinks tea every morning."]);
        let lossy = review_request(&prompt("consolidation_review"), &cluster, "Caroline likes tea.");
        let verdict = parse_review_answer(&offline_answer(&lossy.user_message).unwrap()).unwrap();
        assert!(!verdict.approved);
        assert!(
            verdict.reasoning.contains("green") && verdict.reasoning.contains("morning"),
            "{}",
            verdict.reasoning
        );
        let all_texts: Vec<&str> = cluster.iter().map(|memory| memory.text.as_str()).collect();
        let padded_text = format!("{} {}", all_texts.join(" "), "x".repeat(80));
        let padded = review_request(&prompt("consolidation_review"), &cluster, &padded_text);
        assert!(
            !parse_review_answer(&offline_answer(&padded.user_message).unwrap())
                .unwrap()
                .approved
        );
    }

    #[test]
    fn a_summary_is_the_first_sentence_of_the_first_turns() {
        let turns = [
            turn(
                Role::User,
                Some("Caroline"),
                "I adopted a dog last week! His name is Max.",
            ),
            turn(Role::User, Some("Melanie"), "That is wonderful. What breed?"),
            turn(Role::User, Some("Caroline"), "A beagle mix from the shelter"),
            turn(Role::User, Some("Melanie"), "Fourth turn is not read."),
        ];
        let request = summary_request(&prompt("summary"), &turns);
        let summary = parse_summary_answer(&offline_answer(&request.user_message).unwrap()).unwrap();
        assert_eq!(
            summary, "Caroline adopted a dog last week.",
            "what the speakers said about themselves"
        );
        let chit_chat = [
            turn(Role::User, Some("Caroline"), "Hi! How are you?"),
            turn(Role::User, Some("Melanie"), "Good, thanks. You?"),
        ];
        let request = summary_request(&prompt("summary"), &chit_chat);
        let summary = parse_summary_answer(&offline_answer(&request.user_message).unwrap()).unwrap();
        assert_eq!(summary, "Hi! Good, thanks.", "no statements: the first sentences");
        let long = [turn(Role::User, None, &"word ".repeat(200))];
        let request = summary_request(&prompt("summary"), &long);
        let summary = parse_summary_answer(&offline_answer(&request.user_message).unwrap()).unwrap();
        assert!(summary.chars().count() <= SUMMARY_CHARS);
    }

    #[test]
    fn the_extraction_review_caps_confidence_and_narrowing_keeps_the_item() {
        let mut item = ExtractedItem::new(
            "Caroline is allergic to peanuts",
            Temporal::Durable,
            vec!["t1".to_owned()],
        );
        item.confidence = 0.97;
        item.expires_at = Some("2025-01-01".to_owned());
        let request = extraction_review_request(&prompt("extraction_review"), &item);
        let reviewed = parse_extraction_review_answer(&offline_answer(&request.user_message).unwrap()).unwrap();
        assert_eq!(reviewed.confidence, REVIEW_CONFIDENCE_CAP);
        let narrowed = narrow(&item, &reviewed);
        assert_eq!(narrowed.text, item.text);
        assert_eq!(narrowed.expires_at, item.expires_at);
        assert_eq!(narrowed.confidence, REVIEW_CONFIDENCE_CAP);
    }

    proptest::proptest! {
        /// Whatever kind the extractor gave, in either direction: the request carries it, the
        /// offline judge reads it back, a verdict it leads to is that kind read from the memory's
        /// side, and a hint alone never marks a memory superseded.
        #[test]
        fn the_extractors_kind_and_direction_reach_the_judge_which_never_archives_on_a_hint_alone(
            kind in 0..LinkKind::ALL.len(),
            from_memory in proptest::bool::ANY,
        ) {
            let hint = ExtractorHint { kind: LinkKind::ALL[kind], from_memory };
            let pair = memories(&["Ana took up running for her health.", "Ana wants to stay healthy and running helps."]);
            let request = crate::relationship::relationship_request_with_hints(&prompt("relationship"), &pair[0], &pair[1..], &[Some(hint.clone())]);
            let task: RelationshipTask = serde_json::from_str(&request.user_message).unwrap();
            let said = task.candidates[0].extractor_said.as_deref().unwrap();
            proptest::prop_assert_eq!(ExtractorHint::read(said), Some(hint.clone()));
            let answer = offline_answer(&request.user_message).unwrap();
            let verdicts = parse_relationship_answer(&answer, 1).unwrap();
            for verdict in &verdicts {
                proptest::prop_assert!(verdict.kind.superseded_end().is_none(), "{verdict:?} from {said}");
                if verdict.reasoning.starts_with("hint rule") {
                    proptest::prop_assert_eq!(Some(verdict.kind), hint.as_verdict_kind());
                }
            }
            // What archives nothing is confirmed when nothing else matched; what would is not.
            let expected = hint.as_verdict_kind().filter(|kind| kind.superseded_end().is_none());
            proptest::prop_assert_eq!(verdicts.first().map(|verdict| verdict.kind), expected, "{}", said);
        }
    }
}
