-- The full-text columns of migration 0013 go: search ranks memories and turns by BM25 over
-- per-user lexicons held in memory (they rank with the user's own statistics, which a
-- database-wide index cannot), so nothing read these columns, yet every memory and message
-- written paid for a `to_tsvector` and a GIN insert in its own statement.
DROP INDEX IF EXISTS memories_by_text_search;
DROP INDEX IF EXISTS messages_by_content_search;
ALTER TABLE memories DROP COLUMN IF EXISTS text_search;
ALTER TABLE messages DROP COLUMN IF EXISTS content_search;
