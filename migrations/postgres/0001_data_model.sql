-- memsift data model (docs/design.md, "Data model"), PostgreSQL flavour.
-- Ids are hyphenated UUID text (the same text is the provider custom_id); times are timestamptz
-- written by the application (never now(), so tests can inject time); JSON is jsonb; vectors are
-- little-endian f32 bytea (pgvector is not assumed). The SQLite migration of the same number
-- holds the same tables.

CREATE TABLE users (
    id             TEXT PRIMARY KEY,
    external_id    TEXT NOT NULL UNIQUE,
    billing_tier   TEXT,
    memory_enabled BOOLEAN NOT NULL DEFAULT TRUE,
    timezone       TEXT NOT NULL DEFAULT 'UTC',
    created_at     TIMESTAMPTZ NOT NULL
);

CREATE TABLE segments (
    id               TEXT PRIMARY KEY,
    user_id          TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    conversation_key TEXT NOT NULL,
    external_id      TEXT,
    status           TEXT NOT NULL CHECK (status IN ('open','closed','extracting','extracted','failed','dead')),
    first_message_at TIMESTAMPTZ NOT NULL,
    last_message_at  TIMESTAMPTZ NOT NULL,
    n_messages       BIGINT NOT NULL DEFAULT 0,
    closed_at        TIMESTAMPTZ,
    close_reason     TEXT CHECK (close_reason IN ('boundary','idle','manual')),
    attempts         BIGINT NOT NULL DEFAULT 0,
    next_attempt_at  TIMESTAMPTZ,
    last_error       TEXT,
    claimed_by       TEXT,
    claimed_until    TIMESTAMPTZ,
    planned_chunks   BIGINT,
    extracted_at     TIMESTAMPTZ,
    prompt_version   TEXT,
    model            TEXT,
    created_at       TIMESTAMPTZ NOT NULL
);
-- One open segment per conversation: a second would make membership ambiguous.
CREATE UNIQUE INDEX segments_one_open_per_conversation ON segments(user_id, conversation_key) WHERE status = 'open';
CREATE INDEX segments_by_status ON segments(status, closed_at);
CREATE INDEX segments_by_user ON segments(user_id, first_message_at);

CREATE TABLE messages (
    id                    TEXT PRIMARY KEY,
    user_id               TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    segment_id            TEXT NOT NULL REFERENCES segments(id) ON DELETE CASCADE,
    seq                   BIGINT NOT NULL,
    role                  TEXT NOT NULL CHECK (role IN ('user','assistant','tool','system')),
    speaker               TEXT,
    content               TEXT NOT NULL,
    created_at            TIMESTAMPTZ NOT NULL,
    external_id           TEXT,
    dedupe_key            TEXT NOT NULL,
    referenced_memory_ids JSONB NOT NULL DEFAULT '[]',
    UNIQUE (user_id, dedupe_key),
    UNIQUE (segment_id, seq)
);

CREATE TABLE batches (
    id                  TEXT PRIMARY KEY,
    provider            TEXT NOT NULL,
    provider_batch_id   TEXT UNIQUE,
    purpose             TEXT NOT NULL,
    config_key          TEXT NOT NULL,
    model               TEXT,
    status              TEXT NOT NULL CHECK (status IN ('planned','submitting','submitted','ended','ingested','orphaned','failed')),
    n_requests          BIGINT NOT NULL DEFAULT 0,
    n_succeeded         BIGINT NOT NULL DEFAULT 0,
    n_errored           BIGINT NOT NULL DEFAULT 0,
    n_expired           BIGINT NOT NULL DEFAULT 0,
    n_canceled          BIGINT NOT NULL DEFAULT 0,
    input_file_id       TEXT,
    created_at          TIMESTAMPTZ NOT NULL,
    submit_started_at   TIMESTAMPTZ,
    submitted_at        TIMESTAMPTZ,
    ended_at            TIMESTAMPTZ,
    provider_expires_at TIMESTAMPTZ,
    next_poll_at        TIMESTAMPTZ,
    n_polls             BIGINT NOT NULL DEFAULT 0,
    ingest_cursor       BIGINT NOT NULL DEFAULT 0,
    claimed_by          TEXT,
    claimed_until       TIMESTAMPTZ,
    last_error          TEXT
);
CREATE INDEX batches_by_status ON batches(status, next_poll_at);

