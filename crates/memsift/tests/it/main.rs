//! End-to-end tests of the memsift application: import, pipeline, apply, and the CLI process.

mod admin;
mod api;
mod batch_lane;
mod budgets;
mod cli;
mod crash;
mod daemon;
mod erasure;
mod health;
mod helpers;
mod pipeline;
mod postprocess;
mod secrets;
mod tidy;
mod vectors;
