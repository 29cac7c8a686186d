//! Near-duplicate detection: a bounded fuzzy ratio on normalized text, and the cosine stage over embeddings.
//!
//! The fuzzy ratio is strsim's normalized Levenshtein (1 − edits / longer length, in characters) on lowercased,
//! whitespace-collapsed text. Two cheap lower bounds on the edit count run first: the length difference, and the
//! difference of character histograms. They are exact bounds, so skipping on them never misses a duplicate,
//! and with hundreds of known texts almost every pair is rejected without running the quadratic comparison.
//!
//! By stage: `signature` holds the cheap bounds (length and bucketed histogram of the normalized text), `fuzzy` the
//! normalized form and the ratio itself, `exact` the in-place dedupe key the exact stage compares, `vector` the
//! cosine stage over embeddings, and `hints` re-points linking hints once any stage has dropped items.

mod exact;
mod fuzzy;
mod hints;
mod signature;
mod vector;

pub(crate) use exact::compact_ascii_key;
pub(crate) use fuzzy::similarity_of;
pub use fuzzy::{FuzzyText, fuzzy_ratio, normalize_for_fuzzy};
pub(crate) use hints::remap_hints;
pub use hints::retain_with_hints;
pub(crate) use signature::{
    BAG_BUCKETS, NORMALIZED_BUCKET, Signature, is_clean_ascii, is_collapsed_printable_ascii, known_signature,
    normalized_char_count,
};
pub use vector::{cosine, dedupe_by_vectors};

/// Fuzzy ratio at or above which two texts are the same memory (invariant 8).
pub const FUZZY_DUPLICATE_THRESHOLD: f64 = 0.95;
/// Cosine similarity at or above which two embeddings are the same memory (invariant 8).
pub const VECTOR_DUPLICATE_THRESHOLD: f32 = 0.92;

/// Ratios such as 1 − 5/100 are not exact in binary; without a tolerance a pair sitting exactly on the
/// threshold would fall on either side depending on rounding.
const SCORE_TOLERANCE: f64 = 1e-9;
