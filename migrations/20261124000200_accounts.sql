-- Accounts: administrators among the users, disabled users, and tokens that can be named, expire,
-- be revoked and show when they were last used.
ALTER TABLE users
    ADD COLUMN is_admin     BOOLEAN NOT NULL DEFAULT false,
    ADD COLUMN disabled_at  TIMESTAMPTZ;

ALTER TABLE api_tokens
    ADD COLUMN name          TEXT CHECK (name IS NULL OR length(btrim(name)) BETWEEN 1 AND 100),
    ADD COLUMN expires_at    TIMESTAMPTZ,
    ADD COLUMN last_used_at  TIMESTAMPTZ,
    -- A revoked token is kept (as its digest) so that using it says "revoked", not "unknown".
    ADD COLUMN revoked_at    TIMESTAMPTZ,
    ADD CHECK (expires_at IS NULL OR expires_at > created_at);
