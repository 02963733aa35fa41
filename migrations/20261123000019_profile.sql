-- Profile statements: what a user says about themselves once, copied into the PTKB of every new
-- conversation (so clients that cannot send a PTKB still get personal answers).
CREATE TABLE profile_statements (
    id          BIGSERIAL PRIMARY KEY,
    user_id     BIGINT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    text        TEXT NOT NULL CHECK (length(btrim(text)) BETWEEN 1 AND 2000),
    created_at  TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX profile_statements_user ON profile_statements (user_id, id);

-- Conversations started through the OpenAI-compatible endpoint, with the model (collection) they
-- were started for: a client that resends the whole history continues the one whose turns match.
CREATE TABLE chat_conversations (
    conversation_id  UUID PRIMARY KEY REFERENCES conversations (id) ON DELETE CASCADE,
    user_id          BIGINT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    model            TEXT NOT NULL CHECK (length(model) BETWEEN 1 AND 100)
);
CREATE INDEX chat_conversations_user_model ON chat_conversations (user_id, model);
