//! Post-processing writes: what each stage's answer changes, one transaction per answer.
//!
//! Every change to memories, links or entity joins is one transaction that also writes the exact
//! rows it is about to change into `operations` (see `journal`), so `undo_operation` puts those
//! rows back. One run of a stage changes at most `cap` of a user's memories: the run id and its cap
//! travel in each request's `subject`, and an apply that would pass the cap writes nothing but a
//! note. Every answer ends `applied`, with a note when it changed nothing, so no verdict is left
//! `succeeded` to be picked up again.

mod entities;
mod links;
mod plan;
mod replace;
mod summaries;

use chrono::{DateTime, Utc};
use memsift_core::{MemoryId, OperationId, RequestId, UserId};
use serde::Serialize;

use crate::Result;
use crate::handles::Stages;
use crate::tx::sql;

/// A memory as a stage plans with it.
#[derive(Clone, Debug, PartialEq)]
pub struct StageMemory {
    /// Its id.
    pub id: MemoryId,
    /// Its text.
    pub text: String,
    /// Memories the extractor said it relates to, each with the kind it gave.
    pub link_hints: Vec<LinkHint>,
}

/// One memory the extractor said another relates to, read as "<the memory> <kind> <memory_id>".
#[derive(Clone, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct LinkHint {
    /// The memory pointed at.
    pub memory_id: MemoryId,
    /// The extractor's `relationship_type`, when it gave one (none for a merge hint).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
}

/// `memories.link_hints` as stored: typed hints, or bare ids as written before kinds were kept.
#[derive(serde::Deserialize)]
#[serde(untagged)]
enum StoredHint {
    Typed(LinkHint),
    Bare(MemoryId),
}

/// Reads `memories.link_hints`; hints are advice, so one that does not read is skipped.
pub(crate) fn read_link_hints(value: serde_json::Value) -> Vec<LinkHint> {
    let serde_json::Value::Array(values) = value else {
        return Vec::new();
    };
    values
        .into_iter()
        .filter_map(|value| serde_json::from_value::<StoredHint>(value).ok())
        .map(|hint| match hint {
            StoredHint::Typed(hint) => hint,
            StoredHint::Bare(memory_id) => LinkHint { memory_id, kind: None },
        })
        .collect()
}

/// An entity as entity GC sees it.
#[derive(Clone, Debug, PartialEq, sqlx::FromRow)]
pub struct EntityRow {
    /// Its id.
    pub id: String,
    /// The name as first written.
    pub name: String,
    /// Its kind.
    pub kind: String,
    /// Memories joined to it.
    pub link_count: i64,
}

/// A link a relationship answer asks for: `source <kind> target`.
#[derive(Clone, Debug, PartialEq)]
pub struct NewLink {
    /// The classified memory.
    pub source: MemoryId,
    /// The candidate it was compared with.
    pub target: MemoryId,
    /// `conflicts`, `supersedes`, `causes`, `instance_of`, `invalidated_by` or `motivated_by`.
    pub kind: String,
    /// The classifier's confidence (callers keep only ≥ 0.7).
    pub confidence: f64,
    /// Why.
    pub reasoning: String,
    /// The end the link's kind says is no longer current (`supersedes` marks the target,
    /// `invalidated_by` the source), archived with `superseded_by` pointing at the other end;
    /// `None` for kinds that archive nothing. The kind decides, not the memories' ages: a
    /// memory said later can be the stale one ("Noah now lives in Porto" said before "Noah
    /// moved back to Lisbon").
    pub superseded: Option<LinkEnd>,
}

/// One end of a link.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinkEnd {
    /// The classified memory.
    Source,
    /// The candidate it was compared with.
    Target,
}

/// The most memories of a user's `active` that one run may change when it may change `share` of
/// them: the share rounded up, so a user with any memory gets at least one change per run (a floor
/// gave a user with fewer than 1 / share memories none, ever). The epsilon keeps a product that
/// is whole but for floating-point noise (0.07 × 100 = 7.000000000000001) from rounding up past it.
pub fn share_cap(share: f64, active: usize) -> usize {
    if active == 0 || share <= 0.0 {
        return 0;
    }
    let exact = share * active as f64;
    ((exact - 1e-9).ceil().max(0.0) as usize).min(active)
}

