//! End-to-end tests of the engine: import, pipeline, lanes, apply, post-processing and erasure, on
//! real stores and the provider simulator.

mod batch_endings;
mod batch_lane;
mod budgets;
mod continuations;
mod crash;
mod erasure;
mod held;
mod pipeline;
mod postprocess;
mod search;
mod vectors;
mod windows;

/// The engine's test support, under the name these tests have always used.
mod helpers {
    pub use memsift_engine::testing::*;
}
