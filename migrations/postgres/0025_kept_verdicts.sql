-- A post-processing verdict that keeps a set of memories as it is (a consolidation the judge or its
-- review declined). Recorded on the request, not read back from its raw output (which is dropped
-- after `raw_output_retention_days`), so the same set is not proposed again on every run, each a
-- paid request and a place under the run's cap that another cluster could have used.
ALTER TABLE llm_requests ADD COLUMN verdict TEXT;
