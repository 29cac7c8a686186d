-- What lets search keep a user's memory lexicon current by reading only what changed, as turn
-- stamps (0022) do for turns. Each memory carries a stamp no older than the user's memory version
-- at which its text, its active state or its evidence last changed; a lexicon built at version v
-- reads the rows stamped after v, archived ones included (to drop them). A user's memory floor is
-- the version at which a memory row last went away (deleted): a lexicon older than it is rebuilt
-- whole. Triggers stamp, so no write path can forget to: the stamp is the user's memory version
-- plus one, which is at least the version the writing transaction commits (every write moves the
-- version after its rows, or before them, which only makes the stamp later and the row read once
-- more). SQLite runs one writer at a time, so no other writer moves the version in between.
-- Rows written before this migration keep stamp 0, which every lexicon built after it has read.
ALTER TABLE memories ADD COLUMN memory_stamp INTEGER NOT NULL DEFAULT 0;
ALTER TABLE users ADD COLUMN memory_floor INTEGER NOT NULL DEFAULT 0;
CREATE INDEX memories_by_stamp ON memories(user_id, memory_stamp);

CREATE TRIGGER memories_stamp_insert AFTER INSERT ON memories BEGIN
    UPDATE memories SET memory_stamp = (SELECT memory_version + 1 FROM users WHERE id = new.user_id)
    WHERE id = new.id;
END;

CREATE TRIGGER memories_stamp_update AFTER UPDATE OF text, archived_at, embedding ON memories BEGIN
    UPDATE memories SET memory_stamp = (SELECT memory_version + 1 FROM users WHERE id = new.user_id)
    WHERE id = new.id;
END;

CREATE TRIGGER memories_floor_delete AFTER DELETE ON memories BEGIN
    UPDATE users SET memory_floor = memory_version + 1 WHERE id = old.user_id;
END;

CREATE TRIGGER memory_evidence_stamp_insert AFTER INSERT ON memory_evidence BEGIN
    UPDATE memories SET memory_stamp = (SELECT u.memory_version + 1 FROM users u WHERE u.id = memories.user_id)
    WHERE id = new.memory_id;
END;

CREATE TRIGGER memory_evidence_stamp_delete AFTER DELETE ON memory_evidence BEGIN
    UPDATE memories SET memory_stamp = (SELECT u.memory_version + 1 FROM users u WHERE u.id = memories.user_id)
    WHERE id = old.memory_id;
END;

-- What a memory's evidence turn said is part of its document.
CREATE TRIGGER messages_stamp_citing_memories AFTER UPDATE OF content ON messages BEGIN
    UPDATE memories SET memory_stamp = (SELECT u.memory_version + 1 FROM users u WHERE u.id = memories.user_id)
    WHERE id IN (SELECT memory_id FROM memory_evidence WHERE message_id = new.id);
END;
