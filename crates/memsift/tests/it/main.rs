//! End-to-end tests of the memsift application: import, pipeline, apply, and the CLI process.

mod cli;
mod helpers;
mod pipeline;
mod tidy;
