#!/usr/bin/env python3
"""File-level import graph of src/: fails on import cycles and on imports that run up the layers.

An edge A -> B means a file A names an item defined in file B through a `crate::`, `super::` or
`self::` path, in a `use` declaration or inline. Re-exports are followed to the file that defines
the item, so `use crate::pipeline::TurnPipeline` is an edge to `pipeline/turn.rs`, not to
`pipeline/mod.rs`, and a `pub use` is no edge of its own. Code under `#[cfg(test)]` is left out: tests are not part of the graph the
library is built from.

Layers (a module may import its own layer's files and the layers below it, never above):
"""
import os
import re
import sys
from collections import defaultdict

SRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src")

# Lowest first. Modules on one line share a layer and may import each other only where RULES allow.
LAYERS = [
    ["text", "progress", "metrics", "digest"],
    ["formats", "collection"],
    ["eval", "index"],
    ["config"],
    ["store", "llm"],
    ["rerank"],
    ["dense"],
    ["pipeline"],
    ["service", "tune"],
    ["web"],
    ["batch", "mcp"],
    ["api"],
    ["cli", "lib", "main"],
]
# Imports forbidden beyond the layering, (importer, imported): the turn pipeline knows nothing of
# storage; the adapters over the services (batch, MCP, the HTTP API, which mounts MCP) never reach
# into each other; offline training is not served.
FORBIDDEN = {
    ("pipeline", "store"),
    ("api", "batch"),
    ("batch", "mcp"),
    ("mcp", "batch"),
    ("service", "tune"),
    ("tune", "service"),
    ("web", "tune"),
    ("llm", "store"),
    ("store", "llm"),
    ("eval", "index"),
    ("formats", "collection"),
}
LAYER_OF = {m: i for i, names in enumerate(LAYERS) for m in names}

ITEM_DEF = re.compile(
    r"^\s*(?:pub(?:\([^)]*\))?\s+)?(?:async\s+|unsafe\s+|const\s+)*"
    r"(?:struct|enum|fn|trait|type|const|static|union|mod|macro_rules!)\s+([A-Za-z_][A-Za-z0-9_]*)",
    re.M,
)
MACRO_EXPORT = re.compile(r"#\[macro_export\]\s*macro_rules!\s*([A-Za-z_][A-Za-z0-9_]*)")


def module_files():
    """{module path tuple: file}; the crate root is ()."""
    files = {}
    for root, _dirs, names in os.walk(SRC):
        for name in names:
            if not name.endswith(".rs"):
                continue
            path = os.path.relpath(os.path.join(root, name), SRC)
            parts = path[:-3].split(os.sep)
            if parts in (["lib"],):
                mod = ()
            elif parts == ["main"]:
                mod = ("main",)
            elif parts[-1] == "mod":
                mod = tuple(parts[:-1])
            else:
                mod = tuple(parts)
            files[mod] = path
    return files


