-- A turn's hold on its conversation is a lease row, not a transaction: the holder renews it while
-- the pipeline runs (LLM calls included) without keeping a database connection, a crashed holder's
-- lease expires, and a commit checks the lease is still its own (fencing).
ALTER TABLE conversations
    ADD COLUMN lease_holder     UUID,
    ADD COLUMN lease_expires_at TIMESTAMPTZ,
    ADD CONSTRAINT conversations_lease_complete
        CHECK ((lease_holder IS NULL) = (lease_expires_at IS NULL));

-- Results of requests sent with an Idempotency-Key, written in the same transaction as the turn or
-- conversation they created, so "stored" and "key recorded" cannot diverge.
CREATE TABLE idempotency_keys (
    user_id      BIGINT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    key          TEXT NOT NULL CHECK (length(key) BETWEEN 1 AND 255),
    -- SHA-256 of the route and the canonical request body.
    fingerprint  BYTEA NOT NULL,
    -- The stored result (a turn or a conversation as JSON), replayed to a retry.
    result       JSONB NOT NULL,
    created_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (user_id, key)
);
CREATE INDEX idempotency_keys_created_at ON idempotency_keys (created_at);
