#!/usr/bin/env bash
# The library builds without the command line's dependencies: anyhow and indicatif are optional,
# enabled only by the `cli` feature (the binary's), so the library must compile without them and
# must not pull indicatif in through another crate.
set -euo pipefail
cd "$(dirname "$0")/.."

# `build`, not `check`: after a debug build (scripts/test.sh builds the tests first) only the
# library itself is compiled again, where a check would first check every dependency.
cargo build --locked --lib --no-default-features
# `cargo tree -i` says "nothing to print" (or that no package matches) when nothing depends on it.
tree=$(cargo tree --locked --no-default-features -e normal -i indicatif 2>&1 || true)
case "$tree" in
    *"nothing to print"*|*"did not match any packages"*) ;;
    *)
        echo "error: without the cli feature the library still depends on indicatif:" >&2
        echo "$tree" >&2
        exit 1
        ;;
esac
echo "the library builds without anyhow and indicatif"
