-- Batch runs (`convrag run ...`): what produced a submission file. Their turns are ordinary
-- conversations of the `batch` user (external id `<run name>/<topic id>`); this row holds the facts
-- a resumed run must share with the interrupted one, and what the run finally wrote.

CREATE TABLE batch_runs (
    id               BIGSERIAL PRIMARY KEY,
    user_id          BIGINT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    name             TEXT NOT NULL CHECK (name ~ '^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$'),
    -- e.g. `ikat`, `trec-rag-2024-ag`, `qrecc`, `poleval`.
    task             TEXT NOT NULL CHECK (length(btrim(task)) BETWEEN 1 AND 100),
    -- Every option that changes the output (stages, depth, generator, format options, ...).
    settings         JSONB NOT NULL,
    -- The reranking model when it is used: its id and the SHA-256 of each of its files.
    model_id         TEXT,
    model_sha256     TEXT CHECK (model_sha256 IS NULL OR model_sha256 ~ '^[0-9a-f]{64}$'),
    model_files      JSONB NOT NULL DEFAULT '{}'::jsonb,
    -- Manifest (`collection.json`) of every collection the run retrieves from, by name.
    collections      JSONB NOT NULL DEFAULT '{}'::jsonb,
    -- Input files by role (`topics`, `ranking`, ...): path and SHA-256.
    inputs           JSONB NOT NULL DEFAULT '{}'::jsonb,
    convrag_version  TEXT NOT NULL,
    created_at       TIMESTAMPTZ NOT NULL DEFAULT now(),
    finished_at      TIMESTAMPTZ,
    output_path      TEXT,
    output_sha256    TEXT CHECK (output_sha256 IS NULL OR output_sha256 ~ '^[0-9a-f]{64}$'),
    UNIQUE (user_id, name)
);
