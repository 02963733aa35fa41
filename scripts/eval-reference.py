#!/usr/bin/env python3
"""Regenerates the reference outputs under tests/fixtures (trec_eval/, rouge/, ikat/, qrecc/,
trec_rag/, poleval/) that tests/it/eval/*.rs compare with.

Run from the repository root, with ../shared/data present:

    pip install pytrec-eval-terrier==0.5.11 rouge-score==0.1.2 nltk==3.10.4
    python3 scripts/eval-reference.py

What it produces and how:
- `trec_eval/*.trec_eval.txt`: trec_eval output (`measure<TAB>qid<TAB>value`, 4 decimals, per query then
  `all`) computed by pytrec_eval-terrier, i.e. trec_eval's own C code (te_form_res_rels and the
  m_*.c measures) compiled into a Python module; `all` is the mean over the evaluated queries (the
  sum for num_*), exactly what trec_eval prints. The trec_eval binary is not inside the
  pyserini 0.22.1 wheel's Anserini jar (Pyserini downloads it at run time, which fails here),
  hence pytrec_eval. Pairs:
    * DL19: the BM25 top-100 of ../shared/data/trec-dl-rerank (scores as given) vs the DL19 qrels,
      relevance levels 1 and 2.
    * iKAT 2023: a run derived from 2023-qrels.all-turns.txt by `ikat2023_derived_run` below
      (integer-ish scores with many ties, some judged documents dropped, unjudged ones added), so
      tie-breaking, unjudged documents and graded gains are all exercised; levels 1 and 2.
    * Cranfield: `cranfield_bm25.run.gz`, BM25 (k1=0.9, b=0.4, top 50, scores rounded to 3
      decimals so ties occur) over cran.all.1400 for cran.qry written by this script, vs
      QRelsCorrectedforTRECeval; level 1.
- `rouge/rouge1_pairs.tsv`: rouge-score 0.1.2 ROUGE-1 precision/recall/F1 (without and with stemming)
  of real rewrite pairs: CAsT 2019 raw vs resolved, CAsT 2020 raw vs manual rewrite, iKAT 2023
  test utterance vs resolved_utterance.
- `rouge/porter_nltk.tsv`: NLTK PorterStemmer() stems of every distinct token (longer than 3) of those
  texts and of the iKAT 2023 responses.
- `ikat/ptkb_overlap_run.json` + `trec_eval/ptkb_overlap.nist.trec_eval.txt`: an iKAT run whose per-turn
  `ptkb_provenance` lists the statements sharing a (rouge-score) token with the utterance, most
  shared first (ties: lower statement id first), for the 2023 test topics; and trec_eval's values
  for it against the NIST PTKB qrels (per turn, and `all` averaged over every judged turn: -c).
- `qrecc/squad_batch1.tsv`: SQuAD 2.0-script F1/EM of the SCAI batch1.csv (gt vs predicted) rows.
- `qrecc/squad_scai_sample.tsv`: F1/EM of the GPT-3 baseline run (gpt3_run.json.gz) on the turns of
  SCAI's ground-truth sample (Truth_answer), per `<Conversation_no>_<Turn_no>`.
- `trec_rag/gpt4o_stats_2024.json`: statistics of the TREC RAG 2024 GPT-4o baseline answers (words =
  whitespace tokens of the sentence texts, as `response_length`).
- `poleval/dev0_samples.tsv`: NDCG@10 (binary gains, expected ids de-duplicated, a repeated
  output id gains once) of the two sample dev-0 submissions, computed here independently.
The Rust tests rebuild the runs from ../shared/data with the same rules and compare every value.
"""
import csv
import gzip
import json
import math
import os
import re
import string
import collections

import pytrec_eval
from rouge_score import rouge_scorer, tokenize
from nltk.stem import porter

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "..", "shared", "data")
OUT = os.path.join(ROOT, "tests", "fixtures")

