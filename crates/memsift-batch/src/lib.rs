//! The batch coordinator. Filled by the extraction-lanes issue.

#![deny(missing_docs)]
