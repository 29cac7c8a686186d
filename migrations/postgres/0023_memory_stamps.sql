-- What lets search keep a user's memory lexicon current by reading only what changed, as turn
-- stamps (0022) do for turns. Each memory carries a stamp no older than the user's memory version
-- at which its text, its active state or its evidence last changed; a lexicon built at version v
-- reads the rows stamped after v, archived ones included (to drop them). A user's memory floor is
-- the version at which a memory row last went away (deleted): a lexicon older than it is rebuilt
-- whole. Triggers stamp, so no write path can forget to: the stamp is the user's memory version
-- plus one, read under the user's row lock (`FOR UPDATE`), so no other writer can commit a newer
-- version before this transaction does, and the stamp is at least the version it commits. Every
-- writer takes the user's lock before the user's memory rows (scoring, revisions, undo and
-- re-embedding take it first since this migration), so this adds no new lock order.
-- Rows written before this migration keep stamp 0, which every lexicon built after it has read.
ALTER TABLE memories ADD COLUMN memory_stamp BIGINT NOT NULL DEFAULT 0;
ALTER TABLE users ADD COLUMN memory_floor BIGINT NOT NULL DEFAULT 0;
CREATE INDEX memories_by_stamp ON memories(user_id, memory_stamp);

-- The stamp a change to `owner`'s memories takes now.
CREATE FUNCTION memsift_next_memory_stamp(owner TEXT) RETURNS BIGINT LANGUAGE plpgsql AS $$
DECLARE
    next BIGINT;
BEGIN
    SELECT memory_version + 1 INTO next FROM users WHERE id = owner FOR UPDATE;
    RETURN COALESCE(next, 0);
END;
$$;

CREATE FUNCTION memsift_stamp_memory() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.memory_stamp := memsift_next_memory_stamp(NEW.user_id);
    RETURN NEW;
END;
$$;

CREATE TRIGGER memories_stamp_insert BEFORE INSERT ON memories
    FOR EACH ROW EXECUTE FUNCTION memsift_stamp_memory();
CREATE TRIGGER memories_stamp_update BEFORE UPDATE OF text, archived_at, embedding ON memories
    FOR EACH ROW EXECUTE FUNCTION memsift_stamp_memory();

CREATE FUNCTION memsift_memory_floor() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE users SET memory_floor = memory_version + 1 WHERE id = OLD.user_id;
    RETURN OLD;
END;
$$;

CREATE TRIGGER memories_floor_delete AFTER DELETE ON memories
    FOR EACH ROW EXECUTE FUNCTION memsift_memory_floor();

CREATE FUNCTION memsift_stamp_evidence() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    cited TEXT;
BEGIN
    IF TG_OP = 'DELETE' THEN
        cited := OLD.memory_id;
    ELSE
        cited := NEW.memory_id;
    END IF;
    UPDATE memories SET memory_stamp = memsift_next_memory_stamp(user_id) WHERE id = cited;
    RETURN NULL;
END;
$$;

CREATE TRIGGER memory_evidence_stamp AFTER INSERT OR DELETE ON memory_evidence
    FOR EACH ROW EXECUTE FUNCTION memsift_stamp_evidence();

-- What a memory's evidence turn said is part of its document.
CREATE FUNCTION memsift_stamp_citing_memories() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE memories SET memory_stamp = memsift_next_memory_stamp(user_id)
    WHERE id IN (SELECT memory_id FROM memory_evidence WHERE message_id = NEW.id);
    RETURN NULL;
END;
$$;

CREATE TRIGGER messages_stamp_citing_memories AFTER UPDATE OF content ON messages
    FOR EACH ROW EXECUTE FUNCTION memsift_stamp_citing_memories();