MEASURES = [
    "ndcg_cut.5,10,20,100,1000", "P.5,10,20,100", "recall.5,10,100,1000", "map",
    "map_cut.10,100,1000", "recip_rank", "Rprec", "success.1,5,10", "set_P", "set_recall",
    "set_F", "num_ret", "num_rel", "num_rel_ret",
]
COUNTS = {"num_ret", "num_rel", "num_rel_ret"}


def measure_names():
    names = []
    for m in MEASURES:
        if "." in m:
            base, cuts = m.split(".")
            names += [f"{base}_{c}" for c in cuts.split(",")]
        else:
            names.append(m)
    return names


def read_qrels(path):
    q = {}
    with open(path) as f:
        for line in f:
            if line.strip():
                qid, _, doc, rel = line.split()
                q.setdefault(qid, {})[doc] = int(rel)
    return q


def trec_eval_text(qrels, run, level):
    ev = pytrec_eval.RelevanceEvaluator(qrels, set(MEASURES), relevance_level=level)
    res = ev.evaluate(run)
    names = measure_names()
    lines = []
    for qid in sorted(res):
        for n in names:
            v = res[qid][n]
            lines.append(f"{n:<22}\t{qid}\t{int(v)}" if n in COUNTS else f"{n:<22}\t{qid}\t{v:.4f}")
    lines.append(f"{'num_q':<22}\tall\t{len(res)}")
    for n in names:
        s = 0.0
        for qid in sorted(res):
            s += res[qid][n]
        lines.append(f"{n:<22}\tall\t{int(s)}" if n in COUNTS else f"{n:<22}\tall\t{s / len(res):.4f}")
    return "\n".join(lines) + "\n"


def dl19_run():
    with gzip.open(os.path.join(DATA, "trec-dl-rerank", "rank_llm_data_bm25_dl19_top100.json.gz")) as f:
        data = json.load(f)
    run = {}
    for q in data:
        for h in q["hits"]:
            run.setdefault(str(h["qid"]), {})[h["docid"]] = float(h["score"])
    return run


def byte_sum(s):
    return sum(s.encode("utf-8"))


def ikat2023_derived_run(qrels_path):
    """Per judged turn: judged docs whose byte sum is not a multiple of 4, scored
    (3 * grade + byte_sum % 7) / 2, plus three unjudged docs scored 0, 1, 2."""
    run = {}
    with open(qrels_path) as f:
        for line in f:
            if not line.strip():
                continue
            qid, _, doc, rel = line.split()
            b = byte_sum(doc)
            if b % 4 != 0:
                run.setdefault(qid, {})[doc] = (3 * int(rel) + b % 7) / 2.0
    for qid in list(run):
        for i in range(3):
            run[qid][f"unjudged-{qid}-{i}"] = float(i)
    return run


def cranfield_docs(path):
    docs, cur, field = {}, None, None
    with open(path) as f:
        for line in f:
            if line.startswith(".I"):
                cur = line.split()[1]
                docs[cur] = []
                field = None
            elif line.startswith("."):
                field = line[1]
            elif field in ("T", "W") and cur is not None:
                docs[cur].append(line)
    return {k: " ".join(v) for k, v in docs.items()}


def cranfield_queries(path):
    qs, text = [], None
    with open(path, newline="") as f:
        for line in f.read().replace("\r\n", "\n").split("\n"):
            if line.startswith(".I"):
                if text is not None:
                    qs.append(" ".join(text))
                text = []
            elif line.startswith(".W"):
                continue
            elif text is not None:
                text.append(line)
    qs.append(" ".join(text))
    # The qrels number queries by ordinal 1..225, not by their .I ids.
    return {str(i + 1): q for i, q in enumerate(qs)}


