//! Storage on SQLite and PostgreSQL.
