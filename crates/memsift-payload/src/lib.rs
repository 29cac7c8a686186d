//! Extraction payloads: prompt rendering, short ids, chunking. Filled by the extraction-lanes issue.

#![deny(missing_docs)]
