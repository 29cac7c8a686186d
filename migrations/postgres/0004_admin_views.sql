-- Views for admins who read the store with psql or sqlite3 (README: "SQL views").
-- They are read-only summaries of the tables; `memsift costs` reads the cost view.

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

-- Segments not yet extracted, by status: the backlog and the dead letters.
CREATE VIEW admin_segment_backlog AS
SELECT s.status,
       COUNT(*) AS n_segments,
       SUM(s.n_messages) AS n_messages,
       MIN(s.closed_at) AS oldest_closed_at,
       MAX(s.attempts) AS max_attempts
FROM segments s
WHERE s.status <> 'extracted'
GROUP BY s.status;

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
