#!/usr/bin/env python3
"""Exact dense retrieval with Python onnxruntime, the reference for `convrag search --retrieval dense`.

    ~/.cache/convrag/venv-convert/bin/python scripts/dense-reference.py \
        --model .convrag/models/all-MiniLM-L6-v2 --docs DOCS.jsonl --topics TOPICS.tsv \
        --output python.dense.trec [--k 100] [--compare convrag.dense.trec]

Embeds every document of DOCS.jsonl ({"id", "contents"}; contents = title + "\\n" + text, what
convrag's model reads) and every query of TOPICS.tsv (id<TAB>text) with the model of --model
(tokenizers, truncation to the manifest's max_length, mean pooling, L2 normalization), ranks all
documents by cosine for each query (ties by id) and writes the top --k as a TREC run.

With --compare, checks convrag's run against it to 3 decimals and exits 1 on a difference:
every (query, document) in both runs has the same score within 5e-4, and each query's top 10 is
the same list, except that documents whose reference scores are within 1e-3 of each other may
trade places. Prints the counts and the largest score difference.
Needs: numpy, onnxruntime==1.31.1, tokenizers (scripts/fetch-models.sh's venv plus
`pip install tokenizers`).
"""
import argparse
import json
import os
import sys

import numpy as np
import onnxruntime as ort
from tokenizers import Tokenizer

SCORE_TOLERANCE = 5e-4
TIE = 1e-3


def embedder(model_dir, threads, batch_size):
    with open(os.path.join(model_dir, "manifest.json")) as f:
        manifest = json.load(f)
    tok = Tokenizer.from_file(os.path.join(model_dir, manifest["tokenizer"]))
    tok.no_padding()
    tok.enable_truncation(int(manifest.get("max_length", 256)))
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    sess = ort.InferenceSession(os.path.join(model_dir, manifest["model"]), so,
                                providers=["CPUExecutionProvider"])

    def embed(texts):
        encs = tok.encode_batch(texts)
        order = sorted(range(len(encs)), key=lambda i: len(encs[i].ids))
        out = np.zeros((len(encs), 0), np.float32)
        rows = [None] * len(encs)
        for s in range(0, len(order), batch_size):
            idx = order[s:s + batch_size]
            w = max(len(encs[i].ids) for i in idx)
            ids = np.zeros((len(idx), w), np.int64)
            mask = np.zeros_like(ids)
            types = np.zeros_like(ids)
            for r, i in enumerate(idx):
                n = len(encs[i].ids)
                ids[r, :n] = encs[i].ids
                mask[r, :n] = 1
                types[r, :n] = encs[i].type_ids
            h = sess.run([manifest["output"]],
                         {"input_ids": ids, "attention_mask": mask, "token_type_ids": types})[0]
            m = mask[:, :, None].astype(np.float32)
            v = (h * m).sum(1) / np.maximum(m.sum(1), 1e-9)
            v /= np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)
            for r, i in enumerate(idx):
                rows[i] = v[r]
        return np.stack(rows) if rows else out

    return embed


def read_run(path):
    run = {}
    with open(path) as f:
        for line in f:
            q, _, d, _, s, _ = line.split()
            run.setdefault(q, []).append((d, float(s)))
    return run


def compare(reference, convrag):
    """Returns the lines describing differences (empty when the runs agree)."""
    problems, largest, scored = [], 0.0, 0
    for q, ref in reference.items():
        mine = convrag.get(q, [])
        ref_scores = dict(ref)
        for d, s in mine:
            if d in ref_scores:
                scored += 1
                diff = abs(s - ref_scores[d])
                largest = max(largest, diff)
                if diff > SCORE_TOLERANCE:
                    problems.append(f"query {q} doc {d}: convrag {s:.6f} vs reference {ref_scores[d]:.6f}")
        top, mine_top = ref[:10], [d for d, _ in mine[:10]]
        if len(mine_top) != len(top):
            problems.append(f"query {q}: {len(mine_top)} hits in convrag's top 10, {len(top)} in the reference's")
            continue
        for rank, ((d, s), m) in enumerate(zip(top, mine_top)):
            # Another document at this rank is fine only if the reference scores them as a tie.
            if d != m and abs(ref_scores.get(m, -2.0) - s) > TIE:
                problems.append(f"query {q} rank {rank + 1}: convrag {m}, reference {d} ({s:.6f})")
    print(f"compared {scored} scores over {len(reference)} queries; largest |difference| {largest:.2e}; "
          f"{len(problems)} difference(s)", file=sys.stderr)
    return problems


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--docs", required=True)
    ap.add_argument("--topics", required=True)
    ap.add_argument("--output", required=True)
    ap.add_argument("--k", type=int, default=100)
    ap.add_argument("--compare", default=None, help="convrag's run to check against the reference")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--batch-size", type=int, default=32)
    a = ap.parse_args()

    embed = embedder(a.model, a.threads, a.batch_size)
    with open(a.docs) as f:
        docs = [json.loads(line) for line in f if line.strip()]
    ids = [str(d["id"]) for d in docs]
    doc_vecs = embed([d["contents"] for d in docs])
    with open(a.topics) as f:
        topics = [line.rstrip("\n").split("\t", 1) for line in f if line.strip()]
    query_vecs = embed([t[1] for t in topics])
    lines = []
    for (qid, _), q in zip(topics, query_vecs):
        scores = doc_vecs @ q
        ranked = sorted(range(len(ids)), key=lambda i: (-float(scores[i]), ids[i]))[:a.k]
        for rank, i in enumerate(ranked, 1):
            lines.append(f"{qid} Q0 {ids[i]} {rank} {float(scores[i]):.6f} python-onnxruntime-dense")
    with open(a.output, "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"{len(docs)} documents, {len(topics)} queries: wrote {a.output}", file=sys.stderr)
    if a.compare:
        problems = compare(read_run(a.output), read_run(a.compare))
        for p in problems[:20]:
            print(p, file=sys.stderr)
        sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