/// Where one run of a stage stands against its cap.
#[derive(Clone, Debug, PartialEq)]
pub struct RunCap {
    /// The run's id (in every request's `subject.run`).
    pub run: String,
    /// Memories the run may change at most.
    pub cap: i64,
}

impl RunCap {
    /// The subject every request of this run starts from: the run and its cap.
    pub fn subject(&self) -> memsift_core::request::RequestSubject {
        memsift_core::request::RequestSubject {
            run: Some(self.run.clone()),
            cap: Some(self.cap),
            ..memsift_core::request::RequestSubject::default()
        }
    }
}

/// Memories replaced by new ones: a consolidation (several into one) or a refinement (one into
/// one or more).
#[derive(Clone, Debug)]
pub struct Replacement {
    /// The answered request.
    pub request_id: RequestId,
    /// Whose memories.
    pub user_id: UserId,
    /// The memories replaced; each must still be active.
    pub originals: Vec<MemoryId>,
    /// The texts that replace them.
    pub new_texts: Vec<String>,
    /// One vector per new text, and the model that made them.
    pub embeddings: Option<(String, Vec<Vec<f32>>)>,
    /// `consolidate` or `refine` (the journal's kind).
    pub kind: &'static str,
    /// Why (the model's reasoning), kept in the journal and the archive reason.
    pub reason: String,
    /// The run and its cap.
    pub cap: RunCap,
    /// The clock reading.
    pub now: DateTime<Utc>,
    /// The extraction reviewer's narrowing: the new memory takes this confidence and expiry
    /// rather than the originals' (a review that shortens a text and lowers its confidence or
    /// brings its expiry forward means all three). `None` for consolidation and refinement.
    pub narrowed: Option<Narrowed>,
}

/// The confidence and expiry a reviewer's narrowing gives a memory.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Narrowed {
    /// The lower of the original's and the reviewer's.
    pub confidence: f64,
    /// The earlier of the two (the reviewer's when the original had none).
    pub expires_at: Option<DateTime<Utc>>,
}

/// Memories a batch of planned stage requests covers.
#[derive(Clone, Copy, Debug, Default)]
pub struct Covered<'a> {
    /// Classified by relationship classification (whether or not a request was needed).
    pub related: &'a [MemoryId],
    /// Reviewed by the extraction reviewer.
    pub reviewed: &'a [MemoryId],
}

/// A memory as the extraction reviewer sees it.
#[derive(Clone, Debug, PartialEq, sqlx::FromRow)]
pub struct ReviewMemory {
    /// Its id.
    pub id: String,
    /// Its user.
    pub user_id: String,
    /// Its text.
    pub text: String,
    /// Confidence.
    pub confidence: f64,
    /// When the event happens.
    pub happens_at: Option<DateTime<Utc>>,
    /// When it stops being true.
    pub expires_at: Option<DateTime<Utc>>,
    /// How long it holds.
    pub temporal: String,
}

/// What entity GC decided for one entity.
#[derive(Clone, Debug, PartialEq)]
pub enum EntityDecision {
    /// Move its joins to `target` (validated: same user and kind, active, one of `candidates`).
    Merge {
        /// The entity that stays.
        target: String,
        /// The ids the request offered.
        candidates: Vec<String>,
    },
    /// Remove its joins and archive it.
    Delete,
    /// Nothing.
    Keep,
}

/// What applying one stage answer did.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct StageApplied {
    /// Links written.
    pub n_links: u64,
    /// Memories written.
    pub n_memories_created: u64,
    /// Memories archived (superseded, consolidated, refined).
    pub n_memories_archived: u64,
    /// Entities merged or deleted.
    pub n_entities_changed: u64,
    /// The journal row, when something changed.
    pub operation_id: Option<OperationId>,
    /// Why nothing changed, when nothing did (`keep`, cap reached, a member archived since, …).
    pub note: Option<String>,
}

/// The outcome of a stage apply.
#[derive(Clone, Debug, PartialEq)]
pub enum StageOutcome {
    /// Written now.
    Applied(StageApplied),
    /// An earlier apply wrote it; nothing was written.
    AlreadyApplied,
}

