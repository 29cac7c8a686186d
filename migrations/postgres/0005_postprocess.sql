-- Post-processing: what relationship classification has covered, the extractor's link hints,
-- the review request that follows a consolidation proposal, and one live summary per segment.

-- When relationship classification last planned this memory (NULL: never, so it is "new").
ALTER TABLE memories ADD COLUMN related_at TIMESTAMPTZ;
-- Ids of memories the extractor said this one relates to (related_memory_ids and linking_hints).
ALTER TABLE memories ADD COLUMN link_hints JSONB NOT NULL DEFAULT '[]';
-- The request whose answer planned this one (a consolidation review names its proposal).
ALTER TABLE llm_requests ADD COLUMN parent_request_id TEXT REFERENCES llm_requests(id) ON DELETE CASCADE;
CREATE INDEX llm_requests_by_parent ON llm_requests(parent_request_id);
CREATE INDEX memories_unrelated ON memories(user_id, related_at);

CREATE TABLE segment_summaries (
    id            TEXT PRIMARY KEY,
    segment_id    TEXT NOT NULL REFERENCES segments(id) ON DELETE CASCADE,
    user_id       TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    text          TEXT NOT NULL,
    request_id    TEXT REFERENCES llm_requests(id) ON DELETE SET NULL,
    created_at    TIMESTAMPTZ NOT NULL,
    superseded_at TIMESTAMPTZ
);
-- One live summary per segment: a changed text supersedes the live one in the same transaction.
CREATE UNIQUE INDEX segment_summaries_one_live ON segment_summaries(segment_id) WHERE superseded_at IS NULL;
