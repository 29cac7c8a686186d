-- When a behaviour that acts on stored data was last switched on: the extraction reviewer reviews
-- only memories written since, so turning it on does not buy a review of every old memory at
-- once (`memsift postprocess review-backlog` reviews those on purpose, after printing the cost).
CREATE TABLE switches (
    name     TEXT PRIMARY KEY,
    on_since TIMESTAMPTZ NOT NULL
);
