-- A request's estimated cost, reserved against its user's daily budget from the moment it is
-- planned until it is answered (then its real `cost_usd` counts instead), so the requests planned
-- in one step together can never pass the budget.
ALTER TABLE llm_requests ADD COLUMN reserved_usd REAL NOT NULL DEFAULT 0;

-- The model that wrote each memory: the producing request's model, `heuristic` for the offline
-- lane, NULL for an operator's supersede. Rows written before this column take it from their
-- request, which names the model (or, for the offline lane, only the provider).
ALTER TABLE memories ADD COLUMN model TEXT;
UPDATE memories SET model = (
    SELECT COALESCE(NULLIF(r.model, ''), r.provider) FROM llm_requests r WHERE r.id = memories.source_request_id
) WHERE source_request_id IS NOT NULL;
