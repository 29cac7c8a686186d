//! The memsift interfaces over the engine: the CLI, the HTTP API, the admin pages, the daemon and
//! the demo.
//!
//! `main.rs` only parses arguments, installs telemetry and calls [`cli::run`]; the work itself is
//! `memsift-engine`'s, so tests drive the same code the binary runs.

pub mod admin;
pub mod api;
pub mod cli;
pub mod daemon;
pub mod demo;
pub mod eval;
pub mod headers;
pub mod import;
pub mod metrics;
pub mod panics;
pub mod probe;
pub mod render;
pub mod session;
pub mod signals;
pub mod throttle;
pub mod token;
