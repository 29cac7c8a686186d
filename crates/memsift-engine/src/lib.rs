//! The memsift engine: everything between a stored message and a stored memory, as a library.
//!
//! The interfaces (`memsift`: CLI, HTTP API, admin pages, daemon) build an [`app::App`] and call
//! the pipeline; tests drive the same code with a hand-moved clock.
//!
//! Modules import in one direction, from the bottom up:
//! - shared context: [`setup`] (where the database, configuration and keys come from), [`wait`],
//!   [`timings`], [`language`] (how a query's language is read), [`lexicon`], [`held`] (every user's search indexes under one budget), [`embedding`],
//!   [`context`] (what an apply reads and returns), then [`app`];
//! - what works on the context: [`budget`], [`health`] (lane breakers), [`erase`], [`ingest`];
//! - the post-processing [`stages`], then the one [`apply`] path that also dispatches to them;
//! - the [`pipeline`] on top, which steps everything;
//! - the read side, [`search`], beside it: it reads what the others wrote.
//!
//! `tests/it/tidy.rs` in the `memsift` crate fails on any import cycle between modules.

pub mod app;
pub mod apply;
pub mod budget;
pub mod claims;
pub mod context;
pub mod embedding;
pub mod erase;
pub mod health;
pub mod held;
pub mod ingest;
pub mod language;
pub mod lexicon;
pub mod pipeline;
pub mod process;
pub mod search;
pub mod setup;
pub mod stages;
#[cfg(feature = "testing")]
pub mod testing;
pub mod timings;
pub mod wait;
