//! Contract tests: every memsift-llm call against an in-process memsift-sim over real HTTP.
//!
//! Waits go through a `VirtualTimekeeper`, which records each backoff instead of sleeping, and
//! batch progress follows the sim's `ManualClock`, so no test sleeps to synchronise.

mod anthropic;
mod faults;
mod locomo;
mod openai;
mod support;
mod windows;