def strip_tests_and_comments(text):
    """The text without comments, string contents and `#[cfg(test)]` items."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
            continue
        if text.startswith("/*", i):
            depth, i = 1, i + 2
            while i < n and depth:
                if text.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif text.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    i += 1
            continue
        m = re.match(r'r(#*)"', text[i:i + 10])
        if m and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            end = '"' + m.group(1)
            j = text.find(end, i + len(m.group(0)))
            out.append('""')
            i = n if j < 0 else j + len(end)
            continue
        if c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append('""')
            i = j + 1
            continue
        if c == "'" and i + 2 < n:
            # A char literal ('a', '\n', '\''), not a lifetime.
            m = re.match(r"'(\\.|[^\\'])'", text[i:i + 4]) or re.match(r"'\\u\{[0-9a-fA-F]+\}'", text[i:i + 12])
            if m:
                out.append("' '")
                i += len(m.group(0))
                continue
        out.append(c)
        i += 1
    code = "".join(out)
    # Drop `#[cfg(test)]` items: the attribute, then everything up to the end of the item.
    result, i = [], 0
    for m in re.finditer(r"#\[cfg\(test\)\]", code):
        if m.start() < i:
            continue
        result.append(code[i:m.start()])
        j = m.end()
        depth = 0
        while j < len(code):
            if code[j] == "{":
                depth += 1
            elif code[j] == "}":
                depth -= 1
                if depth == 0:
                    j += 1
                    break
            elif code[j] == ";" and depth == 0:
                j += 1
                break
            j += 1
        i = j
    result.append(code[i:])
    return "".join(result)


def expand_use_tree(tree):
    """`a::{b, c::{d, e as f}, self}` -> [[a, b], [a, c, d], [a, c, e], [a]]."""
    tree = re.sub(r"\s+", "", tree)
    paths = []

    def walk(prefix, s):
        depth, start, parts = 0, 0, []
        for k, ch in enumerate(s):
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
            elif ch == "," and depth == 0:
                parts.append(s[start:k])
                start = k + 1
        parts.append(s[start:])
        for part in parts:
            if not part:
                continue
            brace = part.find("{")
            if brace >= 0:
                head = [p for p in part[:brace].split("::") if p]
                walk(prefix + head, part[brace + 1:part.rfind("}")])
            else:
                segs = [p for p in part.split("::") if p]
                if segs and segs[-1] == "self":
                    segs = segs[:-1]
                paths.append(prefix + segs)

    walk([], tree)
    return paths


USE = re.compile(r"\b(pub(?:\([^)]*\))?\s+)?use\s+([^;]+);")
INLINE = re.compile(r"(?<![A-Za-z0-9_:])((?:crate|super|self)(?:::[A-Za-z_][A-Za-z0-9_]*)+)")


class Graph:
    def __init__(self):
        self.files = module_files()
        self.code = {}
        for mod, path in self.files.items():
            with open(os.path.join(SRC, path), encoding="utf-8") as f:
                self.code[mod] = strip_tests_and_comments(f.read())
        self.defs = {mod: set(ITEM_DEF.findall(c)) for mod, c in self.code.items()}
        self.reexports = {mod: self._reexports(mod) for mod in self.files}

    def _uses(self, mod):
        """[(is_pub, absolute path segments)] for every `use` of a module."""
        found = []
        for m in USE.finditer(self.code[mod]):
            tree = re.sub(r"\s+as\s+[A-Za-z_][A-Za-z0-9_]*", "", m.group(2))
            for segs in expand_use_tree(tree):
                absolute = self.absolute(mod, segs)
                if absolute is not None:
                    found.append((bool(m.group(1)), absolute, segs[-1] if segs else None))
        return found

    def _reexports(self, mod):
        names = {}
        for is_pub, absolute, _last in self._uses(mod):
            if is_pub and absolute:
                names[absolute[-1]] = absolute
        return names

    def absolute(self, mod, segs):
        """Absolute module path of `segs` used in module `mod`, or None for another crate."""
        if not segs:
            return None
        if segs[0] == "crate":
            return segs[1:]
        here = list(mod if self.files.get(mod, "").endswith("mod.rs") or mod == () else mod)
        # In a non-mod.rs file, `self` is the file's module and `super` its parent.
        if segs[0] == "self":
            return here + segs[1:]
        if segs[0] == "super":
            base = here
            k = 0
            while k < len(segs) and segs[k] == "super":
                base = base[:-1]
                k += 1
            return base + segs[k:]
        if tuple(here + [segs[0]]) in self.files:
            # A submodule named without `self::` (`use turn::X` inside pipeline/mod.rs).
            return here + segs
        return None

    def resolve(self, absolute, seen=None):
        """The file that defines the item an absolute path names."""
        seen = seen or set()
        segs = list(absolute)
        # The longest prefix that is a module file.
        k = len(segs)
        while k > 0 and tuple(segs[:k]) not in self.files:
            k -= 1
        mod = tuple(segs[:k])
        if mod not in self.files:
            return None
        rest = segs[k:]
        if rest:
            name = rest[0]
            if name not in self.defs[mod] and name in self.reexports[mod]:
                target = tuple(self.reexports[mod][name])
                if target not in seen:
                    seen.add(target)
                    found = self.resolve(list(target) + rest[1:], seen)
                    if found is not None:
                        return found
        return mod

    def edges(self):
        edges = defaultdict(set)
        for mod in self.files:
            targets = set()
            for is_pub, absolute, _last in self._uses(mod):
                # A re-export is followed through at its users, not an import of its own.
                if not is_pub:
                    targets.add(self.resolve(absolute))
            for m in INLINE.finditer(self.code[mod]):
                absolute = self.absolute(mod, m.group(1).split("::"))
                if absolute is not None:
                    targets.add(self.resolve(absolute))
            for target in targets:
                if target is not None and target != mod and target != ():
                    edges[mod].add(target)
        return edges


def top(mod):
    if mod == ():
        return "lib"
    return mod[0]


def cycles(edges, nodes):
    """Strongly connected components with more than one file (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]
    sys.setrecursionlimit(10000)

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return out


