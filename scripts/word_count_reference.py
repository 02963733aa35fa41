#!/usr/bin/env python3
"""Reference word counts for convrag's `formats::words`, computed with the organizers' tools.

Run:  pip install spacy && python3 scripts/word_count_reference.py > tests/fixtures/trec_rag/word_counts.jsonl
Reads the iKAT 2023 canonical responses from ../shared/data (when present) plus hand-picked
tricky strings, and prints one JSON line per text:
  {"text": ..., "spacy_tokens": N, "trec_rag_words": M}
where N = len(spacy.tokenizer.Tokenizer(vocab)(text)) (iKAT's "Tokenizer function of
spacy.tokenizer") and M = len(unicodedata.normalize("NFKC", text.strip()).split()) (the TREC RAG
checkers' count). The Rust test `word_counts_match_reference_tools` checks convrag's counts
against this file.
"""
import json
import os
import sys
import unicodedata

from spacy.tokenizer import Tokenizer
from spacy.vocab import Vocab

tok = Tokenizer(Vocab())
texts = [
    "Hello world!", "Hello  world", "Hello\nworld", " Hello", "Hello ", "Hello   ", "", "   ",
    "a\u001fb", "a \u00a0b", "\tx", "a\u00a8b", "\ufb01ne \u2003 spaced\u3000out", "caf\u00e9 \u2013 ok",
    "line one\r\nline two", "x\u200by", "end.\n\n", "\u2474 one \u33c2", "tab\there  and\u2028there",
]
root = os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data", "ikat", "official", "2023_test_topics.json")
if os.path.exists(root):
    topics = json.load(open(root, encoding="utf-8"))
    responses = [t["response"] for topic in topics for t in topic["turns"]]
    texts += responses[::8]
else:
    print(f"note: {root} not found, only the hand-picked strings", file=sys.stderr)
for t in texts:
    print(json.dumps({
        "text": t,
        "spacy_tokens": len(tok(t)),
        "trec_rag_words": len(unicodedata.normalize("NFKC", t.strip()).split()),
    }))
