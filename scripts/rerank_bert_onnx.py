#!/usr/bin/env python3
"""BERT weights (safetensors / numpy) -> fp32 ONNX graph, without torch; plus an independent numpy
forward pass to check the graph against.

Used by scripts/fetch-models.sh (conversion of all-MiniLM-L6-v2) and by
scripts/rerank-make-fixtures.py (the tiny cross-encoder test fixture).

Run directly:
    python scripts/rerank_bert_onnx.py convert MODEL_DIR/model.safetensors MODEL_DIR/config.json OUT.onnx
    python scripts/rerank_bert_onnx.py check   MODEL_DIR/model.safetensors MODEL_DIR/config.json OUT.onnx
`check` runs OUT.onnx through onnxruntime on random token ids and compares with the numpy forward
pass (max abs difference must stay under 1e-4); it prints the difference and exits non-zero on failure.

Needs: numpy, onnx, safetensors (and onnxruntime for `check`).
"""
import json
import math
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17  # LayerNormalization is a standard op from opset 17


def _strip_prefix(weights):
    """Accept both `bert.encoder...` (BertForSequenceClassification) and `encoder...` names."""
    out = {}
    for k, v in weights.items():
        out[k[len("bert."):] if k.startswith("bert.") else k] = v
    return out


def build_graph(weights, cfg, head="last_hidden_state"):
    """Returns an onnx.ModelProto.

    head == "last_hidden_state": output `last_hidden_state` [batch, seq, hidden] (bi-encoder).
    head == "logits": BERT pooler (tanh dense on [CLS]) + `classifier` -> `logits` [batch, labels]
    (the Hugging Face AutoModelForSequenceClassification layout, i.e. a cross-encoder).
    """
    w = _strip_prefix(weights)
    hidden = cfg["hidden_size"]
    heads = cfg["num_attention_heads"]
    head_dim = hidden // heads
    layers = cfg["num_hidden_layers"]
    eps = float(cfg.get("layer_norm_eps", 1e-12))
    if cfg.get("hidden_act", "gelu") != "gelu":
        raise ValueError(f"unsupported hidden_act {cfg.get('hidden_act')!r}: only exact gelu")

    inits, nodes = [], []

    def init(name, arr):
        # np.array(copy) keeps 0-d scalars 0-d (np.ascontiguousarray would make them [1]).
        inits.append(numpy_helper.from_array(np.array(arr, order="C", copy=True), name))
        return name

    def node(op, ins, outs=None, **attrs):
        node.counter += 1
        outs = outs or [f"{op.lower()}_{node.counter}"]
        nodes.append(helper.make_node(op, ins, outs, name=f"{op}_{node.counter}", **attrs))
        return outs[0]

    node.counter = 0

    def linear(x, prefix):
        # torch Linear stores [out, in]; MatMul wants [in, out].
        wt = init(prefix + ".weight_t", w[prefix + ".weight"].astype(np.float32).T)
        b = init(prefix + ".bias", w[prefix + ".bias"].astype(np.float32))
        return node("Add", [node("MatMul", [x, wt]), b])

    def layer_norm(x, prefix):
        g = init(prefix + ".weight", w[prefix + ".weight"].astype(np.float32))
        b = init(prefix + ".bias", w[prefix + ".bias"].astype(np.float32))
        return node("LayerNormalization", [x, g, b], axis=-1, epsilon=eps)

    # Embeddings: word + position (sliced to the batch's length) + token type, then LayerNorm.
    word = init("word_embeddings", w["embeddings.word_embeddings.weight"].astype(np.float32))
    pos = init("position_embeddings", w["embeddings.position_embeddings.weight"].astype(np.float32))
    typ = init("token_type_embeddings", w["embeddings.token_type_embeddings.weight"].astype(np.float32))
    shape = node("Shape", ["input_ids"])
    seq_len = node("Slice", [shape, init("c_1", np.array([1], np.int64)), init("c_2", np.array([2], np.int64))])
    zero = init("c_0", np.array([0], np.int64))
    pos_slice = node("Slice", [pos, zero, seq_len, zero])
    x = node("Add", [node("Gather", [word, "input_ids"]), pos_slice])
    x = node("Add", [x, node("Gather", [typ, "token_type_ids"])])
    x = layer_norm(x, "embeddings.LayerNorm")

    # Additive attention mask [batch, 1, 1, seq]: 0 for real tokens, -1e9 for padding.
    m = node("Cast", ["attention_mask"], to=TensorProto.FLOAT)
    m = node("Mul", [node("Sub", [init("c_one", np.array(1.0, np.float32)), m]), init("c_neg", np.array(-1e9, np.float32))])
    m = node("Unsqueeze", [m, init("c_axes12", np.array([1, 2], np.int64))])

    split_shape = init("c_split", np.array([0, 0, heads, head_dim], np.int64))
    merge_shape = init("c_merge", np.array([0, 0, hidden], np.int64))
    scale = init("c_scale", np.array(1.0 / math.sqrt(head_dim), np.float32))
    half = init("c_half", np.array(0.5, np.float32))
    one = init("c_onef", np.array(1.0, np.float32))
    rsqrt2 = init("c_rsqrt2", np.array(1.0 / math.sqrt(2.0), np.float32))

    for i in range(layers):
        p = f"encoder.layer.{i}."
        q = node("Transpose", [node("Reshape", [linear(x, p + "attention.self.query"), split_shape])], perm=[0, 2, 1, 3])
        k = node("Transpose", [node("Reshape", [linear(x, p + "attention.self.key"), split_shape])], perm=[0, 2, 3, 1])
        v = node("Transpose", [node("Reshape", [linear(x, p + "attention.self.value"), split_shape])], perm=[0, 2, 1, 3])
        scores = node("Add", [node("Mul", [node("MatMul", [q, k]), scale]), m])
        probs = node("Softmax", [scores], axis=-1)
        ctx = node("Reshape", [node("Transpose", [node("MatMul", [probs, v])], perm=[0, 2, 1, 3]), merge_shape])
        attn = linear(ctx, p + "attention.output.dense")
        x = layer_norm(node("Add", [attn, x]), p + "attention.output.LayerNorm")
        h = linear(x, p + "intermediate.dense")
        # exact GELU: 0.5 * h * (1 + erf(h / sqrt(2)))
        h = node("Mul", [node("Mul", [h, half]), node("Add", [node("Erf", [node("Mul", [h, rsqrt2])]), one])])
        out = linear(h, p + "output.dense")
        x = layer_norm(node("Add", [out, x]), p + "output.LayerNorm")

    batch, seq = "batch", "sequence"
    inputs = [helper.make_tensor_value_info(n, TensorProto.INT64, [batch, seq])
              for n in ("input_ids", "attention_mask", "token_type_ids")]
    if head == "last_hidden_state":
        nodes.append(helper.make_node("Identity", [x], ["last_hidden_state"], name="output"))
        outputs = [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, [batch, seq, hidden])]
    elif head == "logits":
        cls = node("Gather", [x, init("c_idx0", np.array(0, np.int64))], axis=1)  # [batch, hidden]
        pooled = node("Tanh", [linear(cls, "pooler.dense")])
        wt = init("classifier.weight_t", weights["classifier.weight"].astype(np.float32).T)
        b = init("classifier.bias", weights["classifier.bias"].astype(np.float32))
        nodes.append(helper.make_node("Gemm", [pooled, wt, b], ["logits"], name="classifier"))
        labels = weights["classifier.weight"].shape[0]
        outputs = [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [batch, labels])]
    else:
        raise ValueError(f"unknown head {head!r}")

    graph = helper.make_graph(nodes, "bert", inputs, outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="convrag")
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def numpy_forward(weights, cfg, input_ids, attention_mask, token_type_ids, head="last_hidden_state"):
    """Plain numpy BERT forward pass (float64), written independently of the graph builder."""
    w = {k: v.astype(np.float64) for k, v in _strip_prefix(weights).items() if v.dtype != np.int64}
    H = cfg["hidden_size"]
    nh = cfg["num_attention_heads"]
    d = H // nh
    eps = float(cfg.get("layer_norm_eps", 1e-12))
    B, S = input_ids.shape

    def ln(x, p):
        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        return (x - mu) / np.sqrt(var + eps) * w[p + ".weight"] + w[p + ".bias"]

    def lin(x, p):
        return x @ w[p + ".weight"].T + w[p + ".bias"]

    from math import erf
    verf = np.vectorize(erf)

    x = (w["embeddings.word_embeddings.weight"][input_ids]
         + w["embeddings.position_embeddings.weight"][np.arange(S)][None]
         + w["embeddings.token_type_embeddings.weight"][token_type_ids])
    x = ln(x, "embeddings.LayerNorm")
    bias = np.where(attention_mask[:, None, None, :] > 0, 0.0, -1e9)
    for i in range(cfg["num_hidden_layers"]):
        p = f"encoder.layer.{i}."

        def heads(t):
            return t.reshape(B, S, nh, d).transpose(0, 2, 1, 3)

        q, k, v = (heads(lin(x, p + "attention.self." + n)) for n in ("query", "key", "value"))
        s = q @ k.transpose(0, 1, 3, 2) / math.sqrt(d) + bias
        s = np.exp(s - s.max(-1, keepdims=True))
        s /= s.sum(-1, keepdims=True)
        c = (s @ v).transpose(0, 2, 1, 3).reshape(B, S, H)
        x = ln(lin(c, p + "attention.output.dense") + x, p + "attention.output.LayerNorm")
        h = lin(x, p + "intermediate.dense")
        h = 0.5 * h * (1.0 + verf(h / math.sqrt(2.0)))
        x = ln(lin(h, p + "output.dense") + x, p + "output.LayerNorm")
    if head == "last_hidden_state":
        return x
    pooled = np.tanh(lin(x[:, 0], "pooler.dense"))
    return pooled @ weights["classifier.weight"].astype(np.float64).T + weights["classifier.bias"].astype(np.float64)


