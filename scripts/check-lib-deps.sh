#!/usr/bin/env bash
# The library builds without the command line's dependencies nor the benchmarks': anyhow and
# indicatif are optional, enabled only by the `cli` feature (the binary's), instant-distance only by
# the `bench` feature, so the library must compile without them and must not pull indicatif or
# instant-distance in through another crate.
set -euo pipefail
cd "$(dirname "$0")/.."

# `build`, not `check`: after a debug build (scripts/test.sh builds the tests first) only the
# library itself is compiled again, where a check would first check every dependency. Only
# whether it compiles matters here, so it is not optimized (the dependencies' settings, and so
# their builds, stay the test build's).
cargo build --locked --lib --no-default-features --config 'profile.dev.package.convrag.opt-level=0'
for dep in indicatif instant-distance; do
    # `cargo tree -i` says "nothing to print" (or that no package matches) when nothing depends on it.
    tree=$(cargo tree --locked --no-default-features -e normal -i "$dep" 2>&1 || true)
    case "$tree" in
        *"nothing to print"*|*"did not match any packages"*) ;;
        *)
            echo "error: without default features the library still depends on $dep:" >&2
            echo "$tree" >&2
            exit 1
            ;;
    esac
done
echo "the library builds without anyhow, indicatif and instant-distance"
