-- What lets search keep a user's turn indexes (words and vectors) current by reading only what
-- changed. Each message carries the user's turn version at which its text or its vector was last
-- written; a cache built at version v reads the rows stamped after v. A user's turn floor is the
-- version at which turns last went away (erasure): a cache older than the floor is rebuilt whole.
-- Rows written before this migration keep stamp 0, which every cache built after it has seen.
ALTER TABLE messages ADD COLUMN turn_stamp BIGINT NOT NULL DEFAULT 0;
ALTER TABLE users ADD COLUMN turn_floor BIGINT NOT NULL DEFAULT 0;
CREATE INDEX messages_turn_stamp ON messages(user_id, turn_stamp);