CREATE TABLE llm_requests (
    id                    TEXT PRIMARY KEY,
    purpose               TEXT NOT NULL,
    user_id               TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    segment_id            TEXT REFERENCES segments(id) ON DELETE CASCADE,
    chunk_index           BIGINT NOT NULL DEFAULT 0,
    subject               JSONB NOT NULL DEFAULT '{}',
    lane                  TEXT NOT NULL CHECK (lane IN ('batch','immediate','heuristic')),
    config_key            TEXT NOT NULL,
    provider              TEXT NOT NULL,
    model                 TEXT,
    prompt_version        TEXT NOT NULL,
    context               JSONB NOT NULL DEFAULT '{}',
    request_body          JSONB,
    status                TEXT NOT NULL CHECK (status IN ('planned','submitted','succeeded','errored','expired','canceled','applied','dead')),
    attempt               BIGINT NOT NULL DEFAULT 1,
    batch_id              TEXT REFERENCES batches(id),
    raw_output            TEXT,
    stop_reason           TEXT,
    input_tokens          BIGINT NOT NULL DEFAULT 0,
    output_tokens         BIGINT NOT NULL DEFAULT 0,
    cache_creation_tokens BIGINT NOT NULL DEFAULT 0,
    cache_read_tokens     BIGINT NOT NULL DEFAULT 0,
    cost_usd              DOUBLE PRECISION NOT NULL DEFAULT 0,
    n_items               BIGINT NOT NULL DEFAULT 0,
    n_dropped             BIGINT NOT NULL DEFAULT 0,
    drops                 JSONB NOT NULL DEFAULT '[]',
    error                 TEXT,
    created_at            TIMESTAMPTZ NOT NULL,
    submitted_at          TIMESTAMPTZ,
    completed_at          TIMESTAMPTZ,
    applied_at            TIMESTAMPTZ
);
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
    embedding             BYTEA,
    embedding_model       TEXT,
    embedding_dim         BIGINT,
    importance            DOUBLE PRECISION NOT NULL DEFAULT 0.5,
    confidence            DOUBLE PRECISION NOT NULL,
    happens_at            TIMESTAMPTZ,
    expires_at            TIMESTAMPTZ,
    sensitive             BOOLEAN NOT NULL DEFAULT FALSE,
    temporal              TEXT NOT NULL CHECK (temporal IN ('one_off','recurring','durable','unknown')),
    access_count          BIGINT NOT NULL DEFAULT 0,
    last_accessed_at      TIMESTAMPTZ,
    archived_at           TIMESTAMPTZ,
    archive_reason        TEXT,
    superseded_by         TEXT REFERENCES memories(id) ON DELETE SET NULL,
    refined_at            TIMESTAMPTZ,
    refinement_rejections BIGINT NOT NULL DEFAULT 0,
    source_segment_id     TEXT REFERENCES segments(id) ON DELETE SET NULL,
    source_request_id     TEXT REFERENCES llm_requests(id) ON DELETE SET NULL,
    prompt_version        TEXT NOT NULL,
    created_at            TIMESTAMPTZ NOT NULL,
    updated_at            TIMESTAMPTZ NOT NULL
);
-- The exact-dedupe guarantee: one active memory per normalised text per user.
CREATE UNIQUE INDEX memories_one_active_per_key ON memories(user_id, dedupe_key) WHERE archived_at IS NULL;
CREATE INDEX memories_by_user ON memories(user_id, archived_at, created_at);

CREATE TABLE memory_evidence (
    memory_id  TEXT NOT NULL REFERENCES memories(id) ON DELETE CASCADE,
    message_id TEXT NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
    PRIMARY KEY (memory_id, message_id)
);

CREATE TABLE memory_links (
    source_id         TEXT NOT NULL REFERENCES memories(id) ON DELETE CASCADE,
    target_id         TEXT NOT NULL REFERENCES memories(id) ON DELETE CASCADE,
    kind              TEXT NOT NULL CHECK (kind IN ('conflicts','supersedes','causes','instance_of','invalidated_by','motivated_by')),
    confidence        DOUBLE PRECISION NOT NULL,
    reasoning         TEXT NOT NULL DEFAULT '',
    origin_request_id TEXT REFERENCES llm_requests(id) ON DELETE SET NULL,
    created_at        TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (source_id, target_id, kind)
);
CREATE INDEX memory_links_by_target ON memory_links(target_id);

CREATE TABLE entities (
    id              TEXT PRIMARY KEY,
    user_id         TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    name            TEXT NOT NULL,
    normalized_name TEXT NOT NULL,
    kind            TEXT NOT NULL,
    link_count      BIGINT NOT NULL DEFAULT 0,
    last_linked_at  TIMESTAMPTZ,
    archived_at     TIMESTAMPTZ,
    created_at      TIMESTAMPTZ NOT NULL,
    UNIQUE (user_id, normalized_name, kind)
);

CREATE TABLE memory_entities (
    memory_id TEXT NOT NULL REFERENCES memories(id) ON DELETE CASCADE,
    entity_id TEXT NOT NULL REFERENCES entities(id) ON DELETE CASCADE,
    PRIMARY KEY (memory_id, entity_id)
);
CREATE INDEX memory_entities_by_entity ON memory_entities(entity_id);

CREATE TABLE operations (
    id         TEXT PRIMARY KEY,
    kind       TEXT NOT NULL,
    user_id    TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    request_id TEXT REFERENCES llm_requests(id) ON DELETE SET NULL,
    reason     TEXT NOT NULL DEFAULT '',
    before     JSONB NOT NULL,
    after      JSONB NOT NULL,
    applied_at TIMESTAMPTZ NOT NULL,
    undone_at  TIMESTAMPTZ
);
CREATE INDEX operations_by_user ON operations(user_id, applied_at);

CREATE TABLE schedules (
    name          TEXT PRIMARY KEY,
    last_fired_at TIMESTAMPTZ,
    lease_owner   TEXT,
    lease_until   TIMESTAMPTZ
);

CREATE TABLE tombstones (
    user_id     TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    fingerprint TEXT NOT NULL,
    created_at  TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (user_id, fingerprint)
);
