#!/usr/bin/env bash
# Builds the real Kubernetes components the e2e cluster runs, once per version, from their
# source modules (the Go module proxy), and prints the directory holding the binaries.
#
#   tests/e2e/build.sh                      # default: the release go.mod pins (newest served)
#   K8S_VERSION=1.35.4 tests/e2e/build.sh   # another release (1.34.x-1.38.x)
#
# The pinned release builds from the committed go.mod/go.sum. Any other release builds
# from a module written fresh for it (k8s.io/kubernetes at that version, its staging
# modules replaced by the same release, etcd at the version it names), so every
# dependency is the one that release chose, never the pinned release's.
#
# Cache: ${XDG_CACHE_HOME:-~/.cache}/simdra-e2e/k8s-v<version>/bin. A build goes to a
# temporary directory that is renamed into place only when every binary linked, so a
# half-built cache is never reused; a binary added later (kubectl) is built on its own
# and moved in. Progress goes to stderr; stdout is the bin directory.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
pinned=$(awk '$1 == "k8s.io/kubernetes" && $2 ~ /^v/ {print substr($2, 2); exit}' "$here/go.mod")
version=${K8S_VERSION:-$pinned}
version=${version#v}
# A release whose kubelet cannot be built here runs the newest kubelet that can, within
# the supported skew (a kubelet up to three minors older than its API server): 1.38's
# imports sigs.k8s.io/iptables-wrappers, which the module proxy refuses at every version.
# bin/KUBELET_VERSION names the kubelet's release; drop the entry the day it is served.
kubelet_from=""
case "$version" in
  1.3[4-7].*) ;;
  1.38.*)
    kubelet_from=1.37.2
    # 1.38 declares `go 1.27`; the go command fetches that toolchain from the proxy.
    export GOTOOLCHAIN=${SIMDRA_GO127:-go1.27.3} ;;
  *) echo "e2e build: K8S_VERSION=$version is not supported (1.34.x-1.38.x)" >&2; exit 2 ;;
esac
cache=${XDG_CACHE_HOME:-$HOME/.cache}/simdra-e2e
dest=$cache/k8s-v$version
core=(etcd kube-apiserver kube-controller-manager kube-scheduler kubelet)
extra=(kubectl)
if [ -n "$kubelet_from" ]; then
  if ! kubelet_bin=$(env -u GOTOOLCHAIN K8S_VERSION=$kubelet_from bash "$0"); then
    echo "e2e build: the kubelet of $kubelet_from (for Kubernetes v$version) failed" >&2
    exit 1
  fi
fi

missing() {  # the names among "$@" not yet in the cache
  for c in "$@"; do [ -x "$dest/bin/$c" ] || echo "$c"; done
}
if [ -z "$(missing "${core[@]}" "${extra[@]}")" ]; then
  echo "$dest/bin"
  exit 0
fi

mkdir -p "$cache"
work=$(mktemp -d "$cache/.build-v$version.XXXXXX")
trap 'rm -rf "$work"' EXIT
# Only the command this build makes from our own source (etcd's main): the upstream judges
# in cmd/*-check import packages of the pinned release alone (build-checkers.sh), and
# would fail `go mod tidy` for an older release's module.
mkdir -p "$work/cmd" && cp -r "$here/cmd/etcd" "$work/cmd/"
cd "$work"

fresh_module() {  # a go.mod for another release, resolved from that release's own go.mod
  echo "e2e build: writing a module for Kubernetes v$version" >&2
  local modfile staging etcd m
  modfile=$(go mod download -json "k8s.io/kubernetes@v$version" \
    | awk -F'"' '$2 == "GoMod" {print $4}')
  [ -n "$modfile" ] || { echo "e2e build: k8s.io/kubernetes@v$version is not served" >&2; exit 1; }
  staging="v0.${version#1.}"
  go mod init github.com/simdra/simdra/tests/e2e 2>/dev/null
  go mod edit -go="$(awk '$1 == "go" {print $2; exit}' "$modfile")"
  go mod edit -require="k8s.io/kubernetes@v$version"
  for m in $(awk '$2 == "=>" && $3 ~ /^\.\/staging\// {print $1}' "$modfile"); do
    go mod edit -replace="$m=$m@$staging"
  done
  etcd=$(awk '$1 == "go.etcd.io/etcd/server/v3" {print $2; exit}' "$modfile")
  [ -n "$etcd" ] && go mod edit -require="go.etcd.io/etcd/server/v3@$etcd"
  for m in kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl; do
    [ "$m" = kubelet ] && [ -n "$kubelet_from" ] && continue
    go mod edit -tool="k8s.io/kubernetes/cmd/$m"
  done
  if ! go mod tidy >"$work/tidy.log" 2>&1; then
    tail -5 "$work/tidy.log" >&2
    echo "e2e build: go mod tidy failed for Kubernetes v$version (log above)" >&2
    exit 1
  fi
}
if [ "$version" = "$pinned" ]; then
  cp "$here/go.mod" "$here/go.sum" .
else
  fresh_module
fi

# Stamp the release into the binaries as Kubernetes' own build does (hack/lib/version.sh):
# without it they report v0.0.0-master and version-dependent behaviour goes astray.
minor=${version#1.}; minor=${minor%%.*}
stamp=""
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  stamp+=" -X $pkg.gitVersion=v$version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
  stamp+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
done
build() {  # name
  local pkg="k8s.io/kubernetes/cmd/$1"
  if [ "$1" = kubelet ] && [ -n "$kubelet_from" ]; then
    echo "e2e build: kubelet from Kubernetes v$kubelet_from (v$version's cannot be built)" >&2
    cp "$kubelet_bin/kubelet" bin/kubelet && echo "v$kubelet_from" > bin/KUBELET_VERSION
    return
  fi
  [ "$1" = etcd ] && pkg=./cmd/etcd
  echo "e2e build: $1 (Kubernetes v$version)" >&2
  if ! nice go build -trimpath -ldflags="-s -w$stamp" -o "bin/$1" "$pkg" >"$work/$1.log" 2>&1; then
    tail -20 "$work/$1.log" >&2
    echo "e2e build: $1 failed to build (Kubernetes v$version); log above" >&2
    exit 1
  fi
}
mkdir -p bin
if [ -n "$(missing "${core[@]}")" ]; then
  for c in "${core[@]}" "${extra[@]}"; do build "$c"; done
  echo "v$version" > bin/VERSION
  rm -rf "$dest.old"
  [ -e "$dest" ] && mv "$dest" "$dest.old"
  mkdir -p "$work/out" && mv bin "$work/out/bin" && mv "$work/out" "$dest"
  rm -rf "$dest.old"
else
  for c in $(missing "${extra[@]}"); do
    build "$c"
    mv "bin/$c" "$dest/bin/.$c.new" && mv "$dest/bin/.$c.new" "$dest/bin/$c"
  done
fi
echo "$dest/bin"
