//! Extraction payloads: the prompt a lane sends for one chunk of a segment.
//!
//! What this crate fixes compared with the reference pipeline: today's date and every turn's
//! timestamp are in the prompt; turns are escaped so user text cannot forge structure; known
//! memories carry short ids that are extended on collision instead of aborting; and chunks are cut
//! on turn boundaries under a real token budget, never separating a user turn from its answer.

#![deny(missing_docs)]

mod chunk;
mod short_id;

pub use chunk::{ExtractionChunk, KnownMemory, PayloadOptions, build_extraction_chunks};
pub use memsift_tokens::{MAX_PIECE_BYTES, TOKENIZER, bpe_inputs, count_tokens};
pub use short_id::{MIN_SHORT_ID_LEN, short_ids};
