-- Erasure keeps no text: erased facts are recorded as HMAC-SHA256 fingerprints of the user's
-- external id and of the fact's normalised text, keyed by a per-install secret kept outside the
-- database (`[erasure] key_file`). `tombstones` held the plain normalised text; memsift moves its
-- rows here, keyed, on the first start with a key, and empties it.
CREATE TABLE erased_facts (
    user_key    TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    erased_at   TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (user_key, fingerprint)
);

-- One row: a value that tells the key this database's fingerprints were made with from any other,
-- so a daemon started with another key refuses to run instead of letting erased facts back in.
CREATE TABLE erasure_key_check (
    id          INTEGER PRIMARY KEY CHECK (id = 1),
    check_value TEXT NOT NULL,
    created_at  TIMESTAMPTZ NOT NULL
);

-- A batch in flight when one of its users was erased: once it is ingested, what the provider
-- keeps of it (requests, results, files) is deleted too.
ALTER TABLE batches ADD COLUMN delete_when_ingested BOOLEAN NOT NULL DEFAULT FALSE;
