-- What SQL filters, joins or sums on is a typed column, not a key read out of a JSON document:
-- a field renamed in the Rust type used to turn such a read into NULL without an error (the
-- per-run cap then counted nothing). Each new column is filled once from the JSON it stands for;
-- from here on the store writes both.

-- The post-processing run a request counts against, and the entity an entity review is about.
ALTER TABLE llm_requests ADD COLUMN run_id TEXT;
ALTER TABLE llm_requests ADD COLUMN subject_entity_id TEXT;
UPDATE llm_requests SET run_id = subject ->> 'run', subject_entity_id = subject ->> 'entity_id'
 WHERE subject <> '{}'::jsonb;
CREATE INDEX llm_requests_by_run ON llm_requests(run_id) WHERE run_id IS NOT NULL;

-- Memories an operation changed, summed against its run's cap.
ALTER TABLE operations ADD COLUMN n_changed BIGINT;
UPDATE operations SET n_changed = CAST(after ->> 'n_changed' AS BIGINT) WHERE after ->> 'n_changed' IS NOT NULL;

-- Drop reasons are a closed set now. A post-processing answer that changed nothing recorded its
-- note as the reason itself; it becomes the reason `unchanged` with the note as its detail.
UPDATE llm_requests SET drops = (
    SELECT jsonb_agg(CASE WHEN d ->> 'reason' IN ('wrong_type', 'missing_text', 'too_short', 'too_long', 'duplicate_in_response', 'duplicate_of_existing',
                                         'truncated', 'near_duplicate_in_response', 'near_duplicate_of_known',
                                         'duplicate_by_vector', 'unchanged')
                          THEN d
                          ELSE jsonb_build_object('index', 0, 'reason', 'unchanged', 'detail', d ->> 'reason') END
                     ORDER BY position)
      FROM jsonb_array_elements(CASE WHEN jsonb_typeof(llm_requests.drops) = 'array' THEN llm_requests.drops ELSE '[]'::jsonb END)
           WITH ORDINALITY AS element(d, position))
 WHERE jsonb_typeof(drops) = 'array'
   AND EXISTS (SELECT 1 FROM jsonb_array_elements(CASE WHEN jsonb_typeof(drops) = 'array' THEN drops ELSE '[]'::jsonb END) AS d
                WHERE d ->> 'reason' IS NULL OR d ->> 'reason' NOT IN ('wrong_type', 'missing_text', 'too_short', 'too_long', 'duplicate_in_response', 'duplicate_of_existing',
                                         'truncated', 'near_duplicate_in_response', 'near_duplicate_of_known',
                                         'duplicate_by_vector', 'unchanged'));

-- How many items each request dropped for each reason, for the metrics.
CREATE TABLE request_drops (
    request_id TEXT NOT NULL REFERENCES llm_requests(id) ON DELETE CASCADE,
    reason     TEXT NOT NULL,
    n          BIGINT NOT NULL,
    PRIMARY KEY (request_id, reason)
);
INSERT INTO request_drops (request_id, reason, n)
SELECT r.id, d ->> 'reason', COUNT(*)
  FROM llm_requests r,
       jsonb_array_elements(CASE WHEN jsonb_typeof(r.drops) = 'array' THEN r.drops ELSE '[]'::jsonb END) AS d
 GROUP BY r.id, d ->> 'reason';
