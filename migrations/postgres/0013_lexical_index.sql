-- A lexical index beside the vectors, for the read side: PostgreSQL full text over memory texts
-- and message contents. Each is a generated `tsvector` (English configuration: stemmed, stopwords
-- dropped) with a GIN index, written by the database in the statement that writes the row, so no
-- write path can forget it, and gone with the row.
--
-- A tsvector holds at most 1 MB, and a message may be 1 MiB of text: the first 200,000 characters
-- are indexed, far more than any question's words need to be found by.

ALTER TABLE memories ADD COLUMN text_search tsvector
    GENERATED ALWAYS AS (to_tsvector('english', left(text, 200000))) STORED;
CREATE INDEX memories_by_text_search ON memories USING GIN (text_search);

ALTER TABLE messages ADD COLUMN content_search tsvector
    GENERATED ALWAYS AS (to_tsvector('english', left(content, 200000))) STORED;
CREATE INDEX messages_by_content_search ON messages USING GIN (content_search);
