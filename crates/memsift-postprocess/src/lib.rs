//! Post-processing stages. Filled by the post-processing issue.

#![deny(missing_docs)]
