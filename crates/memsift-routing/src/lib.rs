//! Execution strategies and tier-aware routing. Filled by the extraction-lanes issue.

#![deny(missing_docs)]
