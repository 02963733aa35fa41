-- A chat conversation is provisional from its creation until its first answered turn commits
-- (cleared in that turn's transaction): no resent history is matched to it meanwhile, and a
-- request whose turn fails or is refused deletes it, so a failed first turn leaves nothing.
ALTER TABLE chat_conversations ADD COLUMN provisional BOOLEAN NOT NULL DEFAULT false;
