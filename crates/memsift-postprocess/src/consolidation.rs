//! Consolidation: pick clusters of near-duplicate memories, ask for one merged text, and have it reviewed.
//!
//! Merging is the stage that can lose facts, so it has two independent steps: a proposal, then a review of the
//! proposal against the originals by a separate request (another prompt, possibly another model).

use std::collections::{HashMap, HashSet};

use memsift_core::MemoryId;
use memsift_core::prompt::Prompt;
use memsift_core::status::Purpose;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::answer::{action, boolean, optional_text, read_object, required_text};
use crate::{AnswerError, LabelledText, MemoryText, StageRequest, labelled};

/// Members must be at least this similar: only near-duplicates are merged, since a merge of merely related facts
/// reads as one muddled memory.
pub const CLUSTER_MIN_COSINE: f32 = 0.88;

/// A cluster needs two members to be a merge.
pub const CLUSTER_MIN: usize = 2;

/// More than five texts make the merged text long and the review unreliable.
pub const CLUSTER_MAX: usize = 5;

/// The longest merged text accepted, in characters.
const MAX_MERGED_CHARS: usize = 1000;

/// The label prefix of cluster members (`m1`, `m2`…).
const MEMBER_PREFIX: char = 'm';

/// Groups memories into disjoint clusters of near-duplicates, hubs first.
///
/// `seeds` are in hub order (most important or most linked first); `neighbours` holds, per memory, its nearest
/// memories with their cosine. For each seed not yet used, the members are the seed and its neighbours at or above
/// [`CLUSTER_MIN_COSINE`], best first, not used by an earlier cluster, and, where `neighbours` knows the cosine
/// between a newcomer and an already chosen member (in either direction), at or above the threshold to it too:
/// so a cluster is not a chain of pairs drifting away from its seed. At most [`CLUSTER_MAX`] members; clusters of
/// fewer than [`CLUSTER_MIN`] are not kept. Ties in cosine are broken by id, so the result is deterministic.
pub fn pick_clusters(seeds: &[MemoryId], neighbours: &HashMap<MemoryId, Vec<(MemoryId, f32)>>) -> Vec<Vec<MemoryId>> {
    let mut used: HashSet<MemoryId> = HashSet::new();
    let mut clusters = Vec::new();
    for seed in seeds {
        if used.contains(seed) {
            continue;
        }
        let mut options: Vec<(MemoryId, f32)> = neighbours
            .get(seed)
            .map(|near| {
                near.iter()
                    .copied()
                    .filter(|(id, cosine)| id != seed && *cosine >= CLUSTER_MIN_COSINE && !used.contains(id))
                    .collect()
            })
            .unwrap_or_default();
        options.sort_by(|(a_id, a_cosine), (b_id, b_cosine)| b_cosine.total_cmp(a_cosine).then(a_id.cmp(b_id)));
        let mut members = vec![*seed];
        for (option, _) in options {
            if members.len() == CLUSTER_MAX {
                break;
            }
            let close_to_every_member = members.iter().all(|member| {
                member == seed || known_cosine(neighbours, option, *member).is_none_or(|c| c >= CLUSTER_MIN_COSINE)
            });
            if !members.contains(&option) && close_to_every_member {
                members.push(option);
            }
        }
        if members.len() >= CLUSTER_MIN {
            used.extend(members.iter().copied());
            clusters.push(members);
        }
    }
    clusters
}

/// The cosine between two memories if either lists the other as a neighbour (the lower, if both do and differ).
fn known_cosine(neighbours: &HashMap<MemoryId, Vec<(MemoryId, f32)>>, a: MemoryId, b: MemoryId) -> Option<f32> {
    let listed = |from: MemoryId, to: MemoryId| {
        neighbours
            .get(&from)
            .and_then(|near| near.iter().find(|(id, _)| *id == to).map(|(_, cosine)| *cosine))
    };
    match (listed(a, b), listed(b, a)) {
        (Some(x), Some(y)) => Some(x.min(y)),
        (one, other) => one.or(other),
    }
}

/// A proposed merged memory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Proposal {
    /// The merged text, whitespace-collapsed, 1 to 1000 characters.
    pub text: String,
    /// Why the model merged them.
    pub reasoning: String,
}

/// The user message of a consolidation request.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct ConsolidationTask {
    pub(crate) task: String,
    pub(crate) memories: Vec<LabelledText>,
}

/// The user message of a consolidation review request.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct ReviewTask {
    pub(crate) task: String,
    pub(crate) memories: Vec<LabelledText>,
    pub(crate) proposal: String,
}

