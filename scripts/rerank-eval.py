#!/usr/bin/env python3
"""nDCG@10 (trec_eval semantics, via pytrec_eval-terrier) of TREC runs against TREC qrels.

    python scripts/rerank-eval.py QRELS RUN [RUN ...]
    python scripts/rerank-eval.py --bm25-from CANDIDATES.json.gz QRELS RUN ...   # also scores the
        first-stage order of a TREC DL candidates file (the BM25 baseline)

Prints one line per run: `ndcg_cut_10  <mean over the run's queries>  <queries>  <run>`.
Needs: pip install pytrec-eval-terrier.
"""
import gzip
import json
import sys

import pytrec_eval


def read_qrels(path):
    qrels = {}
    with open(path) as f:
        for line in f:
            if line.strip():
                qid, _, docid, rel = line.split()
                qrels.setdefault(qid, {})[docid] = int(rel)
    return qrels


def read_run(path):
    run = {}
    with open(path) as f:
        for line in f:
            if line.strip():
                qid, _, docid, _rank, score, _tag = line.split()
                run.setdefault(qid, {})[docid] = float(score)
    return run


def bm25_run(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        data = json.load(f)
    run = {}
    for entry in data:
        for hit in entry["hits"]:
            run.setdefault(str(hit["qid"]), {})[str(hit["docid"])] = float(hit["score"])
    return run


def ndcg10(qrels, run):
    evaluator = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10"})
    per_query = evaluator.evaluate(run)
    values = [m["ndcg_cut_10"] for m in per_query.values()]
    return sum(values) / len(values), len(values)


def main(argv):
    args = argv[1:]
    runs = []
    if args[:1] == ["--bm25-from"]:
        runs.append(("BM25 (first stage of " + args[1] + ")", bm25_run(args[1])))
        args = args[2:]
    if len(args) < 1:
        print(__doc__, file=sys.stderr)
        return 2
    qrels = read_qrels(args[0])
    runs += [(p, read_run(p)) for p in args[1:]]
    for name, run in runs:
        mean, n = ndcg10(qrels, run)
        print(f"ndcg_cut_10\t{mean:.4f}\t{n}\t{name}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
