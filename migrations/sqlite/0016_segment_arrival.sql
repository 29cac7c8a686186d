-- When the last message of a segment arrived, by the injected clock (not the time it is dated):
-- idle closing reads it as well as the message time, so a conversation whose messages are dated
-- ahead of the clock still closes. Rows from before read their creation time instead.
ALTER TABLE segments ADD COLUMN last_arrived_at TEXT;