/// One request asking whether the cluster's memories (labelled `m1`, `m2`…) should become one, and as what text.
pub fn consolidation_request(prompt: &Prompt, cluster: &[MemoryText]) -> StageRequest {
    StageRequest::new(
        prompt,
        &ConsolidationTask {
            task: Purpose::Consolidation.as_str().to_owned(),
            memories: labelled(MEMBER_PREFIX, cluster),
        },
    )
}

/// Reads `{"action":"merge","text":"…","reasoning":"…"}` as a proposal and `{"action":"keep",…}` as `None`.
///
/// A cut-off answer is refused: its text may end mid-fact.
pub fn parse_consolidation_answer(raw: &str) -> Result<Option<Proposal>, AnswerError> {
    let object = read_object(raw, true)?;
    match action(&object)?.as_str() {
        "keep" => Ok(None),
        "merge" => {
            let text = required_text(&object, "text")?;
            let n_chars = text.chars().count();
            if n_chars == 0 || n_chars > MAX_MERGED_CHARS {
                return Err(AnswerError::Invalid(format!(
                    "a merged text must have 1 to {MAX_MERGED_CHARS} characters, this one has {n_chars}"
                )));
            }
            Ok(Some(Proposal {
                text,
                reasoning: optional_text(&object, "reasoning"),
            }))
        }
        other => Err(AnswerError::Invalid(format!(
            "unknown consolidation action `{other}`: expected merge or keep"
        ))),
    }
}

/// The verdict of an independent review of a proposal.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Review {
    /// Whether the proposal may replace the originals.
    pub approved: bool,
    /// Why, e.g. which fact the proposal lost.
    pub reasoning: String,
}

/// One request asking a reviewer whether `proposal` keeps every fact of the cluster and adds none.
pub fn review_request(prompt: &Prompt, cluster: &[MemoryText], proposal: &str) -> StageRequest {
    StageRequest::new(
        prompt,
        &ReviewTask {
            task: Purpose::ConsolidationReview.as_str().to_owned(),
            memories: labelled(MEMBER_PREFIX, cluster),
            proposal: proposal.to_owned(),
        },
    )
}

