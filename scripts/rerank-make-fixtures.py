#!/usr/bin/env python3
"""Makes the reranking test fixtures under tests/fixtures/onnx/.

    ~/.cache/convrag/venv-convert/bin/python scripts/rerank-make-fixtures.py [CONVRAG_HOME]

(that virtual environment is the one scripts/fetch-models.sh creates; it has numpy, onnx,
safetensors, onnxruntime==1.31.1; `pip install tokenizers` into it as well.)

Produces:
1. tests/fixtures/onnx/tiny-cross-encoder/ — a tiny BERT cross-encoder (random weights, seed 5,
   hidden 16, 2 layers, a 60-word WordPiece vocabulary, one logit) as model.onnx, tokenizer.json and
   manifest.json (max_length 24), plus expected.json: pairs and their logits computed by the
   independent numpy forward pass in rerank_bert_onnx.py (float64) on inputs built here as
   `[CLS] query [SEP] passage [SEP]`, the passage truncated so the query stays whole. The graph is
   also checked against onnxruntime. Its ranking quality is meaningless (random weights): it tests
   the cross-encoder code path, not relevance.
2. tests/fixtures/onnx/minilm_scores.json — cosine scores of query/passage pairs under the real
   default model (CONVRAG_HOME/models/all-MiniLM-L6-v2 and the -int8 variant, as put there by
   scripts/fetch-models.sh) computed by Python onnxruntime + tokenizers: truncation 256, mean
   pooling, L2 normalization. One passage is longer than 256 tokens to exercise truncation.
"""
import json
import os
import sys

import numpy as np
import onnx
import onnxruntime as ort
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from rerank_bert_onnx import build_graph, numpy_forward  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURES = os.path.join(ROOT, "tests", "fixtures", "onnx")

WORDS = """the a of and to in is was for on that with as by it at from this are be or which an
cat dog fish bird sea river mountain city car train music song paint color red blue green
water fire earth wind tree flower sun moon star night day rain snow""".split()


