#!/usr/bin/env python3
"""Real passages and real queries for `convrag bench ann` (issue 33): sentence windows of the real
texts in ../shared/data, and query texts that are none of them.

Usage: python3 scripts/bench-ann-corpus.py OUTDIR
Writes OUTDIR/mixed/passages.jsonl ({"id", "contents"}: windows of 2 sentences moving by 1 over the
4,300 DL19 MS MARCO passages, the TREC RAG researchy-dev MS MARCO v2.1 segments, the iKAT 2023
cited passages and the Cranfield abstracts; duplicates dropped) for `convrag index --format jsonl`,
and OUTDIR/queries.tsv (`id<TAB>text`: DL19 queries, CAsT 2019 resolved and CAsT 2020 manual
utterances, iKAT 2023 resolved utterances, TREC RAG 2024 and 2025 topics) for `--queries`.
The PostgreSQL manual is indexed by convrag itself (`--format html --window N --stride 1`).
Deterministic: no randomness.
"""
import gzip, json, os, re, sys

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "..", "shared", "data")
out = sys.argv[1]

SENT = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(])")


def sentences(text):
    return [s.strip() for s in SENT.split(re.sub(r"\s+", " ", text)) if len(s.strip()) > 1]


def windows(text, size=2):
    s = sentences(text)
    if len(s) <= size:
        return [" ".join(s)] if s else []
    return [" ".join(s[i:i + size]) for i in range(len(s) - size + 1)]


docs = []  # (source id, text)
for q in json.load(gzip.open(os.path.join(DATA, "trec-dl-rerank", "rank_llm_data_bm25_dl19_top100.json.gz"), "rt")):
    docs += [("dl19-" + str(h["docid"]), h["content"]) for h in q["hits"]]
for name in ["ragnarok_data_bm25_rag24.researchy-dev_small_top100.jsonl.gz",
             "ragnarok_data_rankzephyrrho_rag24.researchy-dev_small_top100.jsonl.gz"]:
    for line in gzip.open(os.path.join(DATA, "trec-rag", "rag24", name), "rt"):
        for c in json.loads(line)["candidates"]:
            docs.append((c["docid"], c["doc"]["title"] + ". " + c["doc"]["segment"]))
for split in ["train", "test"]:
    for line in open(os.path.join(DATA, "ikat", "official", f"2023_{split}_topics_psg_text.jsonl")):
        p = json.loads(line)
        docs.append((p["doc_id"] + ":" + str(p["passage_id"]), p["passage_text"]))
cran = open(os.path.join(DATA, "classic-ir", "cranfield", "cran.all.1400"), errors="replace").read()
for rec in cran.split(".I ")[1:]:
    num = rec.split("\n", 1)[0].strip()
    body = rec.split(".W", 1)[1] if ".W" in rec else ""
    title = rec.split(".T", 1)[1].split(".A", 1)[0] if ".T" in rec else ""
    docs.append(("cran-" + num, title.strip() + ". " + body.strip()))

os.makedirs(os.path.join(out, "mixed"), exist_ok=True)
seen_docs, seen_text, n = set(), set(), 0
with open(os.path.join(out, "mixed", "passages.jsonl"), "w") as f:
    for doc_id, text in docs:
        if doc_id in seen_docs:
            continue
        seen_docs.add(doc_id)
        for i, w in enumerate(windows(text)):
            if w in seen_text:
                continue
            seen_text.add(w)
            f.write(json.dumps({"id": f"{doc_id}#w{i}", "contents": w}) + "\n")
            n += 1
print(f"{len(seen_docs)} documents, {n} passages", file=sys.stderr)

queries = []
for line in open(os.path.join(DATA, "trec-dl-rerank", "topics.dl19-passage.txt")):
    qid, text = line.rstrip("\n").split("\t", 1)
    queries.append(("dl19-" + qid, text))
for line in open(os.path.join(DATA, "trec-cast", "2019", "evaluation_topics_annotated_resolved_v1.0.tsv")):
    qid, text = line.rstrip("\n").split("\t", 1)
    queries.append(("cast19-" + qid, text))
for topic in json.load(open(os.path.join(DATA, "trec-cast", "2020", "2020_manual_evaluation_topics_v1.0.json"))):
    for turn in topic["turn"]:
        queries.append((f"cast20-{topic['number']}_{turn['number']}", turn["manual_rewritten_utterance"]))
for split in ["train", "test"]:
    for topic in json.load(open(os.path.join(DATA, "ikat", "official", f"2023_{split}_topics.json"))):
        for turn in topic["turns"]:
            queries.append((f"ikat23-{topic['number']}_{turn['turn_id']}", turn["resolved_utterance"]))
for line in open(os.path.join(DATA, "trec-rag", "rag24", "topics.rag24.test.txt")):
    qid, text = line.rstrip("\n").split("\t", 1)
    queries.append(("rag24-" + qid, text))
for line in open(os.path.join(DATA, "trec-rag", "rag25", "topics.rag25.test.jsonl")):
    t = json.loads(line)
    queries.append(("rag25-" + t["id"], t["title"]))
seen = set()
with open(os.path.join(out, "queries.tsv"), "w") as f:
    for qid, text in queries:
        text = re.sub(r"\s+", " ", text).strip()
        if text and text not in seen:
            seen.add(text)
            f.write(f"{qid}\t{text}\n")
print(f"{len(seen)} queries", file=sys.stderr)
