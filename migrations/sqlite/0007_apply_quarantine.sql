-- An answer whose apply keeps failing is quarantined as `failed` instead of being picked up
-- forever: a new request status, and a count of failed applies on each request.
--
-- SQLite cannot change a CHECK constraint in place, so `llm_requests` is rebuilt as SQLite's
-- ALTER TABLE page prescribes: a new table, copy, drop, rename, indexes and views back, and a
-- foreign key check. Migrations run on a connection with foreign keys off (`Store::migrate`), so
-- dropping the old table fires no ON DELETE action on the rows that point at it. The views that
-- read the table are dropped first and recreated unchanged, because a rename checks every view.

DROP VIEW admin_batch_status;
DROP VIEW admin_cost_by_user_stage;

CREATE TABLE llm_requests_rebuilt (
    id                    TEXT PRIMARY KEY,
    purpose               TEXT NOT NULL,
    user_id               TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    segment_id            TEXT REFERENCES segments(id) ON DELETE CASCADE,
    chunk_index           INTEGER NOT NULL DEFAULT 0,
    subject               TEXT NOT NULL DEFAULT '{}',
    lane                  TEXT NOT NULL CHECK (lane IN ('batch','immediate','heuristic')),
    config_key            TEXT NOT NULL,
    provider              TEXT NOT NULL,
    model                 TEXT,
    prompt_version        TEXT NOT NULL,
    context               TEXT NOT NULL DEFAULT '{}',
    request_body          TEXT,
    status                TEXT NOT NULL CHECK (status IN ('planned','submitted','succeeded','errored','expired','canceled','applied','dead','failed')),
    attempt               INTEGER NOT NULL DEFAULT 1,
    batch_id              TEXT REFERENCES batches(id),
    raw_output            TEXT,
    stop_reason           TEXT,
    input_tokens          INTEGER NOT NULL DEFAULT 0,
    output_tokens         INTEGER NOT NULL DEFAULT 0,
    cache_creation_tokens INTEGER NOT NULL DEFAULT 0,
    cache_read_tokens     INTEGER NOT NULL DEFAULT 0,
    cost_usd              REAL NOT NULL DEFAULT 0,
    n_items               INTEGER NOT NULL DEFAULT 0,
    n_dropped             INTEGER NOT NULL DEFAULT 0,
    drops                 TEXT NOT NULL DEFAULT '[]',
    error                 TEXT,
    created_at            TEXT NOT NULL,
    submitted_at          TEXT,
    completed_at          TEXT,
    applied_at            TEXT,
    claimed_by            TEXT,
    claimed_until         TEXT,
    parent_request_id     TEXT REFERENCES llm_requests(id) ON DELETE CASCADE,
    -- Applies of this answer that failed; at `[extraction] max_apply_attempts` it is `failed`.
    apply_attempts        INTEGER NOT NULL DEFAULT 0
) STRICT;

INSERT INTO llm_requests_rebuilt (
    id, purpose, user_id, segment_id, chunk_index, subject, lane, config_key, provider, model, prompt_version,
    context, request_body, status, attempt, batch_id, raw_output, stop_reason, input_tokens, output_tokens,
    cache_creation_tokens, cache_read_tokens, cost_usd, n_items, n_dropped, drops, error, created_at, submitted_at,
    completed_at, applied_at, claimed_by, claimed_until, parent_request_id)
SELECT
    id, purpose, user_id, segment_id, chunk_index, subject, lane, config_key, provider, model, prompt_version,
    context, request_body, status, attempt, batch_id, raw_output, stop_reason, input_tokens, output_tokens,
    cache_creation_tokens, cache_read_tokens, cost_usd, n_items, n_dropped, drops, error, created_at, submitted_at,
    completed_at, applied_at, claimed_by, claimed_until, parent_request_id
FROM llm_requests;

DROP TABLE llm_requests;
ALTER TABLE llm_requests_rebuilt RENAME TO llm_requests;

CREATE UNIQUE INDEX llm_requests_one_per_attempt ON llm_requests(purpose, segment_id, chunk_index, attempt) WHERE segment_id IS NOT NULL;
CREATE INDEX llm_requests_by_status ON llm_requests(status, created_at);
CREATE INDEX llm_requests_by_batch ON llm_requests(batch_id);
CREATE INDEX llm_requests_by_user ON llm_requests(user_id, created_at);
CREATE INDEX llm_requests_by_lane ON llm_requests(status, lane, provider, config_key, created_at);
CREATE INDEX llm_requests_by_segment ON llm_requests(segment_id, chunk_index, attempt);
CREATE INDEX llm_requests_by_parent ON llm_requests(parent_request_id);

-- One row per provider batch: where it is, how far ingest got, and what it cost.
CREATE VIEW admin_batch_status AS
SELECT b.id,
       b.provider,
       b.provider_batch_id,
       b.purpose,
       b.status,
       b.n_requests,
       b.n_succeeded,
       b.n_errored,
       b.n_expired,
       b.n_canceled,
       b.n_polls,
       b.next_poll_at,
       b.ingest_cursor,
       b.created_at,
       b.submitted_at,
       b.ended_at,
       b.last_error,
       (SELECT COALESCE(SUM(r.cost_usd), 0) FROM llm_requests r WHERE r.batch_id = b.id) AS cost_usd
FROM batches b;

-- Tokens and cost by user and stage (purpose) and lane.
CREATE VIEW admin_cost_by_user_stage AS
SELECT u.external_id AS user_external_id,
       r.purpose,
       r.lane,
       COUNT(*) AS n_requests,
       SUM(r.input_tokens) AS input_tokens,
       SUM(r.output_tokens) AS output_tokens,
       SUM(r.cache_creation_tokens) AS cache_creation_tokens,
       SUM(r.cache_read_tokens) AS cache_read_tokens,
       SUM(r.cost_usd) AS cost_usd
FROM llm_requests r
JOIN users u ON u.id = r.user_id
GROUP BY u.external_id, r.purpose, r.lane;

-- Fails the migration (and so the start-up) if any row points at a row that is not there: the
-- CHECK refuses a non-zero count of foreign key violations.
CREATE TEMP TABLE rebuild_foreign_key_violations (n INTEGER NOT NULL CHECK (n = 0));
INSERT INTO rebuild_foreign_key_violations SELECT COUNT(*) FROM pragma_foreign_key_check;
DROP TABLE rebuild_foreign_key_violations;
