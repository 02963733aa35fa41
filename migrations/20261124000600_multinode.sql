-- Many convrag processes on one database: batch workers and collection manifests.

-- Batch runs spread over worker processes (`convrag run ... --worker`): each topic of a run is
-- claimed by one worker at a time with a lease that the worker renews while it computes; a lease
-- that runs out (the worker died) lets another worker take the topic over. The run's file is
-- rendered by the one worker that claims `render_worker` once every topic is done.

CREATE TABLE batch_topic_leases (
    run_id       BIGINT NOT NULL REFERENCES batch_runs (id) ON DELETE CASCADE,
    topic_id     TEXT NOT NULL,
    -- Order of the topic in the input: claims go in input order.
    position     INT NOT NULL,
    worker       TEXT,
    lease_until  TIMESTAMPTZ,
    done_at      TIMESTAMPTZ,
    PRIMARY KEY (run_id, topic_id)
);

CREATE INDEX batch_topic_leases_open ON batch_topic_leases (run_id, position) WHERE done_at IS NULL;

ALTER TABLE batch_runs
    ADD COLUMN render_worker      TEXT,
    ADD COLUMN render_lease_until TIMESTAMPTZ;

-- Collections are directories copied or mounted on every node: the digest of the checksum
-- manifest (`manifest.sha256.json`) the first server recorded for each name. A server whose copy
-- has another digest does not serve the collection.
CREATE TABLE collection_manifests (
    name         TEXT PRIMARY KEY CHECK (name ~ '^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$'),
    sha256       TEXT NOT NULL CHECK (sha256 ~ '^[0-9a-f]{64}$'),
    recorded_by  TEXT NOT NULL,
    recorded_at  TIMESTAMPTZ NOT NULL DEFAULT now()
);
