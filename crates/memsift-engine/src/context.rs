//! What every apply reads and writes through, and what it returns: shared by the extraction
//! apply (`apply`) and the post-processing stages' apply (`stages`), so neither depends on the other.

use std::sync::Arc;

use memsift_core::Clock;
use memsift_store::Store;

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

/// What the apply path reads and writes through: the store, the clock and the vectors.
#[derive(Clone)]
pub struct ApplyContext {
    /// Where outputs are read and memories written.
    pub store: Store,
    /// The clock stamped on what is written.
    pub clock: Arc<dyn Clock>,
    /// The embedder and the per-user exact indexes.
    pub vectors: Arc<Vectors>,
}
