//! End-to-end tests of the memsift application: import, pipeline, apply, and the CLI process.

mod batch_lane;
mod cli;
mod crash;
mod daemon;
mod helpers;
mod pipeline;
mod tidy;