/// A consolidation proposal waiting for its independent review.
#[derive(Clone, Debug)]
pub struct ProposalToReview {
    /// The proposal request.
    pub request_id: RequestId,
    /// Whose memories.
    pub user_id: UserId,
    /// Its subject (members, run, cap).
    pub subject: memsift_core::request::RequestSubject,
    /// The proposal answer.
    pub raw_output: String,
}

/// Refinement eligibility (defaults, kept from the reference pipeline:
/// 70 characters, 7 days, 3 reads, a 30-day cooldown, 3 rejections).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RefinementRules {
    /// Longer than this many characters.
    pub min_chars: i64,
    /// At least this old.
    pub min_age_days: i64,
    /// Read at least this many times.
    pub min_reads: i64,
    /// Not refined (or rejected) within this many days.
    pub cooldown_days: i64,
    /// Fewer rejections than this.
    pub max_rejections: i64,
}

impl Stages<'_> {
    /// Marks an answer applied that changes nothing (`keep`, `none`, a rejected review, an
    /// invalid answer, a proposal waiting for review), with `note` saying why; `n_items` is 1 for
    /// a proposal that goes on to review, else 0.
    pub async fn apply_without_change(
        self,
        request_id: RequestId,
        n_items: usize,
        note: Option<&str>,
        now: DateTime<Utc>,
    ) -> Result<StageOutcome> {
        self.write(async |tx| tx.settle_without_change(request_id, n_items, note, now).await)
            .await
    }

    /// [`Stages::apply_without_change`] for an answer that keeps its cluster as it is: the
    /// verdict is recorded on the request, and [`Stages::kept_clusters`] reads it back, so the
    /// same set of memories is not proposed again until one of them changes.
    pub async fn apply_kept(self, request_id: RequestId, note: &str, now: DateTime<Utc>) -> Result<StageOutcome> {
        self.write(async |tx| {
            let outcome = tx.settle_without_change(request_id, 0, Some(note), now).await?;
            if matches!(outcome, StageOutcome::Applied(_)) {
                tx.execute(sql!(
                    "UPDATE llm_requests SET verdict = $2 WHERE id = $1",
                    request_id,
                    KEPT_VERDICT
                ))
                .await?;
            }
            Ok(outcome)
        })
        .await
    }
}

/// `llm_requests.verdict` of an answer that kept its set of memories as it was.
pub(crate) const KEPT_VERDICT: &str = "keep";

impl crate::tx::WriteTx {
    /// Claims the answer with `note` and reports that nothing changed; an answer an earlier
    /// apply already wrote is `AlreadyApplied`.
    pub(crate) async fn settle_without_change(
        &mut self,
        request_id: RequestId,
        n_items: usize,
        note: Option<&str>,
        now: DateTime<Utc>,
    ) -> Result<StageOutcome> {
        if !self.claim_answer(request_id, n_items, note, now).await? {
            self.unclaimed(request_id).await?;
            return Ok(StageOutcome::AlreadyApplied);
        }
        Ok(StageOutcome::Applied(StageApplied {
            note: note.map(str::to_owned),
            ..StageApplied::default()
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::share_cap;

    #[test]
    fn a_user_with_any_memory_gets_at_least_one_change_per_run() {
        for active in 1..20 {
            assert_eq!(share_cap(0.05, active), 1, "{active} memories");
        }
        // Whole products stay whole, however the floating point lands.
        assert_eq!(share_cap(0.05, 20), 1);
        assert_eq!(share_cap(0.05, 40), 2);
        assert_eq!(share_cap(0.1, 30), 3);
        assert_eq!(share_cap(0.05, 21), 2);
        assert_eq!(share_cap(0.05, 44), 3);
        assert_eq!(share_cap(0.07, 100), 7, "0.07 × 100 is 7.000000000000001 in f64");
        assert_eq!(share_cap(0.29, 100), 29, "0.29 × 100 is 28.999999999999996 in f64");
        // Nothing to change, or nothing allowed.
        assert_eq!(share_cap(0.05, 0), 0);
        assert_eq!(share_cap(0.0, 10), 0);
        assert_eq!(share_cap(1.0, 7), 7);
    }
}
