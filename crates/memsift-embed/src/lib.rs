//! The `Embedder` trait and its implementations. Filled by the processor and embeddings issue.

#![deny(missing_docs)]
