//! The store cases, one module per concern; each runs once per backend (see `main.rs`), and the
//! suite macro reaches every case through this module.

pub use crate::apply::*;
pub use crate::batches::*;
pub use crate::drops::*;
pub use crate::erasure::*;
pub use crate::errors::*;
pub use crate::lanes::*;
pub use crate::listings::*;
pub use crate::migrations::*;
pub use crate::postprocess::*;
pub use crate::races::*;
pub use crate::revisions::*;
pub use crate::schedules::*;
pub use crate::search::*;
pub use crate::segments::*;
pub use crate::texts::*;
pub use crate::vectors::*;
