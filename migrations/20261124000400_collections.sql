-- Collections with an owner: shared ones (owner NULL; made by `convrag index` or an administrator,
-- kept in step with the indexes on disk) and private ones (made by a user from uploaded files,
-- visible to that user only). Private names are per owner: two users may both have "notes".
CREATE TABLE collections (
    id                BIGSERIAL PRIMARY KEY,
    name              TEXT NOT NULL CHECK (length(name) BETWEEN 1 AND 100),
    owner_id          BIGINT REFERENCES users (id) ON DELETE CASCADE,
    status            TEXT NOT NULL CHECK (status IN ('building', 'ready', 'failed')),
    -- Progress of the indexing job under way (or the last one): files read of files to read.
    files_total       INTEGER NOT NULL DEFAULT 0,
    files_done        INTEGER NOT NULL DEFAULT 0,
    documents         INTEGER NOT NULL DEFAULT 0,
    bytes             BIGINT NOT NULL DEFAULT 0,
    passages          BIGINT NOT NULL DEFAULT 0,
    error             TEXT,
    created_at        TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at        TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX collections_shared_name ON collections (name) WHERE owner_id IS NULL;
CREATE UNIQUE INDEX collections_private_name ON collections (owner_id, name) WHERE owner_id IS NOT NULL;
