-- The token a token was minted with (POST /v1/users/me/tokens): revoking a token revokes the
-- tokens made from it, and theirs, so a leaked token's offspring do not outlive its revocation.
-- Tokens are revoked, not deleted; a row goes only with its user, and its children with it.
ALTER TABLE api_tokens
    ADD COLUMN parent_id BIGINT REFERENCES api_tokens (id) ON DELETE CASCADE;
CREATE INDEX api_tokens_parent_id ON api_tokens (parent_id) WHERE parent_id IS NOT NULL;
