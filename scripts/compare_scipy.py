"""Checks `convrag eval compare --json` against SciPy (run by scripts/compare-scipy.sh).

    compare_scipy.py ranking QRELS LEVEL CONVRAG_JSON RUN...
    compare_scipy.py ptkb    QRELS 1     CONVRAG_JSON RUN...

RUNs are the files given to convrag, in the same order. Per-topic values are recomputed
independently with pytrec_eval (trec_eval's C code) over every qrels topic, a topic missing from
a run scoring 0 (trec_eval -c), and must equal convrag's. Then, per measure and pair (a, b):
- t-test: scipy.stats.ttest_rel(b, a), p-value to a relative 1e-9;
- randomization: scipy.stats.permutation_test((b, a), mean difference, permutation_type='samples',
  two-sided): exactly when both enumerate every sign assignment, otherwise within 0.01 (the runs
  use 100,000 resamples each, so the sampling error of the difference is below 0.0023);
- Holm–Bonferroni over the pairs of each measure, recomputed from SciPy's p-values.
Prints a table convrag vs SciPy; exits 1 on any mismatch.
"""

import gzip
import json
import math
import sys

import numpy as np
import pytrec_eval
import scipy
from scipy import stats


def read_text(path):
    if path.endswith(".gz"):
        with gzip.open(path, "rt", encoding="utf-8") as f:
            return f.read()
    with open(path, encoding="utf-8") as f:
        return f.read()


def read_qrels(path):
    qrels = {}
    for line in read_text(path).splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        qid, _, docid, rel = line.split()
        qrels.setdefault(qid, {})[docid] = int(rel)
    return qrels


def read_run(path, kind):
    text = read_text(path)
    start = text.lstrip()[:1]
    run = {}
    if start == "[":  # rank_llm candidates
        for q in json.loads(text):
            for h in q["hits"]:
                run.setdefault(str(h["qid"]), {})[str(h["docid"])] = float(h["score"])
    elif start == "{":
        data = json.loads(text)
        if "turns" in data:  # iKAT run: the first response's ptkb_provenance, in rank order
            assert kind == "ptkb"
            for t in data["turns"]:
                responses = sorted(t["responses"], key=lambda r: r.get("rank", 1 << 62))
                ids = []
                for s in responses[0]["ptkb_provenance"] if responses else []:
                    if str(s) not in ids:
                        ids.append(str(s))
                run[t["turn_id"]] = {d: float(len(ids) - i) for i, d in enumerate(ids)}
        else:
            run = {q: {d: float(s) for d, s in docs.items()} for q, docs in data.items()}
    else:
        for line in text.splitlines():
            f = line.split()
            if f:
                run.setdefault(f[0], {})[f[2]] = float(f[4])
    return run


def per_topic(qrels, run, measures, level):
    names = {m.replace("_cut_", "_cut.").replace("recall_", "recall.").replace("P_", "P.") for m in measures}
    ev = pytrec_eval.RelevanceEvaluator(qrels, names, relevance_level=level)
    res = ev.evaluate({q: d for q, d in run.items() if q in qrels and d})
    return {m: {q: res.get(q, {}).get(m, 0.0) for q in qrels} for m in measures}


def holm(ps):
    order = sorted((p, i) for i, p in enumerate(ps) if p is not None and not math.isnan(p))
    out = [None] * len(ps)
    running, m = 0.0, len(order)
    for rank, (p, i) in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p))
        out[i] = running
    return out


def main():
    kind, qrels_path, level, conv_path, *run_paths = sys.argv[1:]
    level = int(level)
    qrels = read_qrels(qrels_path)
    conv = json.load(open(conv_path, encoding="utf-8"))
    topics = sorted(qrels)
    assert conv["topics"] == topics, "topic sets differ"
    names = [r["name"] for r in conv["runs"]]
    assert len(names) == len(run_paths)
    measures = [m["measure"] for m in conv["measures"]]
    runs = [per_topic(qrels, read_run(p, kind), measures, level) for p in run_paths]
    failures = 0
    print(f"SciPy {scipy.__version__}, numpy {np.__version__}, pytrec_eval (trec_eval) per-topic values")
    labels = {r["name"]: r["label"] for r in conv["runs"]}
    for r in conv["runs"]:
        print(f"  {r['label']}  {r['name']}")
    print(f"{'measure':<14} {'pair':<6} {'t-test p convrag':>24} {'SciPy':>24} {'rand. p convrag':>16} {'SciPy':>9}")
    for mc in conv["measures"]:
        m = mc["measure"]
        for name, values in zip(names, runs):
            for q in topics:
                mine, ref = mc["per_topic"][name][q], values[m][q]
                if abs(mine - ref) > 1e-12:
                    print(f"MISMATCH per-topic {m} {name} {q}: convrag {mine} trec_eval {ref}")
                    failures += 1
        t_ps = []
        for pair in mc["pairs"]:
            a = np.array([runs[names.index(pair["a"])][m][q] for q in topics])
            b = np.array([runs[names.index(pair["b"])][m][q] for q in topics])
            t = stats.ttest_rel(b, a)
            t_ps.append(float(t.pvalue))
            n_res = 100_000
            exact_scipy = 2 ** len(topics) <= n_res
            perm = stats.permutation_test(
                (b, a),
                lambda x, y, axis: np.mean(x - y, axis=axis),
                permutation_type="samples",
                vectorized=True,
                n_resamples=n_res,
                alternative="two-sided",
                rng=np.random.default_rng(20261126),
            )
            mine_t, mine_r = pair["t_test_p"], pair["randomization_p"]
            if math.isnan(t.pvalue):
                ok_t = mine_t is None
            else:
                ok_t = mine_t is not None and abs(mine_t - t.pvalue) <= 1e-9 * max(t.pvalue, 1e-300)
            if pair["randomization_exact"] and exact_scipy:
                ok_r = abs(mine_r - perm.pvalue) <= 1e-12
            else:
                ok_r = abs(mine_r - perm.pvalue) <= 0.01
            flag = "" if ok_t and ok_r else "  <-- MISMATCH"
            failures += 0 if ok_t and ok_r else 1
            label = f"{labels[pair['b']]} - {labels[pair['a']]}"
            print(f"{m:<14} {label:<6} {mine_t!r:>24} {float(t.pvalue)!r:>24} {mine_r:>16.5f} {perm.pvalue:>9.5f}{flag}")
        for pair, ref in zip(mc["pairs"], holm(t_ps)):
            mine = pair["t_test_p_holm"]
            if (ref is None) != (mine is None) or (ref is not None and abs(mine - ref) > 1e-9 * max(ref, 1e-300)):
                print(f"MISMATCH Holm {m} {pair['b']} - {pair['a']}: convrag {mine} SciPy-based {ref}")
                failures += 1
    if failures:
        print(f"{failures} mismatches")
        sys.exit(1)
    print("all p-values agree")


if __name__ == "__main__":
    main()
