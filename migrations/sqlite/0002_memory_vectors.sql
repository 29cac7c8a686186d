-- Per-user memory version (docs/design.md, "Scale"): every write that changes a user's active memories or
-- their vectors bumps it in the same transaction, so an in-memory vector index in any daemon can
-- tell it is stale and reload. INTEGER because STRICT tables accept no BIGINT; it is 64-bit anyway.
ALTER TABLE users ADD COLUMN memory_version INTEGER NOT NULL DEFAULT 0;
