#!/usr/bin/env python3
"""Chooses the fusion weight of hybrid turns by 5-fold cross-validation over a collection's queries.

A hybrid turn reranks the top 2·depth of the RRF (k = 60) fusion of BM25's and the bi-encoder's
top 1000 with the bi-encoder itself, then fuses `w · minmax(BM25) + (1 − w) · minmax(cosine)`,
where a candidate BM25 did not return has the lowest BM25 score among the candidates. Since the
reranker is the dense retriever, its score is the dense run's cosine. Prints nDCG@10 (binary
relevance, trec_eval's formula) per weight, the weight each fold's training queries choose and the
cross-validated figure, beside BM25 turns (BM25's top depth fused the same way).

Input: the runs of `convrag search --retrieval bm25 --k 1000` and `--retrieval dense` with k the
collection's size (every cosine), and a binary qrels file; on Cranfield (1,398 passages), with
the files scripts/dense-crosscheck.sh prepares in W:
    convrag --home W/home search --collection cran --retrieval dense --k 1398 \
        --topics W/cran/topics.tsv --output W/dense-all.trec
    scripts/hybrid_fusion_cv.py --bm25 W/bm25.trec --dense W/dense-all.trec --qrels W/cran/qrels.binary.txt
"""
import argparse
import collections
import math

WEIGHTS = [0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5]


def read_rows(path, columns):
    """Each line of `path` split on white space; exits naming the line that has not `columns`."""
    with open(path) as f:
        for n, line in enumerate(f, 1):
            parts = line.split()
            if len(parts) != columns:
                raise SystemExit(f"{path}:{n}: expected {columns} columns")
            yield parts


def read_run(path):
    run = collections.defaultdict(dict)
    for qid, _, docid, _, score, _ in read_rows(path, 6):
        run[qid][docid] = float(score)
    return run


def read_qrels(path):
    qrels = collections.defaultdict(dict)
    for qid, _, docid, rel in read_rows(path, 4):
        qrels[qid][docid] = int(rel)
    return qrels


def top(scores, n):
    return [d for d, _ in sorted(scores.items(), key=lambda t: (-t[1], t[0]))[:n]]


def rrf(lists, k=60.0):
    fused = collections.Counter()
    for ranked in lists:
        for i, d in enumerate(ranked):
            fused[d] += 1.0 / (k + i + 1)
    return fused


def min_max(values):
    lo, hi = min(values), max(values)
    return [(v - lo) / (hi - lo) if hi > lo else 0.0 for v in values]


def fused_order(candidates, bm25, cosine, w):
    present = [bm25[d] for d in candidates if d in bm25]
    lowest = min(present) if present else 0.0
    first = min_max([bm25.get(d, lowest) for d in candidates])
    model = min_max([cosine[d] for d in candidates])
    scores = [w * a + (1 - w) * b for a, b in zip(first, model)]
    return [d for d, _ in sorted(zip(candidates, scores), key=lambda t: -t[1])]


def ndcg10(qrels, ranked):
    gain = sum(qrels.get(d, 0) / math.log2(i + 2) for i, d in enumerate(ranked[:10]))
    ideal = sorted((g for g in qrels.values() if g > 0), reverse=True)[:10]
    best = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
    return gain / best if best > 0 else 0.0


def cross_validate(per_weight, queries, folds=5):
    chosen, scores = [], []
    for f in range(folds):
        test = queries[f::folds]
        train = [q for q in queries if q not in set(test)]
        w = max(WEIGHTS, key=lambda w: sum(per_weight[w][q] for q in train))
        chosen.append(w)
        scores += [per_weight[w][q] for q in test]
    return sum(scores) / len(queries), chosen


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bm25", required=True)
    p.add_argument("--dense", required=True)
    p.add_argument("--qrels", required=True)
    p.add_argument("--depth", type=int, default=100)
    a = p.parse_args()
    bm25, dense, qrels = read_run(a.bm25), read_run(a.dense), read_qrels(a.qrels)
    queries = sorted(dense, key=lambda q: (len(q), q))
    schemes = {
        "bm25 turns": lambda q: top(bm25[q], a.depth),
        "hybrid turns": lambda q: top(rrf([top(bm25[q], 1000), top(dense[q], 1000)]), 2 * a.depth),
    }
    for name, candidates_of in schemes.items():
        candidates = {q: candidates_of(q) for q in queries}
        per_weight = {
            w: {q: ndcg10(qrels.get(q, {}), fused_order(candidates[q], bm25[q], dense[q], w)) for q in queries}
            for w in WEIGHTS
        }
        means = {w: sum(v.values()) / len(queries) for w, v in per_weight.items()}
        cv, chosen = cross_validate(per_weight, queries)
        best = max(WEIGHTS, key=lambda w: means[w])
        print(f"{name}: nDCG@10 by weight " + ", ".join(f"{w}: {m:.4f}" for w, m in means.items()))
        print(f"{name}: best on all queries {best} ({means[best]:.4f}); 5-fold CV {cv:.4f}, folds chose {chosen}")


if __name__ == "__main__":
    main()
