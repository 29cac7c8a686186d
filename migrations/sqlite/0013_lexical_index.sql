-- A lexical index beside the vectors, for the read side: BM25 over memory texts and over message
-- contents, with SQLite's FTS5. External content: each text lives once, in its own table, and
-- the index holds only terms.
--
-- Each indexed table gains a stable integer key, `search_rowid`, the index's rowid. The implicit
-- rowid of a table without an INTEGER PRIMARY KEY may be renumbered by VACUUM, which would point
-- the index at other rows; `search_rowid` is assigned once, when the row is written, and never
-- changes.
--
-- Triggers keep the index in the transaction that writes the row: an insert adds the row's terms,
-- a delete removes them (FTS5 keeps the removed terms in its segments until they are merged, so
-- erasure merges them away: `Store::erase_user`), a change of text does both. A later migration
-- that rebuilds one of these tables must recreate its triggers.

ALTER TABLE memories ADD COLUMN search_rowid INTEGER;
UPDATE memories SET search_rowid = rowid;
CREATE UNIQUE INDEX memories_by_search_rowid ON memories(search_rowid);

CREATE VIRTUAL TABLE memories_fts USING fts5(
    text,
    content = 'memories',
    content_rowid = 'search_rowid',
    tokenize = 'porter unicode61 remove_diacritics 2'
);
INSERT INTO memories_fts(memories_fts) VALUES ('rebuild');

CREATE TRIGGER memories_fts_insert AFTER INSERT ON memories BEGIN
    UPDATE memories SET search_rowid = (SELECT COALESCE(MAX(search_rowid), 0) + 1 FROM memories)
    WHERE id = new.id AND search_rowid IS NULL;
    INSERT INTO memories_fts(rowid, text) SELECT search_rowid, text FROM memories WHERE id = new.id;
END;

CREATE TRIGGER memories_fts_delete AFTER DELETE ON memories BEGIN
    INSERT INTO memories_fts(memories_fts, rowid, text) VALUES ('delete', old.search_rowid, old.text);
END;

CREATE TRIGGER memories_fts_update AFTER UPDATE OF text ON memories BEGIN
    INSERT INTO memories_fts(memories_fts, rowid, text) VALUES ('delete', old.search_rowid, old.text);
    INSERT INTO memories_fts(rowid, text) VALUES (new.search_rowid, new.text);
END;

ALTER TABLE messages ADD COLUMN search_rowid INTEGER;
UPDATE messages SET search_rowid = rowid;
CREATE UNIQUE INDEX messages_by_search_rowid ON messages(search_rowid);

CREATE VIRTUAL TABLE messages_fts USING fts5(
    content,
    content = 'messages',
    content_rowid = 'search_rowid',
    tokenize = 'porter unicode61 remove_diacritics 2'
);
INSERT INTO messages_fts(messages_fts) VALUES ('rebuild');

CREATE TRIGGER messages_fts_insert AFTER INSERT ON messages BEGIN
    UPDATE messages SET search_rowid = (SELECT COALESCE(MAX(search_rowid), 0) + 1 FROM messages)
    WHERE id = new.id AND search_rowid IS NULL;
    INSERT INTO messages_fts(rowid, content) SELECT search_rowid, content FROM messages WHERE id = new.id;
END;

CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages BEGIN
    INSERT INTO messages_fts(messages_fts, rowid, content) VALUES ('delete', old.search_rowid, old.content);
END;

CREATE TRIGGER messages_fts_update AFTER UPDATE OF content ON messages BEGIN
    INSERT INTO messages_fts(messages_fts, rowid, content) VALUES ('delete', old.search_rowid, old.content);
    INSERT INTO messages_fts(rowid, content) VALUES (new.search_rowid, new.content);
END;