def bm25_run(docs, queries, k1=0.9, b=0.4, depth=50):
    tok = lambda s: re.findall(r"[a-z0-9]+", s.lower())
    doc_toks = {d: tok(t) for d, t in docs.items()}
    n = len(doc_toks)
    avgdl = sum(len(t) for t in doc_toks.values()) / n
    df = collections.Counter()
    tfs = {}
    for d, toks in doc_toks.items():
        tf = collections.Counter(toks)
        tfs[d] = tf
        df.update(tf.keys())
    run = {}
    for qid, q in queries.items():
        scores = {}
        for term in set(tok(q)):
            if term not in df:
                continue
            idf = math.log(1 + (n - df[term] + 0.5) / (df[term] + 0.5))
            for d, tf in tfs.items():
                f = tf.get(term)
                if f:
                    dl = len(doc_toks[d])
                    scores[d] = scores.get(d, 0.0) + idf * f * (k1 + 1) / (f + k1 * (1 - b + b * dl / avgdl))
        top = sorted(scores.items(), key=lambda x: (-x[1], x[0]))[:depth]
        run[qid] = {d: round(s, 3) for d, s in top}
    return run


def write(name, text):
    os.makedirs(os.path.dirname(os.path.join(OUT, name)), exist_ok=True)
    with open(os.path.join(OUT, name), "w") as f:
        f.write(text)
    print("wrote", name, len(text), "bytes")


def rewrite_pairs():
    pairs = []
    cast19_res = {}
    with open(os.path.join(DATA, "trec-cast", "2019", "evaluation_topics_annotated_resolved_v1.0.tsv"), newline="") as f:
        for line in f.read().splitlines():
            if line.strip():
                i, t = line.split("\t", 1)
                cast19_res[i] = t
    with open(os.path.join(DATA, "trec-cast", "2019", "evaluation_topics_v1.0.json")) as f:
        for topic in json.load(f):
            for turn in topic["turn"]:
                i = f"{topic['number']}_{turn['number']}"
                if i in cast19_res:
                    pairs.append(("cast2019", i, cast19_res[i], turn["raw_utterance"]))
    with open(os.path.join(DATA, "trec-cast", "2020", "2020_manual_evaluation_topics_v1.0.json")) as f:
        for topic in json.load(f):
            for turn in topic["turn"]:
                pairs.append(("cast2020", f"{topic['number']}_{turn['number']}",
                              turn["manual_rewritten_utterance"], turn["raw_utterance"]))
    with open(os.path.join(DATA, "ikat", "official", "2023_test_topics.json")) as f:
        topics = json.load(f)
    for topic in topics:
        for turn in topic["turns"]:
            pairs.append(("ikat2023", f"{topic['number']}_{turn['turn_id']}",
                          turn["resolved_utterance"], turn["utterance"]))
    return pairs, topics


def squad_normalize(s):
    s = s.lower()
    s = "".join(ch for ch in s if ch not in set(string.punctuation))
    s = re.sub(r"\b(a|an|the)\b", " ", s)
    return " ".join(s.split())


def squad_f1(pred, gold):
    p, g = squad_normalize(pred).split(), squad_normalize(gold).split()
    if len(p) == 0 or len(g) == 0:
        return float(p == g)
    common = collections.Counter(p) & collections.Counter(g)
    same = sum(common.values())
    if same == 0:
        return 0.0
    precision, recall = same / len(p), same / len(g)
    return 2 * precision * recall / (precision + recall)