def check(weights, cfg, onnx_path, head="last_hidden_state", seed=0):
    import onnxruntime as ort

    rng = np.random.default_rng(seed)
    B, S = 3, 24
    ids = rng.integers(1000, cfg["vocab_size"], size=(B, S)).astype(np.int64)
    ids[:, 0] = 101
    mask = np.ones((B, S), np.int64)
    mask[1, 15:] = 0  # padded row
    mask[2, 7:] = 0
    ids[mask == 0] = 0
    types = np.zeros((B, S), np.int64)
    types[0, 10:] = 1
    sess = ort.InferenceSession(onnx_path, providers=["CPUExecutionProvider"])
    got = sess.run(None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": types})[0]
    want = numpy_forward(weights, cfg, ids, mask, types, head)
    if head == "last_hidden_state":
        # Padding positions are not used by mean pooling; compare real tokens only.
        diff = max(np.abs(got[b][mask[b] > 0] - want[b][mask[b] > 0]).max() for b in range(B))
    else:
        diff = float(np.abs(got - want).max())
    return float(diff)


def main(argv):
    if len(argv) != 5 or argv[1] not in ("convert", "check"):
        print(__doc__, file=sys.stderr)
        return 2
    from safetensors.numpy import load_file

    weights = load_file(argv[2])
    with open(argv[3]) as f:
        cfg = json.load(f)
    if argv[1] == "convert":
        model = build_graph(weights, cfg)
        onnx.save(model, argv[4])
        return 0
    diff = check(weights, cfg, argv[4])
    print(f"max |onnxruntime - numpy| over real tokens: {diff:.2e}")
    return 0 if diff < 1e-4 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
