#!/usr/bin/env python3
"""Synthetic MS MARCO v2.1 segment corpus for the speed benchmark (issue 4).

Usage: python3 scripts/bench-gen-corpus.py OUTDIR [SEGMENTS=1000000] [SHARDS=10]
Writes OUTDIR/v21/msmarco_v2.1_doc_segmented_XX.json.gz (the real field layout: docid, url, title,
headings, segment, start_char, end_char) and, with the same text, OUTDIR/jsonl/part_XX.jsonl.gz
({"id", "contents": title + "\n" + segment}) for Anserini's JsonCollection.

Text comes from a unigram word-frequency model estimated on real text in ../shared/data (the 4,300
DL19 MS MARCO passages, the MS MARCO v2.1 segments of the TREC RAG researchy-dev file, Cranfield):
words are drawn independently with their corpus frequencies (Zipf-like), segment lengths are
drawn uniformly in 60..200 words (MS MARCO v2.1 segments are 500-1,000 characters, median ~
150 words), 10 segments per synthetic document sharing a title and headings. Deterministic (seed 42).
"""
import gzip, json, os, re, sys
from collections import Counter
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "..", "shared", "data")
out = sys.argv[1]
n = int(sys.argv[2]) if len(sys.argv) > 2 else 1_000_000
shards = int(sys.argv[3]) if len(sys.argv) > 3 else 10

texts = []
for q in json.load(gzip.open(os.path.join(DATA, "trec-dl-rerank", "rank_llm_data_bm25_dl19_top100.json.gz"), "rt")):
    texts += [h["content"] for h in q["hits"]]
for l in gzip.open(os.path.join(DATA, "trec-rag", "rag24", "ragnarok_data_bm25_rag24.researchy-dev_small_top100.jsonl.gz"), "rt"):
    texts += [c["doc"]["segment"] for c in json.loads(l)["candidates"]]
texts.append(open(os.path.join(DATA, "classic-ir", "cranfield", "cran.all.1400"), errors="replace").read())
counts = Counter(w for t in texts for w in re.findall(r"\S+", t))
vocab = np.array(list(counts.keys()), dtype=object)
p = np.array(list(counts.values()), dtype=np.float64)
p /= p.sum()
print(f"vocabulary {len(vocab)} words from {sum(counts.values())} tokens", file=sys.stderr)

rng = np.random.default_rng(42)
os.makedirs(os.path.join(out, "v21"), exist_ok=True)
os.makedirs(os.path.join(out, "jsonl"), exist_ok=True)
per_shard = (n + shards - 1) // shards
seg_no = 0
for s in range(shards):
    m = min(per_shard, n - seg_no)
    if m <= 0:
        break
    lens = rng.integers(60, 201, size=m)
    words = rng.choice(vocab, size=int(lens.sum()), p=p)
    with gzip.open(os.path.join(out, "v21", f"msmarco_v2.1_doc_segmented_{s:02d}.json.gz"), "wt", compresslevel=1) as f, \
         gzip.open(os.path.join(out, "jsonl", f"part_{s:02d}.jsonl.gz"), "wt", compresslevel=1) as g:
        pos = 0
        start = 0
        for i in range(m):
            k = seg_no + i
            doc, part = divmod(k, 10)
            seg = " ".join(words[pos : pos + lens[i]]) + "."
            pos += lens[i]
            if part == 0:
                tw = rng.choice(vocab, size=6, p=p)
                title = " ".join(tw).capitalize()
                headings = title + "\n" + " ".join(rng.choice(vocab, size=4, p=p))
                start = 0
            docid = f"msmarco_v2.1_doc_{s:02d}_{doc}#{part}_{k}"
            rec = {"docid": docid, "url": f"https://example.org/{doc}", "title": title, "headings": headings,
                   "segment": seg, "start_char": start, "end_char": start + len(seg)}
            start += len(seg) // 2
            f.write(json.dumps(rec) + "\n")
            g.write(json.dumps({"id": docid, "contents": title + "\n" + seg}) + "\n")
    seg_no += m
    print(f"shard {s}: {m} segments", file=sys.stderr)
