-- Why a segment's requests do not show its turns whole: a turn larger than a chunk is sent in
-- parts (each under batch.chunk_budget_tokens, so no request passes its model's context window),
-- and planning says so here, where `memsift segments`, the admin pages and the API show it.
-- NULL when every turn went whole. Labels and token counts only, never message text.
ALTER TABLE segments ADD COLUMN plan_note TEXT;
