#!/usr/bin/env bash
# Builds kwok's controller (sigs.k8s.io/kwok/cmd/kwok) from its Go module, once per version,
# and writes beside it the Stages it plays (kwok's own, from the same module), then prints
# the directory holding both:
#
#   <dir>/kwok          the controller: moves pods on fake nodes through their lifecycle
#   <dir>/stages.yaml   node initialize + lease heartbeat, pod ready/complete/delete
#
#   tests/e2e/build-kwok.sh                      # default version
#   KWOK_VERSION=0.7.0 tests/e2e/build-kwok.sh   # another one the module proxy serves
#
# The controller alone has no default Stages (kwokctl writes them into its config): with
# none it refuses to start, and without pod Stages a pod bound to a fake node never runs,
# nor goes away when deleted. So they come from the module the binary was built from.
#
# Cache: ${XDG_CACHE_HOME:-~/.cache}/simdra-e2e/kwok-v<version>, filled in a temporary
# directory that is renamed into place only when both files are there. kwok has its own
# go.mod with no replace directives, so `go install module@version` builds it with the
# dependencies that release chose, outside our e2e module. Progress goes to stderr; stdout
# is the directory.
set -euo pipefail
version=${KWOK_VERSION:-0.8.0}
version=${version#v}
cache=${XDG_CACHE_HOME:-$HOME/.cache}/simdra-e2e
dest=$cache/kwok-v$version
if [ -x "$dest/kwok" ] && [ -s "$dest/stages.yaml" ]; then
  echo "$dest"
  exit 0
fi
mkdir -p "$cache"
work=$(mktemp -d "$cache/.kwok-v$version.XXXXXX")
trap 'rm -rf "$work"' EXIT
module=sigs.k8s.io/kwok@v$version
echo "e2e build: kwok v$version" >&2
# Outside any module: the install must not read our go.mod (GOFLAGS=-mod=mod would be
# refused there anyway), and a GOFLAGS from the caller must not reach it.
cd "$work"
if ! GOFLAGS= GOBIN="$work" nice go install -trimpath -ldflags="-s -w" \
    "sigs.k8s.io/kwok/cmd/kwok@v$version" >"$work/build.log" 2>&1; then
  tail -20 "$work/build.log" >&2
  echo "e2e build: kwok v$version failed to build; log above" >&2
  exit 1
fi
src=$(GOFLAGS= go mod download -json "$module" | awk -F'"' '$2 == "Dir" {print $4}')
stages=$src/kustomize/stage
for f in node/fast/node-initialize.yaml node/heartbeat-with-lease/node-heartbeat-with-lease.yaml \
         pod/fast/pod-ready.yaml pod/fast/pod-complete.yaml pod/fast/pod-delete.yaml; do
  if [ ! -s "$stages/$f" ]; then
    echo "e2e build: kwok v$version has no stage $f in $stages" >&2
    exit 1
  fi
  cat "$stages/$f"
  echo "---"
done >"$work/stages.yaml"
rm -f "$work/build.log"
rm -rf "$dest" && mv "$work" "$dest"
trap - EXIT
echo "$dest"
