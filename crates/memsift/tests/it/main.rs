//! End-to-end tests of the memsift interfaces: the CLI process, the HTTP API, the admin pages and the daemon.

mod admin;
mod api;
mod cli;
mod daemon;
mod daemon_pipeline;
mod database_tls;
mod health;
mod helpers;
mod metrics;
mod secrets;