def tiny_cross_encoder():
    out = os.path.join(FIXTURES, "tiny-cross-encoder")
    os.makedirs(out, exist_ok=True)
    vocab = {t: i for i, t in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]"] + WORDS)}
    tok = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]", max_input_chars_per_word=100))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", 2), ("[SEP]", 3)],
    )
    tok.save(os.path.join(out, "tokenizer.json"))

    cfg = {"hidden_size": 16, "num_attention_heads": 2, "num_hidden_layers": 2, "intermediate_size": 32,
           "layer_norm_eps": 1e-12, "hidden_act": "gelu", "vocab_size": len(vocab),
           "max_position_embeddings": 64}
    rng = np.random.default_rng(5)
    H, I = cfg["hidden_size"], cfg["intermediate_size"]

    def r(*shape, scale=0.3):
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    w = {"embeddings.word_embeddings.weight": r(len(vocab), H, scale=1.0),
         "embeddings.position_embeddings.weight": r(64, H),
         "embeddings.token_type_embeddings.weight": r(2, H),
         "embeddings.LayerNorm.weight": 1 + r(H, scale=0.1), "embeddings.LayerNorm.bias": r(H, scale=0.1)}
    for i in range(cfg["num_hidden_layers"]):
        p = f"encoder.layer.{i}."
        for n in ("query", "key", "value"):
            w[p + f"attention.self.{n}.weight"] = r(H, H)
            w[p + f"attention.self.{n}.bias"] = r(H, scale=0.1)
        w[p + "attention.output.dense.weight"] = r(H, H)
        w[p + "attention.output.dense.bias"] = r(H, scale=0.1)
        w[p + "attention.output.LayerNorm.weight"] = 1 + r(H, scale=0.1)
        w[p + "attention.output.LayerNorm.bias"] = r(H, scale=0.1)
        w[p + "intermediate.dense.weight"] = r(I, H)
        w[p + "intermediate.dense.bias"] = r(I, scale=0.1)
        w[p + "output.dense.weight"] = r(H, I)
        w[p + "output.dense.bias"] = r(H, scale=0.1)
        w[p + "output.LayerNorm.weight"] = 1 + r(H, scale=0.1)
        w[p + "output.LayerNorm.bias"] = r(H, scale=0.1)
    w["pooler.dense.weight"] = r(H, H, scale=1.0)
    w["pooler.dense.bias"] = r(H, scale=0.1)
    w["classifier.weight"] = r(1, H, scale=1.0)
    w["classifier.bias"] = np.array([0.25], np.float32)
    model = build_graph(w, cfg, head="logits")
    onnx.save(model, os.path.join(out, "model.onnx"))

    max_length = 24
    manifest = {"kind": "cross-encoder", "model": "model.onnx", "tokenizer": "tokenizer.json",
                "max_length": max_length,
                "inputs": {"input_ids": "input_ids", "attention_mask": "attention_mask",
                           "token_type_ids": "token_type_ids"},
                "output": "logits",
                "source": "random tiny BERT made by scripts/rerank-make-fixtures.py (ranking quality meaningless)"}
    with open(os.path.join(out, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=2)
        f.write("\n")

    query = "the red fish in the sea"
    passages = [
        ("p1", "a blue fish was in the river"),
        ("p2", "the cat and the dog"),
        ("p3", "music and song at night in the city"),
        ("p4", "rain and snow"),
        # Longer than the budget: the passage is cut, never the query.
        ("p5", " ".join(WORDS[20:]) + " " + " ".join(WORDS[20:])),
        ("p6", "fish"),
    ]
    q = tok.encode(query, add_special_tokens=False).ids
    budget = max_length - 3
    ids, types, lens = [], [], []
    for _, text in passages:
        p = tok.encode(text, add_special_tokens=False).ids[: budget - len(q)]
        seq = [2] + q + [3] + p + [3]
        ids.append(seq)
        types.append([0] * (len(q) + 2) + [1] * (len(p) + 1))
        lens.append(len(seq))
    width = max(lens)
    a_ids = np.zeros((len(ids), width), np.int64)
    a_mask = np.zeros_like(a_ids)
    a_types = np.zeros_like(a_ids)
    for i, (s, t) in enumerate(zip(ids, types)):
        a_ids[i, : len(s)] = s
        a_mask[i, : len(s)] = 1
        a_types[i, : len(t)] = t
    want = numpy_forward(w, cfg, a_ids, a_mask, a_types, head="logits")[:, 0]
    sess = ort.InferenceSession(os.path.join(out, "model.onnx"), providers=["CPUExecutionProvider"])
    got = sess.run(None, {"input_ids": a_ids, "attention_mask": a_mask, "token_type_ids": a_types})[0][:, 0]
    assert np.abs(got - want).max() < 1e-4, (got, want)
    with open(os.path.join(out, "expected.json"), "w") as f:
        json.dump({"query": query,
                   "passages": [{"id": i, "text": t} for i, t in passages],
                   "sequence_lengths": lens,
                   "logits": [float(x) for x in want],
                   "made_by": "scripts/rerank-make-fixtures.py (numpy float64 forward pass)"}, f, indent=2)
        f.write("\n")
    print("tiny cross-encoder:", [round(float(x), 4) for x in want], "lengths", lens)


QUERIES = ["how long is the life cycle of a flea", "what is the capital of france"]
PASSAGES = [
    ("flea", "The life cycle of a flea can last anywhere from 20 days to an entire year, depending on "
             "how long the flea remains in the dormant stage."),
    ("paris", "Paris is the capital and most populous city of France."),
    ("pasta", "Cook the pasta in salted boiling water for eight to ten minutes, then drain it."),
    ("long", " ".join(["Fleas are small flightless insects that live as external parasites of mammals and birds."] * 30)),
]


def minilm_scores(home):
    result = {"queries": QUERIES, "passages": [{"id": i, "text": t} for i, t in PASSAGES], "models": {},
              "made_by": "scripts/rerank-make-fixtures.py: Python onnxruntime 1.31.1 + tokenizers, "
                         "truncation 256, mean pooling, L2 norm, cosine"}
    for name in ("all-MiniLM-L6-v2", "all-MiniLM-L6-v2-int8"):
        d = os.path.join(home, "models", name)
        tok = Tokenizer.from_file(os.path.join(d, "tokenizer.json"))
        tok.no_padding()
        tok.enable_truncation(256)
        sess = ort.InferenceSession(os.path.join(d, "model.onnx"), providers=["CPUExecutionProvider"])

        def embed(text):
            e = tok.encode(text)
            ids = np.array([e.ids], np.int64)
            mask = np.array([e.attention_mask], np.int64)
            types = np.array([e.type_ids], np.int64)
            h = sess.run(["last_hidden_state"], {"input_ids": ids, "attention_mask": mask, "token_type_ids": types})[0][0]
            v = h.mean(0)
            return v / np.linalg.norm(v), len(e.ids)

        pv = [embed(t) for _, t in PASSAGES]
        scores = []
        for q in QUERIES:
            qv, _ = embed(q)
            scores.append([float(np.dot(qv, v)) for v, _ in pv])
        result["models"][name] = {"scores": scores, "passage_tokens": [n for _, n in pv]}
        print(name, np.round(scores, 4).tolist())
    with open(os.path.join(FIXTURES, "minilm_scores.json"), "w") as f:
        json.dump(result, f, indent=2)
        f.write("\n")


if __name__ == "__main__":
    home = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("CONVRAG_HOME", os.path.join(ROOT, ".convrag"))
    tiny_cross_encoder()
    minilm_scores(home)
