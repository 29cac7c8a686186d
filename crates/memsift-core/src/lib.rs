//! Domain types shared by every memsift crate: ids, statuses, configuration, prompts, the clock and the output contract.
//!
//! This crate does no I/O except reading a configuration, prompt or input file when asked to.
//! Everything here is plain data with `parse` constructors, so a value that exists is valid.

#![deny(missing_docs)]

pub mod clock;
pub mod config;
pub mod contract;
pub mod drops;
pub mod files;
pub mod ids;
pub mod message;
pub mod prompt;
pub mod redact;
pub mod request;
pub mod segment;
pub mod status;
pub mod text;
pub mod transcript;

pub use clock::{Clock, ManualClock, SystemClock};
pub use ids::{BatchId, EntityId, MemoryId, MessageId, OperationId, RequestId, SegmentId, UserId};
