//! Post-processing cases: links, consolidation, refinement, entity GC and summaries, each
//! journaled and undone to the exact prior rows; several pin a bug of the reference pipeline
//! (docs/design.md, section 12) that ours must not have. One module per kind of stage write;
//! this one holds what they share: an answered stage request and the small values they pass.

use memsift_core::status::{Lane, Purpose};
use memsift_core::{MemoryId, RequestId, SegmentId, UserId};
use memsift_store::{LinkEnd, NewLink, NewRequest, RequestUsage, RunCap, StageApplied, StageOutcome, Store};
use serde_json::Value;

use crate::helpers::t0;

mod consolidation;
mod entities;
mod links;
mod refinement;
mod reviews;
mod summaries;
mod verdicts;

pub use consolidation::*;
pub use entities::*;
pub use links::*;
pub use refinement::*;
pub use reviews::*;
pub use summaries::*;
pub use verdicts::*;

/// A stage request of `purpose` about `subject`, answered with `raw` (status `succeeded`).
async fn answered(
    store: &Store,
    user_id: UserId,
    purpose: Purpose,
    subject: Value,
    context: Value,
    raw: &str,
) -> RequestId {
    let request = NewRequest {
        id: RequestId::new_v7(),
        purpose,
        user_id,
        segment_id: subject
            .get("segment_id")
            .and_then(Value::as_str)
            .map(|id| SegmentId::parse(id).unwrap()),
        chunk_index: 0,
        lane: Lane::Heuristic,
        config_key: format!("{}_standard", purpose.as_str()),
        provider: "heuristic".to_owned(),
        model: None,
        prompt_version: "offline-judge@1".to_owned(),
        // Written as JSON the way stages write them, read through the typed contract.
        context: serde_json::from_value(context).unwrap(),
        request_body: Default::default(),
        subject: serde_json::from_value(subject).unwrap(),
        parent_request_id: None,
        reserved_usd: 0.0,
        max_output_tokens: None,
    };
    store
        .stages()
        .plan_stage_requests(std::slice::from_ref(&request), &memsift_store::Covered::default(), t0())
        .await
        .unwrap();
    assert!(
        store
            .requests()
            .record_answer(request.id, raw, None, &RequestUsage::default(), t0())
            .await
            .unwrap()
    );
    request.id
}

fn cap(n: i64) -> RunCap {
    RunCap {
        run: RequestId::new_v7().to_string(),
        cap: n,
    }
}

fn applied(outcome: StageOutcome) -> StageApplied {
    match outcome {
        StageOutcome::Applied(applied) => applied,
        StageOutcome::AlreadyApplied => panic!("expected a first apply"),
    }
}

/// A link of `kind`; with `archives`, the end the kind names (`supersedes`: the target,
/// `invalidated_by`: the source) is marked superseded, as the relationship stage does.
fn link(source: MemoryId, target: MemoryId, kind: &str, archives: bool) -> NewLink {
    let superseded = match kind {
        "supersedes" if archives => Some(LinkEnd::Target),
        "invalidated_by" if archives => Some(LinkEnd::Source),
        _ => None,
    };
    NewLink {
        source,
        target,
        kind: kind.to_owned(),
        confidence: 0.9,
        reasoning: format!("{kind} by test"),
        superseded,
    }
}

async fn active_texts(store: &Store, user: &str) -> Vec<String> {
    let mut texts: Vec<String> = store
        .listing()
        .list_memories(user, None)
        .await
        .unwrap()
        .into_iter()
        .map(|row| row.text)
        .collect();
    texts.sort();
    texts
}
