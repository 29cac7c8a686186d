-- Turn vectors for the read side: each stored turn's embedding, so a question can find what was
-- said even where no memory says it, and a memory can be found through the words of its evidence.
-- Written by the pipeline after messages are stored (`[search] embed_turns`), with the model that
-- made each one, and gone with the message.
ALTER TABLE messages ADD COLUMN embedding BLOB;
ALTER TABLE messages ADD COLUMN embedding_model TEXT;
CREATE INDEX messages_needing_embedding ON messages(created_at) WHERE embedding IS NULL;
-- Bumped with every turn vector written, so a daemon's cached turn index of the user is read again.
ALTER TABLE users ADD COLUMN turn_version INTEGER NOT NULL DEFAULT 0;
