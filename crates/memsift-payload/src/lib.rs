//! Extraction payloads: the prompt a lane sends for one chunk of a segment.
//!
//! What this crate fixes compared with the reference pipeline: today's date and every turn's
//! timestamp are in the prompt; turns are escaped so user text cannot forge structure; known
//! memories carry short ids that are extended on collision instead of aborting; and chunks are cut
//! on turn boundaries under a real token budget, never separating a user turn from its answer
//! unless the two together are larger than a chunk, and never passing the budget: a turn larger
//! than a chunk is sent in parts, all of it, each part labelled like the turn.

#![deny(missing_docs)]

mod chunk;
mod short_id;
mod split;

pub use chunk::{
    Chunking, ExtractionChunk, KnownMemory, MIN_TURN_ROOM_TOKENS, PayloadError, PayloadOptions, SplitTurn,
    build_extraction_chunks, check_chunk_budget, minimum_chunk_budget,
};
pub use memsift_tokens::{MAX_PIECE_BYTES, TOKENIZER, bpe_inputs, count_tokens};
pub use short_id::{MIN_SHORT_ID_LEN, short_ids};
