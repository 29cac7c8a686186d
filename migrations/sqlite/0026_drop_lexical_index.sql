-- The FTS5 index of migration 0013 goes: search ranks memories and turns by BM25 over per-user
-- lexicons held in memory (they rank with the user's own statistics, which a database-wide index
-- cannot), so nothing read these tables, yet every memory and message written paid for them in
-- its own transaction, and every erasure merged their segments.
--
-- Triggers first (a trigger that names a dropped table fails every later write), then the
-- tables (dropping an FTS5 table drops its shadow tables), then the stable keys they joined on.
DROP TRIGGER IF EXISTS memories_fts_insert;
DROP TRIGGER IF EXISTS memories_fts_delete;
DROP TRIGGER IF EXISTS memories_fts_update;
DROP TRIGGER IF EXISTS messages_fts_insert;
DROP TRIGGER IF EXISTS messages_fts_delete;
DROP TRIGGER IF EXISTS messages_fts_update;
DROP TABLE IF EXISTS memories_fts;
DROP TABLE IF EXISTS messages_fts;
DROP INDEX IF EXISTS memories_by_search_rowid;
DROP INDEX IF EXISTS messages_by_search_rowid;
ALTER TABLE memories DROP COLUMN search_rowid;
ALTER TABLE messages DROP COLUMN search_rowid;
