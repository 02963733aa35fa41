-- convrag's state: users and their tokens, conversations with their personal textual knowledge base
-- (PTKB), and turns with everything each pipeline stage produced. Constraints make the database itself
-- refuse rows that would be inconsistent.

CREATE TABLE users (
    id          BIGSERIAL PRIMARY KEY,
    name        TEXT NOT NULL UNIQUE
                CHECK (length(btrim(name)) BETWEEN 1 AND 200),
    created_at  TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- Only the SHA-256 of a token is kept: a leaked table does not leak usable tokens.
CREATE TABLE api_tokens (
    id            BIGSERIAL PRIMARY KEY,
    user_id       BIGINT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    token_sha256  BYTEA NOT NULL UNIQUE CHECK (octet_length(token_sha256) = 32),
    created_at    TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX api_tokens_user ON api_tokens (user_id);

CREATE TABLE conversations (
    id           UUID PRIMARY KEY,
    user_id      BIGINT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    title        TEXT NOT NULL DEFAULT '' CHECK (length(title) <= 500),
    -- External id such as an iKAT topic/persona number ("9-1") or a TREC topic id.
    external_id  TEXT CHECK (external_id IS NULL OR length(btrim(external_id)) BETWEEN 1 AND 200),
    -- Passage collection the conversation retrieves from (NULL: the server's default).
    collection   TEXT CHECK (collection IS NULL OR collection ~ '^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$'),
    created_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
    UNIQUE (user_id, external_id)
);
CREATE INDEX conversations_user ON conversations (user_id, created_at DESC);

-- PTKB statements are versioned by turn position so a past turn can be reproduced exactly: a
-- version is visible to turn `seq` when visible_from_seq <= seq < hidden_from_seq. Editing a
-- statement that a turn has already seen closes the old version and opens a new one.
CREATE TABLE ptkb_statements (
    id                BIGSERIAL PRIMARY KEY,
    conversation_id   UUID NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    statement_id      TEXT NOT NULL CHECK (statement_id ~ '^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$'),
    text              TEXT NOT NULL CHECK (length(btrim(text)) BETWEEN 1 AND 2000),
    visible_from_seq  INT NOT NULL CHECK (visible_from_seq >= 1),
    hidden_from_seq   INT CHECK (hidden_from_seq IS NULL OR hidden_from_seq > visible_from_seq),
    created_at        TIMESTAMPTZ NOT NULL DEFAULT now(),
    UNIQUE (conversation_id, id)
);
-- At most one open version of a statement id per conversation.
CREATE UNIQUE INDEX ptkb_one_open_version
    ON ptkb_statements (conversation_id, statement_id) WHERE hidden_from_seq IS NULL;
CREATE INDEX ptkb_by_conversation ON ptkb_statements (conversation_id, statement_id);

CREATE TABLE turns (
    id                   UUID PRIMARY KEY,
    conversation_id      UUID NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    -- Position of the user's utterance in the conversation, 1-based.
    seq                  INT NOT NULL CHECK (seq >= 1),
    -- Regenerations of the same position get increasing versions; one is current.
    version              INT NOT NULL DEFAULT 1 CHECK (version >= 1),
    is_current           BOOLEAN NOT NULL DEFAULT true,
    -- External turn id (iKAT "turn_id", QReCC "Turn_no"); runs use "<number>_<turn_id>".
    external_turn_id     TEXT CHECK (external_turn_id IS NULL OR length(btrim(external_turn_id)) BETWEEN 1 AND 100),
    utterance            TEXT NOT NULL CHECK (length(btrim(utterance)) BETWEEN 1 AND 10000),
    -- Reference inputs a manual run may use (iKAT resolved_utterance, ptkb_provenance) and the
    -- canonical response that an automatic run carries into later turns' context.
    reference_rewrite    TEXT,
    reference_ptkb       TEXT[],
    canonical_response   TEXT,
    -- What convrag produced.
    rewritten_utterance  TEXT,
    response_text        TEXT,
    generator            TEXT,
    settings             JSONB NOT NULL DEFAULT '{}'::jsonb,
    timings_ms           JSONB NOT NULL DEFAULT '{}'::jsonb,
    diagnostics          JSONB NOT NULL DEFAULT '{}'::jsonb,
    created_at           TIMESTAMPTZ NOT NULL DEFAULT now(),
    UNIQUE (conversation_id, seq, version),
    UNIQUE (id, conversation_id)
);
CREATE UNIQUE INDEX turns_one_current ON turns (conversation_id, seq) WHERE is_current;

-- The ranked PTKB for a turn: every statement version visible to it, with score and whether it was
-- selected as relevant.
CREATE TABLE turn_ptkb_rankings (
    turn_id          UUID NOT NULL,
    conversation_id  UUID NOT NULL,
    rank             INT NOT NULL CHECK (rank >= 1),
    statement_row    BIGINT NOT NULL,
    score            DOUBLE PRECISION NOT NULL CHECK (score = score), -- no NaN
    selected         BOOLEAN NOT NULL,
    PRIMARY KEY (turn_id, rank),
    UNIQUE (turn_id, statement_row),
    FOREIGN KEY (turn_id, conversation_id) REFERENCES turns (id, conversation_id) ON DELETE CASCADE,
    -- The statement must belong to the same conversation as the turn.
    FOREIGN KEY (conversation_id, statement_row) REFERENCES ptkb_statements (conversation_id, id)
);

-- Passage provenance of a turn, in final rank order.
CREATE TABLE turn_passages (
    turn_id          UUID NOT NULL REFERENCES turns (id) ON DELETE CASCADE,
    rank             INT NOT NULL CHECK (rank >= 1),
    passage_id       TEXT NOT NULL CHECK (length(passage_id) BETWEEN 1 AND 300),
    collection       TEXT,
    retrieval_score  DOUBLE PRECISION CHECK (retrieval_score = retrieval_score),
    rerank_score     DOUBLE PRECISION CHECK (rerank_score = rerank_score),
    score            DOUBLE PRECISION NOT NULL CHECK (score = score),
    used             BOOLEAN NOT NULL DEFAULT false,
    -- A snapshot of what was shown, so a turn stays inspectable if the index changes.
    title            TEXT,
    url              TEXT,
    text             TEXT,
    PRIMARY KEY (turn_id, rank),
    UNIQUE (turn_id, passage_id)
);

CREATE TABLE response_sentences (
    turn_id   UUID NOT NULL REFERENCES turns (id) ON DELETE CASCADE,
    position  INT NOT NULL CHECK (position >= 0),
    text      TEXT NOT NULL CHECK (length(btrim(text)) >= 1),
    PRIMARY KEY (turn_id, position)
);

-- Ordered citations of a sentence; each must point to a passage of the same turn.
CREATE TABLE sentence_citations (
    turn_id            UUID NOT NULL,
    sentence_position  INT NOT NULL,
    citation_order     INT NOT NULL CHECK (citation_order >= 0),
    passage_rank       INT NOT NULL,
    PRIMARY KEY (turn_id, sentence_position, citation_order),
    UNIQUE (turn_id, sentence_position, passage_rank),
    FOREIGN KEY (turn_id, sentence_position) REFERENCES response_sentences (turn_id, position) ON DELETE CASCADE,
    FOREIGN KEY (turn_id, passage_rank) REFERENCES turn_passages (turn_id, rank) ON DELETE CASCADE
);
