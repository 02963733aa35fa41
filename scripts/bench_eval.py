#!/usr/bin/env python3
"""Mean nDCG@10 (and other trec_eval measures) of a TREC run, via pytrec_eval-terrier, which
agrees with trec_eval. Usage: python3 scripts/bench_eval.py RUN QRELS [MEASURE ...]
(default measure ndcg_cut.10; pass e.g. "recall.1000" "map" too). For binary measures pass
--rel N to count grades >= N as relevant (DL: 2). Prints `measure value queries`."""
import sys
import pytrec_eval

args = sys.argv[1:]
rel = 1
if "--rel" in args:
    i = args.index("--rel")
    rel = int(args[i + 1])
    del args[i : i + 2]
run_path, qrels_path, *measures = args
measures = measures or ["ndcg_cut.10"]
qrels, run = {}, {}
for l in open(qrels_path):
    q, _, d, r = l.split()
    qrels.setdefault(q, {})[d] = int(r)
for l in open(run_path):
    q, _, d, _rank, s, _tag = l.split()
    run.setdefault(q, {})[d] = float(s)
for m in measures:
    ev = pytrec_eval.RelevanceEvaluator(qrels, {m}, relevance_level=rel)
    res = ev.evaluate(run)
    key = m.replace(".", "_")
    vals = [v[key] for v in res.values()]
    print(f"{m}\t{sum(vals) / len(vals):.4f}\t{len(vals)}")
