-- memsift data model (docs/design.md, "Data model"), SQLite flavour.
-- Ids are hyphenated UUID text; times are RFC 3339 UTC text written by the application (never
-- SQLite's own clock, so tests can inject time); booleans are 0/1; JSON is text; vectors are
-- little-endian f32 BLOBs. The PostgreSQL migration of the same number holds the same tables.

CREATE TABLE users (
    id             TEXT PRIMARY KEY,
    external_id    TEXT NOT NULL UNIQUE,
    billing_tier   TEXT,
    memory_enabled INTEGER NOT NULL DEFAULT 1,
    timezone       TEXT NOT NULL DEFAULT 'UTC',
    created_at     TEXT NOT NULL
) STRICT;

CREATE TABLE segments (
    id               TEXT PRIMARY KEY,
    user_id          TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    conversation_key TEXT NOT NULL,
    external_id      TEXT,
    status           TEXT NOT NULL CHECK (status IN ('open','closed','extracting','extracted','failed','dead')),
    first_message_at TEXT NOT NULL,
    last_message_at  TEXT NOT NULL,
    n_messages       INTEGER NOT NULL DEFAULT 0,
    closed_at        TEXT,
    close_reason     TEXT CHECK (close_reason IN ('boundary','idle','manual')),
    attempts         INTEGER NOT NULL DEFAULT 0,
    next_attempt_at  TEXT,
    last_error       TEXT,
    claimed_by       TEXT,
    claimed_until    TEXT,
    planned_chunks   INTEGER,
    extracted_at     TEXT,
    prompt_version   TEXT,
    model            TEXT,
    created_at       TEXT NOT NULL
) STRICT;
-- One open segment per conversation: a second would make membership ambiguous.
CREATE UNIQUE INDEX segments_one_open_per_conversation ON segments(user_id, conversation_key) WHERE status = 'open';
CREATE INDEX segments_by_status ON segments(status, closed_at);
CREATE INDEX segments_by_user ON segments(user_id, first_message_at);

CREATE TABLE messages (
    id                    TEXT PRIMARY KEY,
    user_id               TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    segment_id            TEXT NOT NULL REFERENCES segments(id) ON DELETE CASCADE,
    seq                   INTEGER NOT NULL,
    role                  TEXT NOT NULL CHECK (role IN ('user','assistant','tool','system')),
    speaker               TEXT,
    content               TEXT NOT NULL,
    created_at            TEXT NOT NULL,
    external_id           TEXT,
    dedupe_key            TEXT NOT NULL,
    referenced_memory_ids TEXT NOT NULL DEFAULT '[]',
    UNIQUE (user_id, dedupe_key),
    UNIQUE (segment_id, seq)
) STRICT;

CREATE TABLE batches (
    id                  TEXT PRIMARY KEY,
    provider            TEXT NOT NULL,
    provider_batch_id   TEXT UNIQUE,
    purpose             TEXT NOT NULL,
    config_key          TEXT NOT NULL,
    model               TEXT,
    status              TEXT NOT NULL CHECK (status IN ('planned','submitting','submitted','ended','ingested','orphaned','failed')),
    n_requests          INTEGER NOT NULL DEFAULT 0,
    n_succeeded         INTEGER NOT NULL DEFAULT 0,
    n_errored           INTEGER NOT NULL DEFAULT 0,
    n_expired           INTEGER NOT NULL DEFAULT 0,
    n_canceled          INTEGER NOT NULL DEFAULT 0,
    input_file_id       TEXT,
    created_at          TEXT NOT NULL,
    submit_started_at   TEXT,
    submitted_at        TEXT,
    ended_at            TEXT,
    provider_expires_at TEXT,
    next_poll_at        TEXT,
    n_polls             INTEGER NOT NULL DEFAULT 0,
    ingest_cursor       INTEGER NOT NULL DEFAULT 0,
    claimed_by          TEXT,
    claimed_until       TEXT,
    last_error          TEXT
) STRICT;
CREATE INDEX batches_by_status ON batches(status, next_poll_at);

CREATE TABLE llm_requests (
    id                    TEXT PRIMARY KEY,
    purpose               TEXT NOT NULL,
    user_id               TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    segment_id            TEXT REFERENCES segments(id) ON DELETE CASCADE,
    chunk_index           INTEGER NOT NULL DEFAULT 0,
    subject               TEXT NOT NULL DEFAULT '{}',
    lane                  TEXT NOT NULL CHECK (lane IN ('batch','immediate','heuristic')),
    config_key            TEXT NOT NULL,
    provider              TEXT NOT NULL,
    model                 TEXT,
    prompt_version        TEXT NOT NULL,
    context               TEXT NOT NULL DEFAULT '{}',
    request_body          TEXT,
    status                TEXT NOT NULL CHECK (status IN ('planned','submitted','succeeded','errored','expired','canceled','applied','dead')),
    attempt               INTEGER NOT NULL DEFAULT 1,
    batch_id              TEXT REFERENCES batches(id),
    raw_output            TEXT,
    stop_reason           TEXT,
    input_tokens          INTEGER NOT NULL DEFAULT 0,
    output_tokens         INTEGER NOT NULL DEFAULT 0,
    cache_creation_tokens INTEGER NOT NULL DEFAULT 0,
    cache_read_tokens     INTEGER NOT NULL DEFAULT 0,
    cost_usd              REAL NOT NULL DEFAULT 0,
    n_items               INTEGER NOT NULL DEFAULT 0,
    n_dropped             INTEGER NOT NULL DEFAULT 0,
    drops                 TEXT NOT NULL DEFAULT '[]',
    error                 TEXT,
    created_at            TEXT NOT NULL,
    submitted_at          TEXT,
    completed_at          TEXT,
    applied_at            TEXT
) STRICT;
-- One attempt number per chunk of a segment: re-planning can never create two live twins.
CREATE UNIQUE INDEX llm_requests_one_per_attempt ON llm_requests(purpose, segment_id, chunk_index, attempt) WHERE segment_id IS NOT NULL;
CREATE INDEX llm_requests_by_status ON llm_requests(status, created_at);
CREATE INDEX llm_requests_by_batch ON llm_requests(batch_id);
CREATE INDEX llm_requests_by_user ON llm_requests(user_id, created_at);

CREATE TABLE memories (
    id                    TEXT PRIMARY KEY,
    user_id               TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    text                  TEXT NOT NULL,
    dedupe_key            TEXT NOT NULL,
    embedding             BLOB,
    embedding_model       TEXT,
    embedding_dim         INTEGER,
    importance            REAL NOT NULL DEFAULT 0.5,
    confidence            REAL NOT NULL,
    happens_at            TEXT,
    expires_at            TEXT,
    sensitive             INTEGER NOT NULL DEFAULT 0,
    temporal              TEXT NOT NULL CHECK (temporal IN ('one_off','recurring','durable','unknown')),
    access_count          INTEGER NOT NULL DEFAULT 0,
    last_accessed_at      TEXT,
    archived_at           TEXT,
    archive_reason        TEXT,
    superseded_by         TEXT REFERENCES memories(id) ON DELETE SET NULL,
    refined_at            TEXT,
    refinement_rejections INTEGER NOT NULL DEFAULT 0,
    source_segment_id     TEXT REFERENCES segments(id) ON DELETE SET NULL,
    source_request_id     TEXT REFERENCES llm_requests(id) ON DELETE SET NULL,
    prompt_version        TEXT NOT NULL,
    created_at            TEXT NOT NULL,
    updated_at            TEXT NOT NULL
) STRICT;
-- The exact-dedupe guarantee: one active memory per normalised text per user.
CREATE UNIQUE INDEX memories_one_active_per_key ON memories(user_id, dedupe_key) WHERE archived_at IS NULL;
CREATE INDEX memories_by_user ON memories(user_id, archived_at, created_at);

CREATE TABLE memory_evidence (
    memory_id  TEXT NOT NULL REFERENCES memories(id) ON DELETE CASCADE,
    message_id TEXT NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
    PRIMARY KEY (memory_id, message_id)
) STRICT;

CREATE TABLE memory_links (
    source_id         TEXT NOT NULL REFERENCES memories(id) ON DELETE CASCADE,
    target_id         TEXT NOT NULL REFERENCES memories(id) ON DELETE CASCADE,
    kind              TEXT NOT NULL CHECK (kind IN ('conflicts','supersedes','causes','instance_of','invalidated_by','motivated_by')),
    confidence        REAL NOT NULL,
    reasoning         TEXT NOT NULL DEFAULT '',
    origin_request_id TEXT REFERENCES llm_requests(id) ON DELETE SET NULL,
    created_at        TEXT NOT NULL,
    PRIMARY KEY (source_id, target_id, kind)
) STRICT;
CREATE INDEX memory_links_by_target ON memory_links(target_id);

CREATE TABLE entities (
    id              TEXT PRIMARY KEY,
    user_id         TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    name            TEXT NOT NULL,
    normalized_name TEXT NOT NULL,
    kind            TEXT NOT NULL,
    link_count      INTEGER NOT NULL DEFAULT 0,
    last_linked_at  TEXT,
    archived_at     TEXT,
    created_at      TEXT NOT NULL,
    UNIQUE (user_id, normalized_name, kind)
) STRICT;

CREATE TABLE memory_entities (
    memory_id TEXT NOT NULL REFERENCES memories(id) ON DELETE CASCADE,
    entity_id TEXT NOT NULL REFERENCES entities(id) ON DELETE CASCADE,
    PRIMARY KEY (memory_id, entity_id)
) STRICT;
CREATE INDEX memory_entities_by_entity ON memory_entities(entity_id);

CREATE TABLE operations (
    id         TEXT PRIMARY KEY,
    kind       TEXT NOT NULL,
    user_id    TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    request_id TEXT REFERENCES llm_requests(id) ON DELETE SET NULL,
    reason     TEXT NOT NULL DEFAULT '',
    before     TEXT NOT NULL,
    after      TEXT NOT NULL,
    applied_at TEXT NOT NULL,
    undone_at  TEXT
) STRICT;
CREATE INDEX operations_by_user ON operations(user_id, applied_at);

CREATE TABLE schedules (
    name          TEXT PRIMARY KEY,
    last_fired_at TEXT,
    lease_owner   TEXT,
    lease_until   TEXT
) STRICT;

CREATE TABLE tombstones (
    user_id     TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    fingerprint TEXT NOT NULL,
    created_at  TEXT NOT NULL,
    PRIMARY KEY (user_id, fingerprint)
) STRICT;
