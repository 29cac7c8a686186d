-- What SQL filters, joins or sums on is a typed column, not a key read out of a JSON document:
-- a field renamed in the Rust type used to turn such a read into NULL without an error (the
-- per-run cap then counted nothing). Each new column is filled once from the JSON it stands for;
-- from here on the store writes both.

-- The post-processing run a request counts against, and the entity an entity review is about.
ALTER TABLE llm_requests ADD COLUMN run_id TEXT;
ALTER TABLE llm_requests ADD COLUMN subject_entity_id TEXT;
UPDATE llm_requests SET run_id = subject ->> 'run', subject_entity_id = subject ->> 'entity_id'
 WHERE subject <> '{}';
CREATE INDEX llm_requests_by_run ON llm_requests(run_id) WHERE run_id IS NOT NULL;

-- Memories an operation changed, summed against its run's cap.
ALTER TABLE operations ADD COLUMN n_changed INTEGER;
UPDATE operations SET n_changed = CAST(after ->> 'n_changed' AS INTEGER) WHERE after ->> 'n_changed' IS NOT NULL;

-- Drop reasons are a closed set now. A post-processing answer that changed nothing recorded its
-- note as the reason itself; it becomes the reason `unchanged` with the note as its detail.
UPDATE llm_requests SET drops = (
    SELECT json_group_array(CASE WHEN d.value ->> 'reason' IN ('wrong_type', 'missing_text', 'too_short', 'too_long', 'duplicate_in_response', 'duplicate_of_existing',
                                         'truncated', 'near_duplicate_in_response', 'near_duplicate_of_known',
                                         'duplicate_by_vector', 'unchanged')
                                 THEN json(d.value)
                                 ELSE json_object('index', 0, 'reason', 'unchanged', 'detail', d.value ->> 'reason') END)
      FROM json_each(llm_requests.drops) AS d)
 WHERE json_type(drops) = 'array'
   AND EXISTS (SELECT 1 FROM json_each(llm_requests.drops) AS d
                WHERE d.value ->> 'reason' IS NULL OR d.value ->> 'reason' NOT IN ('wrong_type', 'missing_text', 'too_short', 'too_long', 'duplicate_in_response', 'duplicate_of_existing',
                                         'truncated', 'near_duplicate_in_response', 'near_duplicate_of_known',
                                         'duplicate_by_vector', 'unchanged'));

-- How many items each request dropped for each reason, for the metrics.
CREATE TABLE request_drops (
    request_id TEXT NOT NULL REFERENCES llm_requests(id) ON DELETE CASCADE,
    reason     TEXT NOT NULL,
    n          INTEGER NOT NULL,
    PRIMARY KEY (request_id, reason)
) STRICT;
INSERT INTO request_drops (request_id, reason, n)
SELECT r.id, d.value ->> 'reason', COUNT(*)
  FROM llm_requests r, json_each(r.drops) AS d
 WHERE json_type(r.drops) = 'array'
 GROUP BY r.id, d.value ->> 'reason';
