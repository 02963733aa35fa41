-- Where each passage of a turn stood in the first stage's lists, so "why this answer" can say which
-- retriever found it: BM25's rank, the bi-encoder's, and the fused (hybrid) list's. NULL: that
-- retriever did not run, or did not return the passage within its depth.
ALTER TABLE turn_passages
    ADD COLUMN bm25_rank  INTEGER CHECK (bm25_rank >= 1),
    ADD COLUMN dense_rank INTEGER CHECK (dense_rank >= 1),
    ADD COLUMN fused_rank INTEGER CHECK (fused_rank >= 1);
