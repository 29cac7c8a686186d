//! The store by concern: each handle is a view of one `Store` that carries the methods of one
//! concern, so a caller names what it touches (`store.segments().claim(…)`) and each module
//! owns one handle's methods.

use std::ops::Deref;

use crate::Store;

/// Declares each handle (a `Copy` view that derefs to the `Store`) and its accessor on `Store`.
macro_rules! handles {
    ($($(#[doc = $doc:literal])* $accessor:ident => $handle:ident;)*) => {
        $(
            $(#[doc = $doc])*
            #[derive(Clone, Copy)]
            pub struct $handle<'a>(&'a Store);

            impl Deref for $handle<'_> {
                type Target = Store;

                fn deref(&self) -> &Store {
                    self.0
                }
            }
        )*

        impl Store {
            $(
                $(#[doc = $doc])*
                pub fn $accessor(&self) -> $handle<'_> {
                    $handle(self)
                }
            )*
        }
    };
}

handles! {
    /// The store's provider batches: packing, intent, polling, results.
    batches => Batches;
    /// The store's erasure of a user, with its receipt.
    erasure => Erasure;
    /// The store's lane health: breakers, pauses, rerouting.
    lanes => Lanes;
    /// The store's listings and counts for people reading the store.
    listing => Listing;
    /// The store's memories: apply, revisions, undo, scoring.
    memories => Memories;
    /// The store's messages: ingest into segments, in one transaction.
    messages => Messages;
    /// The store's requests: planning, outputs, usage, re-planning.
    requests => Requests;
    /// The store's schedule claims shared by daemons.
    schedules => Schedules;
    /// The store's read side: the ranked lists and cards a search is made of.
    search => Search;
    /// The store's segments: claims, closing, status.
    segments => Segments;
    /// The store's post-processing: what stages plan from and the writes they make.
    stages => Stages;
    /// The store's users.
    users => Users;
    /// The store's memory and turn vectors.
    vectors => Vectors;
    /// The store's workers: who holds claims, and their quota heartbeats.
    workers => Workers;
}