def architecture_problems(src, doc):
    """Every top-level module of `src` has a row in `doc`'s Modules table, and the row names
    each of its files and folders (a name inside backticks: `ptkb`, `rewrite/`, `service::rows`),
    so the table cannot fall behind the tree."""
    rows, in_modules = {}, False
    with open(doc, encoding="utf-8") as f:
        for line in f:
            if line.startswith("## "):
                in_modules = line.strip() == "## Modules"
            elif in_modules and line.startswith("| `"):
                cells = line.strip().strip("|").split("|")
                first = re.match(r"\s*`([A-Za-z0-9_]+)/?`", cells[0])
                if first:
                    rows[first.group(1)] = "|".join(cells[1:])
    problems = []
    for entry in sorted(os.listdir(src)):
        path = os.path.join(src, entry)
        if entry in ("lib.rs", "main.rs") or not (os.path.isdir(path) or entry.endswith(".rs")):
            continue
        module = entry[:-3] if entry.endswith(".rs") else entry
        if module not in rows:
            problems.append(f"{os.path.basename(doc)}: module '{module}' has no row in the Modules table")
            continue
        if not os.path.isdir(path):
            continue
        named = set()
        for span in re.findall(r"`([^`]+)`", rows[module]):
            named.update(re.findall(r"[A-Za-z0-9_]+", span))
        for child in sorted(os.listdir(path)):
            child_path = os.path.join(path, child)
            stem = child[:-3] if child.endswith(".rs") else child if os.path.isdir(child_path) else None
            if stem in (None, "mod"):
                continue
            if stem not in named:
                problems.append(f"{os.path.basename(doc)}: {module}/{child} is not named in the '{module}' row")
    return problems


def main():
    global SRC
    doc = None
    args = sys.argv[1:]
    while args:
        if args[0] == "--src" and len(args) > 1:
            SRC, args = args[1], args[2:]
        elif args[0] == "--architecture" and len(args) > 1:
            doc, args = args[1], args[2:]
        else:
            print(f"usage: {sys.argv[0]} [--src DIR] [--architecture FILE]", file=sys.stderr)
            return 2
    doc = doc or os.path.join(SRC, "..", "ARCHITECTURE.md")
    graph = Graph()
    edges = graph.edges()
    name = lambda mod: graph.files[mod]
    problems = []
    for comp in cycles(edges, graph.files.keys()):
        members = set(comp)
        inner = sorted(
            f"{name(a)} -> {name(b)}" for a in comp for b in edges.get(a, ()) if b in members
        )
        problems.append("import cycle among " + ", ".join(name(m) for m in comp) + ":\n    " + "\n    ".join(inner))
    for a in sorted(edges):
        for b in sorted(edges[a]):
            ta, tb = top(a), top(b)
            if ta == tb:
                continue
            if ta not in LAYER_OF or tb not in LAYER_OF:
                problems.append(f"{name(a)} -> {name(b)}: module '{ta if ta not in LAYER_OF else tb}' has no layer in scripts/check_imports.py")
            elif LAYER_OF[tb] > LAYER_OF[ta]:
                problems.append(f"upward import: {name(a)} ({ta}) -> {name(b)} ({tb})")
            elif (ta, tb) in FORBIDDEN:
                problems.append(f"forbidden import: {name(a)} ({ta}) -> {name(b)} ({tb})")
    problems.extend(architecture_problems(SRC, doc))
    if problems:
        for p in problems:
            print(p)
        print(f"check-imports: {len(problems)} problem(s)", file=sys.stderr)
        return 1
    count = sum(len(v) for v in edges.values())
    print(f"check-imports: {len(graph.files)} files, {count} file-level imports, no cycle, no upward import, every module and file in ARCHITECTURE.md's table")
    return 0


if __name__ == "__main__":
    sys.exit(main())
