//! The import formats, from `memsift-import` (a crate of its own so the fuzz targets can build it
//! without the rest of the application); re-exported for the CLI, the API and the tests.

pub use memsift_import::*;
