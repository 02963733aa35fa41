#!/usr/bin/env bash
# CI's dependency cache: the build outputs of third-party crates, carried from one CI run on this
# machine to the next, so a clean clone compiles only convrag itself. Cargo decides what to reuse
# by its own fingerprints (compiler, profile, features, source), so a stale entry is rebuilt, never
# used. Our own crate's outputs are never kept: every clone builds and lints it afresh.
#   ci-deps-cache.sh restore DIR   copy DIR's outputs into ./target (nothing when DIR is absent)
#   ci-deps-cache.sh save DIR      replace DIR with ./target's third-party outputs
set -euo pipefail
cd "$(dirname "$0")/.."

usage() {
  echo "usage: $0 restore|save DIR" >&2
  exit 2
}
[ $# -eq 2 ] || usage
action=$1
cache=$2
# The debug profile's three directories cargo reuses outputs from.
dirs=(deps build .fingerprint)

case "$action" in
  restore)
    if [ ! -f "$cache/complete" ]; then
      echo "ci-deps-cache: nothing to restore from $cache"
      exit 0
    fi
    mkdir -p target/debug
    for d in "${dirs[@]}"; do
      cp -a "$cache/debug/$d" target/debug/
    done
    echo "ci-deps-cache: restored $(du -sh target/debug | cut -f1) of dependency outputs from $cache"
    ;;
  save)
    [ -d target/debug/deps ] || {
      echo "ci-deps-cache: no target/debug/deps to save" >&2
      exit 1
    }
    # Written beside the cache and renamed over it, so an interrupted save leaves the old one.
    staging="$cache.new.$$"
    rm -rf "$staging"
    trap 'rm -rf "$staging"' EXIT
    mkdir -p "$staging/debug"
    for d in "${dirs[@]}"; do
      [ -d "target/debug/$d" ] && cp -a "target/debug/$d" "$staging/debug/"
    done
    # convrag's library, binaries, examples and test binaries (`it`), with their fingerprints.
    find "$staging/debug" -mindepth 2 -maxdepth 2 \
      \( -name 'convrag-*' -o -name 'libconvrag-*' -o -name 'it-*' \) -exec rm -rf {} +
    touch "$staging/complete"
    rm -rf "$cache"
    mv "$staging" "$cache"
    echo "ci-deps-cache: saved $(du -sh "$cache" | cut -f1) of dependency outputs to $cache"
    ;;
  *) usage ;;
esac
