-- One-time sign-in codes: `serve` prints a link carrying one for the first user, and the chat page
-- exchanges it once for a token (POST /v1/sign-in). Only the SHA-256 is kept; a used code keeps its
-- row (used_at) so that the server knows the link did its job and prints no new one.
CREATE TABLE sign_in_codes (
    id           BIGSERIAL PRIMARY KEY,
    user_id      BIGINT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    code_sha256  BYTEA NOT NULL UNIQUE CHECK (octet_length(code_sha256) = 32),
    created_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
    expires_at   TIMESTAMPTZ NOT NULL,
    used_at      TIMESTAMPTZ
);
CREATE INDEX sign_in_codes_user ON sign_in_codes (user_id);
