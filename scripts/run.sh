#!/usr/bin/env bash
# Sets up what is missing and starts the server on its embedded defaults
# (data in ./.convrag, PostgreSQL run privately there, http://127.0.0.1:8080).
set -euo pipefail
cd "$(dirname "$0")/.."

./scripts/setup.sh
cargo build --release --locked
exec "${CARGO_TARGET_DIR:-target}/release/convrag" serve "$@"
