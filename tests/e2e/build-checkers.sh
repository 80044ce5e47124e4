#!/usr/bin/env bash
# Builds the upstream judges the e2e feeds our output to (tests/e2e/cmd/*-check), from the
# pinned release's modules (go.mod: k8s.io/dynamic-resource-allocation at the release the
# cluster runs by default), and prints the directory holding them.
#
# Cache: ${XDG_CACHE_HOME:-~/.cache}/simdra-e2e/checkers-<hash of go.sum and the sources>,
# so a changed checker or a new pin builds afresh and an unchanged one costs nothing.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cache=${XDG_CACHE_HOME:-$HOME/.cache}/simdra-e2e
key=$(cat "$here/go.sum" "$here"/cmd/*-check/*.go | sha256sum | cut -c1-16)
dest=$cache/checkers-$key
checkers=()
for dir in "$here"/cmd/*-check; do checkers+=("$(basename "$dir")"); done
missing=0
for c in "${checkers[@]}"; do [ -x "$dest/$c" ] || missing=1; done
if [ "$missing" = 0 ]; then
  echo "$dest"
  exit 0
fi
mkdir -p "$cache"
work=$(mktemp -d "$cache/.checkers.XXXXXX")
trap 'rm -rf "$work"' EXIT
cd "$here"
for c in "${checkers[@]}"; do
  echo "e2e build: $c" >&2
  if ! nice go build -trimpath -o "$work/$c" "./cmd/$c" >"$work/$c.log" 2>&1; then
    tail -20 "$work/$c.log" >&2
    echo "e2e build: $c failed to build; log above" >&2
    exit 1
  fi
  rm -f "$work/$c.log"
done
rm -rf "$dest" && mv "$work" "$dest"
trap - EXIT
echo "$dest"
