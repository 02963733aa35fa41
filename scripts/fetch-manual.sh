#!/usr/bin/env bash
# Fetches the PostgreSQL 15 manual (HTML) that `./scripts/run.sh` serves as the default collection,
# from Debian's `postgresql-doc-15` package, and prints the directory of its HTML pages.
#
#   ${CONVRAG_CACHE:-~/.cache/convrag}/postgresql-doc-15/<version>/usr/share/doc/postgresql-doc-15/html/
#
# The .deb is checked against the SHA-256 in apt's (signed) package lists before it is unpacked
# (dpkg-deb -x, nothing is installed). Idempotent: once unpacked, it prints the path and exits.
# Licence: the PostgreSQL Licence (see the package's copyright file beside the html folder).
set -euo pipefail

PKG=postgresql-doc-15
CACHE="${CONVRAG_CACHE:-$HOME/.cache/convrag}"
ROOT="$CACHE/$PKG"
HTML_REL="usr/share/doc/$PKG/html"

die() { echo "fetch-manual: error: $*" >&2; exit 1; }

# An unpacked version already there: use it (the default collection is built once anyway).
if [ -f "$ROOT/current" ]; then
    dir="$ROOT/$(cat "$ROOT/current")/$HTML_REL"
    if [ -f "$dir/index.html" ]; then
        echo "$dir"
        exit 0
    fi
fi

# The candidate version's apt record.
record() { apt-cache show --no-all-versions "$PKG" 2>/dev/null || true; }
meta="$(record)"
if [ -z "$meta" ]; then
    echo "fetch-manual: updating apt's package lists" >&2
    if [ "$(id -u)" -eq 0 ]; then apt-get update -qq >&2; else sudo apt-get update -qq >&2; fi
    meta="$(record)"
fi
[ -n "$meta" ] || die "apt knows no package $PKG (is this Debian bookworm with its main archive?)"
# field NAME: one field of that record.
field() { printf '%s\n' "$meta" | sed -n "s/^$1: //p" | head -n1; }
version="$(field Version)"
sha="$(field SHA256)"
[ -n "$version" ] && [ -n "$sha" ] || die "no version or SHA256 for $PKG in apt's lists"

echo "fetch-manual: downloading $PKG $version (about 2 MB) from Debian" >&2
work="$(mktemp -d "${TMPDIR:-/tmp}/convrag-manual.XXXXXX")"
trap 'rm -rf "$work"' EXIT
chmod 755 "$work"
(cd "$work" && apt-get download -qq "$PKG=$version" 2>&1 | grep -v "unsandboxed" >&2 || true)
deb="$(ls "$work"/*.deb 2>/dev/null | head -n1)"
[ -n "$deb" ] || die "apt-get download $PKG=$version failed"
got="$(sha256sum "$deb" | cut -d' ' -f1)"
[ "$got" = "$sha" ] || die "$deb: sha256 $got, apt's lists say $sha"

mkdir -p "$ROOT"
rm -rf "$ROOT/$version.tmp"
dpkg-deb -x "$deb" "$ROOT/$version.tmp"
[ -f "$ROOT/$version.tmp/$HTML_REL/index.html" ] || die "$deb has no $HTML_REL/index.html"
rm -rf "${ROOT:?}/$version"
mv "$ROOT/$version.tmp" "$ROOT/$version"
printf '%s\n' "$version" > "$ROOT/current.tmp" && mv "$ROOT/current.tmp" "$ROOT/current"
echo "$ROOT/$version/$HTML_REL"
