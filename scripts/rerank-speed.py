#!/usr/bin/env python3
"""Speed of `convrag rerank` (end to end: tokenization, batching, inference, pooling, scoring)
against bare Python onnxruntime inference (session.run only) on the same model, threads, batch size
and token sequences.

    ~/.cache/convrag/venv-convert/bin/python scripts/rerank-speed.py \
        --convrag /work/target/release/convrag --model .convrag/models/all-MiniLM-L6-v2 \
        [--lengths 128,256,512] [--passages 48] [--threads 2] [--batch-size 16] [--repeats 2]

For each length L it writes a TREC DL candidates file with one query and --passages passages, each
longer than L tokens (DL19 passages glued together), so every passage is truncated to exactly L
tokens; runs convrag with --max-length L and reads its reranking time (model loading excluded,
reading the file excluded); then runs the same sequences through onnxruntime in length-sorted
batches and times session.run alone. Runs alternate, best of --repeats for each side. Prints
sequences/s for both and convrag's time relative to bare inference.
Needs: numpy, onnxruntime==1.31.1, tokenizers.
"""
import argparse
import gzip
import json
import os
import re
import subprocess
import tempfile
import time

import numpy as np
import onnxruntime as ort
from tokenizers import Tokenizer

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DL19 = os.path.join(ROOT, "..", "shared", "data", "trec-dl-rerank", "rank_llm_data_bm25_dl19_top100.json.gz")


def long_passages(n):
    with gzip.open(DL19, "rt") as f:
        texts = [h["content"] for e in json.load(f) for h in e["hits"]]
    # Sixteen consecutive passages (well over 512 tokens) per synthetic passage, each starting elsewhere.
    return [" ".join(texts[i * 16:(i + 1) * 16]) for i in range(n)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--convrag", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--lengths", default="128,256,512")
    ap.add_argument("--passages", type=int, default=48)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--no-warmup", action="store_true",
                    help="time onnxruntime's first batches too, as convrag's fresh process does")
    a = ap.parse_args()

    with open(os.path.join(a.model, "manifest.json")) as f:
        manifest = json.load(f)
    so = ort.SessionOptions()
    so.intra_op_num_threads = a.threads
    model_path = os.path.join(a.model, manifest["model"])
    sess = ort.InferenceSession(model_path, so, providers=["CPUExecutionProvider"])
    query = "how long is the life cycle of a flea"
    passages = long_passages(a.passages)
    tmp = tempfile.mkdtemp(prefix="rerank-speed-")
    cand = os.path.join(tmp, "cands.json")
    with open(cand, "w") as f:
        json.dump([{"query": query, "hits": [{"content": p, "qid": 1, "docid": f"d{i}", "score": float(-i)}
                                             for i, p in enumerate(passages)]}], f)
    n_seq = len(passages) + 1
    print(f"threads {a.threads}, batch size {a.batch_size}, {n_seq} sequences per run (1 query + {len(passages)} passages)")
    print(f"{'tokens':>6} {'convrag seq/s':>14} {'ORT bare seq/s':>15} {'convrag time / bare':>20}")
    for L in [int(x) for x in a.lengths.split(",")]:
        tok = Tokenizer.from_file(os.path.join(a.model, manifest["tokenizer"]))
        tok.no_padding()
        tok.enable_truncation(L)
        encs = tok.encode_batch([query] + passages)
        assert all(len(e.ids) == L for e in encs[1:]), "passages must be longer than L tokens"
        order = sorted(range(len(encs)), key=lambda i: len(encs[i].ids))
        batches = []
        for s in range(0, len(order), a.batch_size):
            idx = order[s:s + a.batch_size]
            w = max(len(encs[i].ids) for i in idx)
            ids = np.zeros((len(idx), w), np.int64)
            mask = np.zeros_like(ids)
            for r, i in enumerate(idx):
                ids[r, :len(encs[i].ids)] = encs[i].ids
                mask[r, :len(encs[i].ids)] = 1
            batches.append({"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)})
        if not a.no_warmup:
            sess.run(None, batches[-1])  # warm-up of the Python session before timing
        best_c = best_p = float("inf")
        for _ in range(a.repeats):
            out = subprocess.run([a.convrag, "rerank", "--model", a.model, "--candidates", cand,
                                  "--output", os.path.join(tmp, "run.trec"), "--max-length", str(L),
                                  "--threads", str(a.threads), "--batch-size", str(a.batch_size)],
                                 capture_output=True, text=True, env={**os.environ, "RUST_LOG": "warn"})
            m = re.search(r" in ([0-9.]+) s \(model load", out.stderr)
            if out.returncode != 0 or not m:
                raise SystemExit(f"convrag failed: {out.stderr}")
            best_c = min(best_c, float(m.group(1)))
            if a.no_warmup:  # a fresh session, like convrag's fresh process
                sess = ort.InferenceSession(model_path, so, providers=["CPUExecutionProvider"])
            t = time.perf_counter()
            for b in batches:
                sess.run([manifest["output"]], b)
            best_p = min(best_p, time.perf_counter() - t)
        print(f"{L:>6} {n_seq / best_c:>14.2f} {n_seq / best_p:>15.2f} {best_c / best_p:>19.3f}x")


if __name__ == "__main__":
    main()
