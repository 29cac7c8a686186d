-- The most output a request may produce (the `max_tokens` it is sent with), when its tier has a
-- daily budget: the allowance learned from recent answers of its purpose and model, and the
-- amount its budget reservation prices. NULL: the config's `max_tokens`.
ALTER TABLE llm_requests ADD COLUMN max_output_tokens INTEGER;
-- What the allowance is learned from: the newest answers of one purpose and model.
CREATE INDEX llm_requests_recent_outputs ON llm_requests(purpose, model, completed_at);
-- When a process last asked a provider for something: provider quotas are split between the
-- processes that use them, not every process that merely runs.
ALTER TABLE workers ADD COLUMN wanted_at TEXT;
