-- The circuit breaker of every provider lane as last seen by any process, so `memsift batches`,
-- the admin pages and /metrics show a paused lane and why; and a heartbeat per process, so the
-- processes sharing this database can split a provider's quota between them.
CREATE TABLE lane_health (
    lane TEXT NOT NULL CHECK (lane IN ('batch', 'immediate')),
    provider TEXT NOT NULL,
    model TEXT NOT NULL,
    endpoint TEXT NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('closed', 'open', 'half_open')),
    setting_fault INTEGER NOT NULL DEFAULT 0,
    reason TEXT,
    fix TEXT,
    opened_at TEXT,
    next_probe_at TEXT,
    changed_at TEXT NOT NULL,
    changed_by TEXT NOT NULL,
    n_transitions INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (lane, provider, model, endpoint)
);
CREATE TABLE workers (
    id TEXT PRIMARY KEY,
    seen_at TEXT NOT NULL
);
