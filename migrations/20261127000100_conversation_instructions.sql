-- A conversation's instructions: what a chat client's system message (or the user, through the
-- API and the page) asks of every answer; the LLM generator's prompt carries them.
ALTER TABLE conversations ADD COLUMN instructions TEXT
    CHECK (instructions IS NULL OR char_length(instructions) <= 4000);
