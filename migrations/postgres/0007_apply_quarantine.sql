-- An answer whose apply keeps failing is quarantined as `failed` instead of being picked up
-- forever: a new request status, and a count of failed applies on each request.
ALTER TABLE llm_requests DROP CONSTRAINT llm_requests_status_check;
ALTER TABLE llm_requests ADD CONSTRAINT llm_requests_status_check
    CHECK (status IN ('planned','submitted','succeeded','errored','expired','canceled','applied','dead','failed'));
-- Applies of this answer that failed; at `[extraction] max_apply_attempts` it is `failed`.
ALTER TABLE llm_requests ADD COLUMN apply_attempts BIGINT NOT NULL DEFAULT 0;
