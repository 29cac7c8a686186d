//! The HTTP API over a real store: auth, ingest → extract → read, user scoping, search with
//! access counts, body limits, field-naming errors, metrics and the OpenAPI route list.
//!
//! One file per concern: `access` (who may call what: the token, the security headers, user
//! scoping, the token checks at start-up), `ingest` (what is refused on the way in), `read`
//! (lists and search on both backends), `races` (erasure against ingest, user id spellings), `admin` (erase, undo, retry, cancel), `documented` (the
//! served metrics and routes are the documented ones) and `resilience` (the server answers while
//! work is slow or panics); `client` serves an app and calls it.

mod access;
mod admin;
mod client;
mod documented;
mod ingest;
mod races;
mod read;
mod resilience;
