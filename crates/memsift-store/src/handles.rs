//! The store by concern: each handle is a view of one `Store` that carries the methods of one
//! concern, so a caller names what it touches (`store.segments().claim(…)`) and each module
//! owns one handle's methods.

use std::ops::Deref;

use crate::Store;

/// The store's provider batches: packing, intent, polling, results.
#[derive(Clone, Copy)]
pub struct Batches<'a>(&'a Store);

impl Deref for Batches<'_> {
    type Target = Store;

    fn deref(&self) -> &Store {
        self.0
    }
}

/// The store's erasure of a user, with its receipt.
#[derive(Clone, Copy)]
pub struct Erasure<'a>(&'a Store);

impl Deref for Erasure<'_> {
    type Target = Store;

    fn deref(&self) -> &Store {
        self.0
    }
}

/// The store's lane health: breakers, pauses, rerouting.
#[derive(Clone, Copy)]
pub struct Lanes<'a>(&'a Store);

impl Deref for Lanes<'_> {
    type Target = Store;

    fn deref(&self) -> &Store {
        self.0
    }
}

/// The store's listings and counts for people reading the store.
#[derive(Clone, Copy)]
pub struct Listing<'a>(&'a Store);

impl Deref for Listing<'_> {
    type Target = Store;

    fn deref(&self) -> &Store {
        self.0
    }
}

/// The store's memories: apply, revisions, undo, scoring.
#[derive(Clone, Copy)]
pub struct Memories<'a>(&'a Store);

impl Deref for Memories<'_> {
    type Target = Store;

    fn deref(&self) -> &Store {
        self.0
    }
}

/// The store's messages: ingest into segments, in one transaction.
#[derive(Clone, Copy)]
pub struct Messages<'a>(&'a Store);

impl Deref for Messages<'_> {
    type Target = Store;

    fn deref(&self) -> &Store {
        self.0
    }
}

/// The store's requests: planning, outputs, usage, re-planning.
#[derive(Clone, Copy)]
pub struct Requests<'a>(&'a Store);

impl Deref for Requests<'_> {
    type Target = Store;

    fn deref(&self) -> &Store {
        self.0
    }
}

/// The store's schedule claims shared by daemons.
#[derive(Clone, Copy)]
pub struct Schedules<'a>(&'a Store);

impl Deref for Schedules<'_> {
    type Target = Store;

    fn deref(&self) -> &Store {
        self.0
    }
}

/// The store's the read side's ranked lists and cards.
#[derive(Clone, Copy)]
pub struct Search<'a>(&'a Store);

impl Deref for Search<'_> {
    type Target = Store;

    fn deref(&self) -> &Store {
        self.0
    }
}

/// The store's segments: claims, closing, status.
#[derive(Clone, Copy)]
pub struct Segments<'a>(&'a Store);

impl Deref for Segments<'_> {
    type Target = Store;

    fn deref(&self) -> &Store {
        self.0
    }
}

/// The store's post-processing: what stages plan from and the writes they make.
#[derive(Clone, Copy)]
pub struct Stages<'a>(&'a Store);

impl Deref for Stages<'_> {
    type Target = Store;

    fn deref(&self) -> &Store {
        self.0
    }
}

/// The store's users.
#[derive(Clone, Copy)]
pub struct Users<'a>(&'a Store);

impl Deref for Users<'_> {
    type Target = Store;

    fn deref(&self) -> &Store {
        self.0
    }
}

/// The store's memory and turn vectors.
#[derive(Clone, Copy)]
pub struct Vectors<'a>(&'a Store);

impl Deref for Vectors<'_> {
    type Target = Store;

    fn deref(&self) -> &Store {
        self.0
    }
}

/// The store's workers: who holds claims, and their quota heartbeats.
#[derive(Clone, Copy)]
pub struct Workers<'a>(&'a Store);

impl Deref for Workers<'_> {
    type Target = Store;

    fn deref(&self) -> &Store {
        self.0
    }
}

impl Store {
    /// The provider batches: packing, intent, polling, results.
    pub fn batches(&self) -> Batches<'_> {
        Batches(self)
    }

    /// The erasure of a user, with its receipt.
    pub fn erasure(&self) -> Erasure<'_> {
        Erasure(self)
    }

    /// The lane health: breakers, pauses, rerouting.
    pub fn lanes(&self) -> Lanes<'_> {
        Lanes(self)
    }

    /// The listings and counts for people reading the store.
    pub fn listing(&self) -> Listing<'_> {
        Listing(self)
    }

    /// The memories: apply, revisions, undo, scoring.
    pub fn memories(&self) -> Memories<'_> {
        Memories(self)
    }

    /// The messages: ingest into segments, in one transaction.
    pub fn messages(&self) -> Messages<'_> {
        Messages(self)
    }

    /// The requests: planning, outputs, usage, re-planning.
    pub fn requests(&self) -> Requests<'_> {
        Requests(self)
    }

    /// The schedule claims shared by daemons.
    pub fn schedules(&self) -> Schedules<'_> {
        Schedules(self)
    }

    /// The the read side's ranked lists and cards.
    pub fn search(&self) -> Search<'_> {
        Search(self)
    }

    /// The segments: claims, closing, status.
    pub fn segments(&self) -> Segments<'_> {
        Segments(self)
    }

    /// The post-processing: what stages plan from and the writes they make.
    pub fn stages(&self) -> Stages<'_> {
        Stages(self)
    }

    /// The users.
    pub fn users(&self) -> Users<'_> {
        Users(self)
    }

    /// The memory and turn vectors.
    pub fn vectors(&self) -> Vectors<'_> {
        Vectors(self)
    }

    /// The workers: who holds claims, and their quota heartbeats.
    pub fn workers(&self) -> Workers<'_> {
        Workers(self)
    }
}
