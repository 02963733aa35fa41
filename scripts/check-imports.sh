#!/usr/bin/env bash
# The import rules of ARCHITECTURE.md: no file-level import cycle and no upward import in src/,
# and every module and file named in its Modules table (scripts/check_imports.py). First the
# checker itself is shown a small tree with a cycle, an upward import, a module without a row and
# a file its row does not name, which it must refuse, so a broken checker cannot pass silently.
set -euo pipefail
cd "$(dirname "$0")/.."

probe="$(mktemp -d)"
trap 'rm -rf "$probe"' EXIT
mkdir -p "$probe/store" "$probe/pipeline"
printf 'pub mod pipeline;\npub mod store;\n' >"$probe/lib.rs"
printf 'pub mod a;\npub mod b;\n' >"$probe/store/mod.rs"
printf 'use super::b::B;\npub struct A;\n' >"$probe/store/a.rs"
printf 'use super::a::A;\npub struct B;\n' >"$probe/store/b.rs"
printf 'pub mod turn;\n' >"$probe/pipeline/mod.rs"
printf 'pub struct T;\n' >"$probe/pipeline/turn.rs"
printf 'use crate::pipeline::turn::T;\n' >>"$probe/store/a.rs"
printf '## Modules\n\n| module | what |\n|---|---|\n| `store/` | `a` |\n' >"$probe/ARCHITECTURE.md"
if report="$(python3 scripts/check_imports.py --src "$probe" --architecture "$probe/ARCHITECTURE.md" 2>&1)"; then
  echo "check-imports: the checker passed a tree with a cycle and an upward import" >&2
  exit 1
fi
case "$report" in
  *"import cycle among store/a.rs, store/b.rs"*"upward import: store/a.rs (store) -> pipeline/turn.rs (pipeline)"*"module 'pipeline' has no row"*"store/b.rs is not named in the 'store' row"*) ;;
  *) echo "check-imports: the checker's report on the probe tree is not the expected one:" >&2
     echo "$report" >&2
     exit 1 ;;
esac

python3 scripts/check_imports.py
