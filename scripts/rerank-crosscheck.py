#!/usr/bin/env python3
"""Cross-check of convrag's bi-encoder reranking against Python onnxruntime on the same model.

    ~/.cache/convrag/venv-convert/bin/python scripts/rerank-crosscheck.py \
        --model .convrag/models/all-MiniLM-L6-v2 \
        --candidates ../shared/data/trec-dl-rerank/rank_llm_data_bm25_dl19_top100.json.gz \
        --qrels ../shared/data/trec-dl-rerank/qrels.dl19-passage.txt \
        --convrag-run runs/dl19.minilm.trec [--python-run runs/dl19.minilm.python.trec] [--max-length 256]

Scores every (query, candidate) of a TREC DL candidates file with onnxruntime 1.31.1 + tokenizers
(truncation --max-length, no padding beyond the batch, mean pooling, L2 normalization, cosine),
writes that run, and prints side by side: nDCG@10 of BM25, of this Python run and of convrag's run
(pytrec_eval-terrier, trec_eval semantics), how many queries have the identical ranking of all
candidates and of the top 10, and the largest score difference.
Needs: numpy, onnxruntime==1.31.1, tokenizers, pytrec-eval-terrier.
"""
import argparse
import gzip
import json
import os
import sys

import numpy as np
import onnxruntime as ort
from tokenizers import Tokenizer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import importlib  # noqa: E402

rerank_eval = importlib.import_module("rerank-eval")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--candidates", required=True)
    ap.add_argument("--qrels", required=True)
    ap.add_argument("--convrag-run", default=None)
    ap.add_argument("--python-run", default=None)
    ap.add_argument("--reuse", action="store_true", help="read --python-run if it exists instead of recomputing it")
    ap.add_argument("--max-length", type=int, default=256)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--batch-size", type=int, default=16)
    a = ap.parse_args()

    with open(os.path.join(a.model, "manifest.json")) as f:
        manifest = json.load(f)
    tok = Tokenizer.from_file(os.path.join(a.model, manifest["tokenizer"]))
    tok.no_padding()
    tok.enable_truncation(a.max_length)
    so = ort.SessionOptions()
    so.intra_op_num_threads = a.threads
    sess = ort.InferenceSession(os.path.join(a.model, manifest["model"]), so, providers=["CPUExecutionProvider"])

    def embed(texts):
        encs = tok.encode_batch(texts)
        order = sorted(range(len(encs)), key=lambda i: len(encs[i].ids))
        out = [None] * len(encs)
        for s in range(0, len(order), a.batch_size):
            idx = order[s:s + a.batch_size]
            w = max(len(encs[i].ids) for i in idx)
            ids = np.zeros((len(idx), w), np.int64)
            mask = np.zeros_like(ids)
            types = np.zeros_like(ids)
            for r, i in enumerate(idx):
                n = len(encs[i].ids)
                ids[r, :n] = encs[i].ids
                mask[r, :n] = 1
                types[r, :n] = encs[i].type_ids
            h = sess.run([manifest["output"]], {"input_ids": ids, "attention_mask": mask, "token_type_ids": types})[0]
            m = mask[:, :, None].astype(np.float32)
            v = (h * m).sum(1) / np.maximum(m.sum(1), 1e-9)
            v /= np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)
            for r, i in enumerate(idx):
                out[i] = v[r]
        return out

    opener = gzip.open if a.candidates.endswith(".gz") else open
    with opener(a.candidates, "rt") as f:
        data = json.load(f)
    python_run = {}
    lines = []
    if a.reuse and a.python_run and os.path.exists(a.python_run):
        python_run = rerank_eval.read_run(a.python_run)
        data = []
    for n, entry in enumerate(data):
        hits = entry["hits"]
        qid = str(hits[0]["qid"])
        vecs = embed([entry["query"]] + [h["content"] for h in hits])
        q = vecs[0]
        scored = sorted(((float(np.dot(q, v)), str(h["docid"])) for h, v in zip(hits, vecs[1:])),
                        key=lambda x: -x[0])
        python_run[qid] = {d: s for s, d in scored}
        for rank, (s, d) in enumerate(scored, 1):
            lines.append(f"{qid} Q0 {d} {rank} {s:.6f} python-onnxruntime")
        print(f"\r{n + 1}/{len(data)} queries", end="", file=sys.stderr)
    print(file=sys.stderr)
    if a.python_run and lines:
        with open(a.python_run, "w") as f:
            f.write("\n".join(lines) + "\n")

    qrels = rerank_eval.read_qrels(a.qrels)
    convrag_run = rerank_eval.read_run(a.convrag_run) if a.convrag_run else {}
    bm25 = rerank_eval.bm25_run(a.candidates)
    same_all = same_top10 = 0
    max_diff = 0.0
    for qid, scores in python_run.items():
        c = convrag_run.get(qid, {})
        py_order = sorted(scores, key=lambda d: -scores[d])
        cv_order = sorted(c, key=lambda d: -c[d])
        same_all += py_order == cv_order
        same_top10 += py_order[:10] == cv_order[:10]
        for d, s in scores.items():
            if d in c:
                # convrag writes 6 decimals; differences below 5e-7 are rounding.
                max_diff = max(max_diff, abs(s - c[d]))
    print(f"{'run':<44} nDCG@10")
    for name, run in (("BM25 (candidates' first stage)", bm25),
                      (f"Python onnxruntime {os.path.basename(a.model)}", python_run),
                      (f"convrag {os.path.basename(a.convrag_run or '')}", convrag_run)):
        if not run:
            continue
        print(f"{name:<44} {rerank_eval.ndcg10(qrels, run)[0]:.4f}")
    if not convrag_run:
        return
    print(f"queries with identical full ranking: {same_all}/{len(python_run)}; identical top 10: "
          f"{same_top10}/{len(python_run)}; max |score difference|: {max_diff:.2e}")


if __name__ == "__main__":
    main()
