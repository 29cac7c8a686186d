//! What every apply reads and writes through, and what it returns: shared by the extraction
//! apply (`apply`) and the post-processing stages' apply (`stages`), so neither depends on the other.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use memsift_core::{Clock, MemoryId};
use memsift_processor::ProcessOutput;
use memsift_store::{ContinuationPlan, Store, StoredOutput};

use crate::embedding::Vectors;

/// Whether a failure is the environment's (the database unreachable or busy, the embedder
/// missing or failing) rather than the item's. Such a failure must never spend an item's
/// attempts: the same item succeeds once the environment is back.
pub fn is_environment_fault(error: &anyhow::Error) -> bool {
    error.chain().any(|cause| {
        cause
            .downcast_ref::<memsift_store::StoreError>()
            .is_some_and(memsift_store::StoreError::is_transient)
            || cause.downcast_ref::<crate::embedding::EmbedderUnavailable>().is_some()
            || cause
                .downcast_ref::<memsift_embed::EmbedError>()
                .is_some_and(|error| !matches!(error, memsift_embed::EmbedError::EmptyText { .. }))
    })
}

/// Totals of one or more applies.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Applied {
    /// Memories written.
    pub n_memories: u64,
    /// Items dropped by the processor or at write.
    pub n_items_dropped: u64,
    /// Segments that became `extracted`.
    pub n_segments_extracted: u64,
    /// Post-processing answers that changed the store (each one journal row).
    pub n_stage_changes: u64,
}

/// An extraction answer whose JSON was cut off, as the apply holds it just before its write.
pub struct CutAnswer<'a> {
    /// The request and its context snapshot.
    pub stored: &'a StoredOutput,
    /// The answer after every dedupe stage: what the write is given.
    pub output: &'a ProcessOutput,
    /// The id each of `output.items` is written under.
    pub item_ids: &'a [MemoryId],
}

/// Plans the continuation of a cut answer: routing, the daily budget and the payload live above
/// the apply path, which only asks (the pipeline implements it on `App`).
pub trait ContinuationPlanner: Send + Sync {
    /// The request that asks for the rest of `cut`'s chunk, or why there is none.
    fn plan_continuation<'a>(
        &'a self,
        cut: CutAnswer<'a>,
    ) -> Pin<Box<dyn Future<Output = anyhow::Result<ContinuationPlan>> + 'a>>;
}

/// What the apply path reads and writes through: the store, the clock and the vectors.
#[derive(Clone)]
pub struct ApplyContext {
    /// Where outputs are read and memories written.
    pub store: Store,
    /// The clock stamped on what is written.
    pub clock: Arc<dyn Clock>,
    /// The embedder and the per-user exact indexes.
    pub vectors: Arc<Vectors>,
    /// Plans the rest of a cut answer's chunk; without one, a cut answer's apply records that
    /// nothing continues it.
    pub continuations: Option<Arc<dyn ContinuationPlanner>>,
}
