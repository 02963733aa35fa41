-- A key's record goes with the conversation it created or added a turn to: a retry after the
-- conversation was deleted runs anew instead of replaying a resource that no longer exists.
ALTER TABLE idempotency_keys
    ADD COLUMN conversation_id UUID REFERENCES conversations (id) ON DELETE CASCADE;
CREATE INDEX idempotency_keys_conversation ON idempotency_keys (conversation_id);
