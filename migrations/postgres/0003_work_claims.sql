-- Claims on request attempts (the immediate and heuristic lanes execute them outside any
-- transaction) and the reconciler's miss counter on batches stuck in `submitting`.
ALTER TABLE llm_requests ADD COLUMN claimed_by TEXT;
ALTER TABLE llm_requests ADD COLUMN claimed_until TIMESTAMPTZ;
ALTER TABLE batches ADD COLUMN reconcile_misses BIGINT NOT NULL DEFAULT 0;
CREATE INDEX llm_requests_by_lane ON llm_requests(status, lane, provider, config_key, created_at);
CREATE INDEX llm_requests_by_segment ON llm_requests(segment_id, chunk_index, attempt);
