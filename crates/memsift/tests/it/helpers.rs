//! The engine's test support, shared by these interface tests.

pub use memsift_engine::testing::*;
