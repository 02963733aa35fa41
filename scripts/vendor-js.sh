#!/usr/bin/env bash
# The chat page's vendored JavaScript (static/vendor/README.md): fetches the pinned npm packages
# with `npm pack`, checks npm's integrity hash, and compares the files the page uses with the
# committed ones (exit 1 naming a file that differs). --update copies them over the committed ones.
set -euo pipefail
cd "$(dirname "$0")/.."
update=0
[ "${1:-}" = "--update" ] && update=1

# package@version  integrity  file-in-package  committed-file
packages=(
  "marked@18.2.1 sha512-ii4bxCTCqqwpT86XZWgJNs+ZnAIZksmLGYMViWA7PDIXYIeNo1x6cDdX3JOip9NM/cI6p8z57FxliACboTruMA== lib/marked.esm.js static/vendor/marked.esm.js LICENSE static/vendor/marked.LICENSE"
  "dompurify@3.4.18 sha512-ofe3wI/uNm68HInABYFJYqQxRw1EaKAjNdrFVKqjUY+UZurvNd2L/HuQe097s/4RivWiZyP6tT7aoT8atjfhwg== dist/purify.es.mjs static/vendor/purify.es.mjs LICENSE static/vendor/purify.LICENSE"
)
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
status=0
for entry in "${packages[@]}"; do
  read -r spec integrity file committed licence committed_licence <<<"$entry"
  tarball="$(cd "$work" && npm pack --silent "$spec")"
  actual="sha512-$(openssl dgst -sha512 -binary "$work/$tarball" | base64 -w0)"
  [ "$actual" = "$integrity" ] || { echo "vendor-js: $spec: integrity $actual, expected $integrity" >&2; exit 1; }
  mkdir -p "$work/${spec%@*}"
  tar xzf "$work/$tarball" -C "$work/${spec%@*}"
  for pair in "$file:$committed" "$licence:$committed_licence"; do
    src="$work/${spec%@*}/package/${pair%%:*}" dst="${pair#*:}"
    if [ "$update" -eq 1 ]; then
      cp "$src" "$dst"
    elif ! cmp -s "$src" "$dst"; then
      echo "vendor-js: $dst differs from $spec's ${pair%%:*}" >&2
      status=1
    fi
  done
done
[ "$status" -eq 0 ] && echo "vendor-js: static/vendor matches marked@18.2.1 and dompurify@3.4.18"
exit "$status"
