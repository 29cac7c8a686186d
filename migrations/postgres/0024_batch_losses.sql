-- How many times a request went back to `planned` because the provider lost its batch (404 past
-- the grace, purged or unreadable results, past its expiry). Each loss re-plans it without
-- spending an attempt, since its content is not at fault; a cause that lasts would otherwise
-- create a new billed batch forever, so past `[batch] max_batch_losses` the lane is paused.
ALTER TABLE llm_requests ADD COLUMN batch_losses BIGINT NOT NULL DEFAULT 0;
