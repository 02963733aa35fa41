#!/usr/bin/env bash
# Sets up what is missing and starts the server on its embedded defaults (data in ./.convrag,
# PostgreSQL run privately there, http://127.0.0.1:8080), ready to talk to:
#   - ONNX Runtime and the default reranking model (scripts/fetch-models.sh, checksummed, cached);
#   - the PostgreSQL manual (scripts/fetch-manual.sh), which the server builds into its default
#     collection in the background on the first start (progress in the log and on the page);
#   - on the first start, a one-time sign-in link for the first user, printed below.
# Set CONVRAG_NO_DEFAULT_COLLECTION=1 to start without the manual.
set -euo pipefail
cd "$(dirname "$0")/.."

./scripts/setup.sh
./scripts/fetch-models.sh
args=()
if [ "${CONVRAG_NO_DEFAULT_COLLECTION:-0}" != 1 ]; then
  args+=(--default-collection "$(./scripts/fetch-manual.sh)")
fi
cargo build --release --locked
exec "${CARGO_TARGET_DIR:-target}/release/convrag" serve "${args[@]}" "$@"
