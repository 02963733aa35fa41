-- Relevance judgments a user uploads (TREC qrels text) to measure their stored batch runs in the
-- page's Runs view; like every other row of a user, invisible to other users.
CREATE TABLE user_qrels (
    user_id     BIGINT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    name        TEXT NOT NULL CHECK (name ~ '^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$'),
    body        TEXT NOT NULL,
    queries     INTEGER NOT NULL CHECK (queries >= 0),
    judgments   INTEGER NOT NULL CHECK (judgments >= 0),
    updated_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (user_id, name)
);
