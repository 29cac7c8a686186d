-- Per-user memory version (docs/design.md, "Scale"): every write that changes a user's active memories or
-- their vectors bumps it in the same transaction, so an in-memory vector index in any daemon can
-- tell it is stale and reload. The SQLite migration of the same number adds the same column.
ALTER TABLE users ADD COLUMN memory_version BIGINT NOT NULL DEFAULT 0;
