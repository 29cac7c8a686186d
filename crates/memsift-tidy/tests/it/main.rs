//! The workspace's house rules, checked on its own sources.

mod cycles;
mod docs;
mod sizes;