/// Reads `{"approved":true|false,"reasoning":"…"}`. A missing or unreadable `approved` is an error, never a
/// silent approval.
pub fn parse_review_answer(raw: &str) -> Result<Review, AnswerError> {
    let object = read_object(raw, false)?;
    let approved = match object.get("approved") {
        None | Some(Value::Null) => return Err(AnswerError::MissingField { field: "approved" }),
        Some(value) => boolean(value)
            .ok_or_else(|| AnswerError::Invalid(format!("`approved` should be true or false, not {value}")))?,
    };
    Ok(Review {
        approved,
        reasoning: optional_text(&object, "reasoning"),
    })
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::testing::{memories, prompt};

    fn ids(n: usize) -> Vec<MemoryId> {
        let mut ids: Vec<MemoryId> = (0..n).map(|_| MemoryId::new_v7()).collect();
        ids.sort();
        ids
    }

    #[test]
    fn a_seed_takes_its_closest_neighbours_up_to_the_cap() {
        let id = ids(8);
        let near: Vec<(MemoryId, f32)> = (1..8).map(|i| (id[i], 0.99 - i as f32 * 0.01)).collect();
        let neighbours = HashMap::from([(id[0], near)]);
        let clusters = pick_clusters(&[id[0]], &neighbours);
        assert_eq!(clusters, [vec![id[0], id[1], id[2], id[3], id[4]]]);
    }

    #[test]
    fn neighbours_under_the_threshold_or_far_from_a_member_stay_out() {
        let id = ids(4);
        let neighbours = HashMap::from([
            (id[0], vec![(id[1], 0.95), (id[2], 0.90), (id[3], 0.87)]),
            // id[2] is close to the seed but known to be far from id[1], which joined first.
            (id[2], vec![(id[1], 0.70)]),
        ]);
        assert_eq!(pick_clusters(&[id[0]], &neighbours), [vec![id[0], id[1]]]);
        let lonely = HashMap::from([(id[0], vec![(id[3], 0.87)])]);
        assert!(
            pick_clusters(&[id[0]], &lonely).is_empty(),
            "a one-member cluster is not kept"
        );
    }

    #[test]
    fn a_later_seed_cannot_take_members_of_an_earlier_cluster() {
        let id = ids(4);
        let neighbours = HashMap::from([
            (id[0], vec![(id[1], 0.95)]),
            (id[2], vec![(id[1], 0.99), (id[3], 0.90)]),
            (id[1], vec![(id[0], 0.95)]),
        ]);
        let clusters = pick_clusters(&[id[0], id[1], id[2]], &neighbours);
        assert_eq!(clusters, [vec![id[0], id[1]], vec![id[2], id[3]]]);
    }

    proptest! {
        #[test]
        fn clusters_never_overlap_and_respect_size_and_threshold(
            edges in proptest::collection::vec((0usize..12, 0usize..12, 0.80f32..1.0), 0..60),
            seed_order in Just((0usize..12).collect::<Vec<_>>()).prop_shuffle(),
        ) {
            let id = ids(12);
            let mut neighbours: HashMap<MemoryId, Vec<(MemoryId, f32)>> = HashMap::new();
            for (from, to, cosine) in &edges {
                neighbours.entry(id[*from]).or_default().push((id[*to], *cosine));
            }
            let seeds: Vec<MemoryId> = seed_order.iter().map(|i| id[*i]).collect();
            let clusters = pick_clusters(&seeds, &neighbours);
            prop_assert_eq!(&clusters, &pick_clusters(&seeds, &neighbours), "deterministic");
            let mut seen = HashSet::new();
            for cluster in &clusters {
                prop_assert!((CLUSTER_MIN..=CLUSTER_MAX).contains(&cluster.len()));
                for member in cluster {
                    prop_assert!(seen.insert(*member), "{member} is in two clusters");
                }
                for member in &cluster[1..] {
                    let from_seed = neighbours[&cluster[0]].iter().any(|(to, cosine)| to == member && *cosine >= CLUSTER_MIN_COSINE);
                    prop_assert!(from_seed, "every member is a close neighbour of its seed");
                    for other in &cluster[1..] {
                        if other != member {
                            prop_assert!(known_cosine(&neighbours, *member, *other).is_none_or(|c| c >= CLUSTER_MIN_COSINE));
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn requests_show_labelled_members_and_the_proposal() {
        let cluster = memories(&["Caroline likes tea", "Caroline likes green tea"]);
        let request = consolidation_request(&prompt("consolidation"), &cluster);
        assert!(
            request
                .user_message
                .starts_with(r#"{"task":"consolidation","memories":[{"id":"m1""#)
        );
        let review = review_request(&prompt("consolidation_review"), &cluster, "Caroline likes green tea");
        assert!(review.user_message.starts_with(r#"{"task":"consolidation_review""#));
        assert!(
            review
                .user_message
                .ends_with(r#""proposal":"Caroline likes green tea"}"#)
        );
    }

    #[test]
    fn merge_and_keep_answers_are_read_and_bad_ones_refused() {
        let merged = parse_consolidation_answer(
            "```json\n{\"action\": \"merge\", \"text\": \"Caroline  likes\\n green tea\", \"reasoning\": \"same\",}\n```",
        )
        .unwrap()
        .unwrap();
        assert_eq!(merged.text, "Caroline likes green tea");
        assert_eq!(
            parse_consolidation_answer(r#"{"action":"keep","reasoning":"different"}"#),
            Ok(None)
        );
        assert_eq!(
            parse_consolidation_answer(r#"{"action":"merge"}"#),
            Err(AnswerError::MissingField { field: "text" })
        );
        assert!(parse_consolidation_answer(r#"{"action":"merge","text":"   "}"#).is_err());
        let too_long = format!(r#"{{"action":"merge","text":"{}"}}"#, "a".repeat(1001));
        assert!(parse_consolidation_answer(&too_long).is_err());
        assert!(
            parse_consolidation_answer(r#"{"action":"split"}"#)
                .unwrap_err()
                .to_string()
                .contains("split")
        );
    }

    #[test]
    fn review_answers_need_an_explicit_approval() {
        let review = parse_review_answer("Verdict: {\"approved\": false, \"reasoning\": \"lost 'green'\"}").unwrap();
        assert!(!review.approved);
        assert_eq!(review.reasoning, "lost 'green'");
        assert!(parse_review_answer(r#"{"approved":"yes"}"#).unwrap().approved);
        assert_eq!(
            parse_review_answer(r#"{"reasoning":"fine"}"#),
            Err(AnswerError::MissingField { field: "approved" })
        );
        assert!(parse_review_answer(r#"{"approved":"maybe"}"#).is_err());
    }
}