def main():
    dl19_qrels = read_qrels(os.path.join(DATA, "trec-dl-rerank", "qrels.dl19-passage.txt"))
    run = dl19_run()
    for level in (1, 2):
        write(f"trec_eval/dl19_bm25.l{level}.trec_eval.txt", trec_eval_text(dl19_qrels, run, level))

    qrels_path = os.path.join(DATA, "ikat", "qrels", "2023-qrels.all-turns.txt")
    ikat_qrels = read_qrels(qrels_path)
    run = ikat2023_derived_run(qrels_path)
    for level in (1, 2):
        write(f"trec_eval/ikat2023_derived.l{level}.trec_eval.txt", trec_eval_text(ikat_qrels, run, level))

    cran = os.path.join(DATA, "classic-ir", "cranfield")
    run = bm25_run(cranfield_docs(os.path.join(cran, "cran.all.1400")), cranfield_queries(os.path.join(cran, "cran.qry")))
    with gzip.GzipFile(os.path.join(OUT, "trec_eval", "cranfield_bm25.run.gz"), "wb", mtime=0) as f:
        for qid in sorted(run, key=int):
            ranked = sorted(run[qid].items(), key=lambda x: -x[1])
            for r, (d, s) in enumerate(ranked, 1):
                f.write(f"{qid} Q0 {d} {r} {s:.3f} pybm25\n".encode())
    cran_qrels = read_qrels(os.path.join(cran, "QRelsCorrectedforTRECeval"))
    write("trec_eval/cranfield_bm25.l1.trec_eval.txt", trec_eval_text(cran_qrels, run, 1))

    pairs, topics = rewrite_pairs()
    plain = rouge_scorer.RougeScorer(["rouge1"], use_stemmer=False)
    stemmed = rouge_scorer.RougeScorer(["rouge1"], use_stemmer=True)
    lines = ["source\tid\tprecision\trecall\tf1\tstem_precision\tstem_recall\tstem_f1"]
    for src, i, ref, raw in pairs:
        a = plain.score(ref, raw)["rouge1"]
        s = stemmed.score(ref, raw)["rouge1"]
        lines.append(f"{src}\t{i}\t{a.precision!r}\t{a.recall!r}\t{a.fmeasure!r}\t{s.precision!r}\t{s.recall!r}\t{s.fmeasure!r}")
    write("rouge/rouge1_pairs.tsv", "\n".join(lines) + "\n")

    stemmer = porter.PorterStemmer()
    words = set()
    texts = [t for _, _, r, w in pairs for t in (r, w)]
    texts += [turn.get("response", "") for topic in topics for turn in topic["turns"]]
    for t in texts:
        words.update(w for w in tokenize.tokenize(t, None) if len(w) > 3)
    write("rouge/porter_nltk.tsv", "".join(f"{w}\t{stemmer.stem(w)}\n" for w in sorted(words)))

    ptkb_run = {"run_name": "overlap", "run_type": "automatic", "turns": []}
    trec_ptkb = {}
    for topic in topics:
        for turn in topic["turns"]:
            tid = f"{topic['number']}_{turn['turn_id']}"
            utt = set(tokenize.tokenize(turn["utterance"], None))
            shared = []
            for sid, text in topic["ptkb"].items():
                n = len(utt & set(tokenize.tokenize(text, None)))
                if n > 0:
                    shared.append((-n, int(sid)))
            ranked = [sid for _, sid in sorted(shared)]
            ptkb_run["turns"].append({"turn_id": tid, "responses": [
                {"rank": 1, "text": "", "ptkb_provenance": ranked, "passage_provenance": []}]})
            if ranked:
                trec_ptkb[tid] = {str(sid): float(len(ranked) - i) for i, sid in enumerate(ranked)}
    write("ikat/ptkb_overlap_run.json", json.dumps(ptkb_run, indent=0) + "\n")
    nist = read_qrels(os.path.join(DATA, "ikat", "qrels", "2023_ptkb_qrels_nist.txt"))
    ptkb_measures = ["ndcg_cut.3,5", "P.1,3,5", "recall.3,5", "map", "recip_rank", "set_P", "set_recall", "set_F"]
    ev = pytrec_eval.RelevanceEvaluator(nist, set(ptkb_measures))
    res = ev.evaluate(trec_ptkb)
    names = ["ndcg_cut_3", "ndcg_cut_5", "P_1", "P_3", "P_5", "recall_3", "recall_5", "map", "recip_rank", "set_P", "set_recall", "set_F"]
    lines = [f"{n:<22}\t{q}\t{res[q][n]!r}" for q in sorted(res) for n in names]
    lines.append(f"{'num_q':<22}\tall\t{len(nist)}")
    for n in names:
        lines.append(f"{n:<22}\tall\t{sum(res[q][n] for q in sorted(res)) / len(nist):.4f}")
    write("trec_eval/ptkb_overlap.nist.trec_eval.txt", "\n".join(lines) + "\n")

    rows = ["row\tf1\tem"]
    with open(os.path.join(DATA, "qrecc-scai", "scai_official", "batch1.csv"), newline="") as f:
        for n, rec in enumerate(csv.DictReader(f), 1):
            em = float(squad_normalize(rec["predicted"]) == squad_normalize(rec["gt"]))
            rows.append(f"{n}\t{squad_f1(rec['predicted'], rec['gt'])!r}\t{em!r}")
    write("qrecc/squad_batch1.tsv", "\n".join(rows) + "\n")

    scai = os.path.join(DATA, "qrecc-scai", "scai_official")
    with open(os.path.join(scai, "ground-truth.sample.json")) as f:
        truth = {f"{r['Conversation_no']}_{r['Turn_no']}": r["Truth_answer"] for r in json.load(f)}
    with gzip.open(os.path.join(scai, "gpt3_run.json.gz"), "rt") as f:
        gpt3 = {f"{r['Conversation_no']}_{r['Turn_no']}": r["Model_answer"] for r in json.load(f)}
    rows = ["id\tf1\tem"]
    for i, gold in truth.items():
        pred = gpt3.get(i, "")
        rows.append(f"{i}\t{squad_f1(pred, gold)!r}\t{float(squad_normalize(pred) == squad_normalize(gold))!r}")
    write("qrecc/squad_scai_sample.tsv", "\n".join(rows) + "\n")

    answers = []
    with gzip.open(os.path.join(DATA, "trec-rag", "rag24", "ragnarok_baseline_rag24.test_gpt-4o_top20.jsonl.gz"), "rt") as f:
        answers = [json.loads(l) for l in f if l.strip()]
    words = [sum(len(s["text"].split()) for s in a["answer"]) for a in answers]
    sents = [len(a["answer"]) for a in answers]
    cited = [sum(1 for s in a["answer"] if s["citations"]) for a in answers]
    outside = [sum(1 for s in a["answer"] for c in s["citations"] if not (0 <= c < len(a["references"]))) for a in answers]
    stats = {
        "answers": len(answers),
        "mean_words": sum(words) / len(answers),
        "mean_sentences": sum(sents) / len(answers),
        "cited_sentence_share": sum(cited) / sum(sents),
        "citations_outside_references": sum(outside),
        "length_mismatches": sum(1 for a, w in zip(answers, words) if a["response_length"] != w),
    }
    write("trec_rag/gpt4o_stats_2024.json", json.dumps(stats, indent=1) + "\n")

    pol = os.path.join(DATA, "poleval2022-passage-retrieval")
    with open(os.path.join(pol, "dev-0", "expected.tsv")) as f:
        expected = [set(x for x in l.rstrip("\n").split("\t") if x) for l in f]
    rows = []
    for sub in sorted(os.listdir(os.path.join(pol, "sample_submissions"))):
        with open(os.path.join(pol, "sample_submissions", sub)) as f:
            outs = [l.rstrip("\n").split("\t") for l in f]
        scores = []
        for rel, got in zip(expected, outs):
            seen, dcg = set(), 0.0
            for i, d in enumerate(got[:10]):
                if d not in seen and d in rel:
                    dcg += 1 / math.log2(i + 2)
                seen.add(d)
            idcg = sum(1 / math.log2(i + 2) for i in range(min(10, len(rel))))
            scores.append(dcg / idcg if rel else 0.0)
        rows.append(f"{sub}\t{sum(scores) / len(scores)!r}")
    write("poleval/dev0_samples.tsv", "\n".join(rows) + "\n")


if __name__ == "__main__":
    main()
