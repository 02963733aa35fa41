#!/usr/bin/env python3
"""Prepare the effectiveness benchmark inputs (issue 4) from ../shared/data.

Usage: python3 scripts/bench_prepare.py OUTDIR
Writes, for Anserini (JsonCollection) and convrag alike:
  OUTDIR/cran/docs/docs.jsonl   {"id", "contents": title + "\n" + text} (all .W sections kept,
                                 whitespace collapsed; the same text convrag's `smart` reader indexes)
  OUTDIR/cran/topics.tsv        the 225 queries by ordinal 1..225 (the qrels use ordinals)
  OUTDIR/cran/qrels.txt         cranqrel with gain = code for codes 1..4, code -1 -> 0
  OUTDIR/cran/qrels.inverted.txt gain = 5 - code for codes 1..4 (code 1 = "complete answer")
  OUTDIR/dl19/docs/docs.jsonl   the 4,300 DL19 BM25 candidate passages {"id", "contents"}
  OUTDIR/dl19/topics.tsv, qrels.txt  copies of the DL19 topics and NIST qrels
"""
import gzip, json, os, re, shutil, sys

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "..", "shared", "data")
out = sys.argv[1]

cran = os.path.join(DATA, "classic-ir", "cranfield")
os.makedirs(os.path.join(out, "cran", "docs"), exist_ok=True)
with open(os.path.join(out, "cran", "docs", "docs.jsonl"), "w") as f:
    text = open(os.path.join(cran, "cran.all.1400"), encoding="utf-8", errors="replace").read()
    for block in re.split(r"^\.I ", text, flags=re.M)[1:]:
        lines = block.split("\n")
        did, secs, s = lines[0].strip(), {}, None
        for l in lines[1:]:
            if re.match(r"^\.[A-Z]$", l.strip()):
                s = l.strip()[1]
                secs.setdefault(s, [])
                continue
            if s:
                secs[s].append(l)
        t = " ".join(" ".join(secs.get("T", [])).split())
        w = " ".join(" ".join(secs.get("W", [])).split())
        if not (t or w):
            continue
        contents = t + "\n" + w if t and w else (t or w)
        f.write(json.dumps({"id": did, "contents": contents}) + "\n")
qry = open(os.path.join(cran, "cran.qry"), encoding="utf-8", errors="replace").read().replace("\r", "")
queries, cur, in_w = [], None, False
for line in qry.split("\n"):
    if line.startswith(".I"):
        if cur is not None:
            queries.append(cur)
        cur, in_w = [], False
    elif line.startswith(".W"):
        in_w = True
    elif in_w:
        cur.append(line)
queries.append(cur)
with open(os.path.join(out, "cran", "topics.tsv"), "w") as f:
    for i, q in enumerate(queries, 1):
        f.write(f"{i}\t{' '.join(' '.join(q).split())}\n")
rows = [l.split() for l in open(os.path.join(cran, "cranqrel")) if l.strip()]
with open(os.path.join(out, "cran", "qrels.txt"), "w") as f, open(os.path.join(out, "cran", "qrels.inverted.txt"), "w") as g:
    for q, d, c in rows:
        c = int(c)
        f.write(f"{q} 0 {d} {max(c, 0)}\n")
        g.write(f"{q} 0 {d} {5 - c if 1 <= c <= 4 else 0}\n")

dl = os.path.join(DATA, "trec-dl-rerank")
os.makedirs(os.path.join(out, "dl19", "docs"), exist_ok=True)
seen = set()
with open(os.path.join(out, "dl19", "docs", "docs.jsonl"), "w") as f:
    for q in json.load(gzip.open(os.path.join(dl, "rank_llm_data_bm25_dl19_top100.json.gz"), "rt")):
        for h in q["hits"]:
            if h["docid"] not in seen:
                seen.add(h["docid"])
                f.write(json.dumps({"id": h["docid"], "contents": h["content"]}) + "\n")
shutil.copy(os.path.join(dl, "topics.dl19-passage.txt"), os.path.join(out, "dl19", "topics.tsv"))
shutil.copy(os.path.join(dl, "qrels.dl19-passage.txt"), os.path.join(out, "dl19", "qrels.txt"))
print(f"cranfield: {len(queries)} topics; dl19: {len(seen)} passages")
