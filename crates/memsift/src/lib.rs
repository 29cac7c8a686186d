//! The memsift application: CLI commands, the extraction pipeline and the import formats.
//!
//! `main.rs` only parses arguments, installs telemetry and calls [`cli::run`]; everything else is
//! here so tests drive the same code the binary runs.

pub mod admin;
pub mod api;
pub mod app;
pub mod apply;
pub mod budget;
pub mod cli;
pub mod daemon;
pub mod demo;
pub mod embedding;
pub mod erase;
pub mod health;
pub mod import;
pub mod metrics;
pub mod panics;
pub mod pipeline;
pub mod probe;
pub mod render;
pub mod session;
pub mod stages;
pub mod timings;
