-- Every batch ends. A results download that cannot be read as the provider's own format (a line
-- without end, an HTML page, a file that stops early, a stream that stalls) is a fault of the
-- batch, counted here, and after a few the batch's unanswered requests are re-planned without
-- spending their attempts. A batch the provider no longer knows (404 on poll or on its results)
-- records when that started, so after a grace period it is given up the same way.
ALTER TABLE batches ADD COLUMN download_failures INTEGER NOT NULL DEFAULT 0;
ALTER TABLE batches ADD COLUMN missing_since TEXT;
