#!/usr/bin/env bash
# Builds the helm binary the deploy tests run, from the version pinned in
# tests/tools/helm/go.mod (module versions and checksums in go.sum), and caches it:
#
#   hack/build-helm.sh      # prints the path of the cached helm binary
#
# Cache: ${XDG_CACHE_HOME:-$HOME/.cache}/simdra-e2e/helm-<version>/helm. The binary is
# built in a temporary directory next to the cache and renamed into place, so an
# interrupted build never leaves a half-written helm behind. Needs Go (GO, or `go` on
# PATH, or /usr/local/go/bin/go) and the Go module proxy on the first run only.
# On failure it prints one line naming helm and exits 1.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
module="$root/tests/tools/helm"

die() { echo "build-helm: cannot build helm $version: $*" >&2; exit 1; }

version=$(awk '$1 == "helm.sh/helm/v3" { print $2; exit }' "$module/go.mod")
[ -n "$version" ] || { version="(unknown)"; die "no helm.sh/helm/v3 line in tests/tools/helm/go.mod"; }
cache="${XDG_CACHE_HOME:-$HOME/.cache}/simdra-e2e/helm-$version"
binary="$cache/helm"
if [ -x "$binary" ]; then
  echo "$binary"
  exit 0
fi

go=${GO:-$(command -v go || echo /usr/local/go/bin/go)}
[ -x "$go" ] || die "Go is not installed (set GO to the go binary)"
mkdir -p "$(dirname "$cache")" || die "cannot create the cache directory $(dirname "$cache")"
scratch=$(mktemp -d "$cache.partial.XXXXXX") || die "cannot create a temporary directory"
trap 'rm -rf "$scratch"' EXIT
# The ldflags helm's own Makefile sets: the version `helm version` prints, and the
# Kubernetes version `helm template` and `helm lint` assume (from client-go v0.X.Y: 1.X;
# without them helm assumes 1.20, which the chart's kubeVersion refuses).
client_go=$(cd "$module" && "$go" list -mod=readonly -m -f '{{.Version}}' k8s.io/client-go \
  2>&1) || die "go list k8s.io/client-go failed: $(echo "$client_go" | tail -n 1)"
kube_minor=$(echo "$client_go" | cut -d. -f2)
pkg=helm.sh/helm/v3
ldflags="-s -w -X $pkg/internal/version.version=$version"
for var in pkg/chartutil pkg/lint/rules; do
  ldflags+=" -X $pkg/$var.k8sVersionMajor=1 -X $pkg/$var.k8sVersionMinor=$kube_minor"
done
# nice: the build takes minutes of CPU on a cold Go cache; let other work go first.
if ! (cd "$module" && CGO_ENABLED=0 nice "$go" build -mod=readonly -trimpath \
    -ldflags "$ldflags" -o "$scratch/bin/helm" "$pkg/cmd/helm") >"$scratch/build.log" 2>&1
then
  die "go build failed: $(grep -v '^\s*$' "$scratch/build.log" | tail -n 1)"
fi
"$scratch/bin/helm" version --short >/dev/null 2>&1 || die "the built binary does not run"
# Rename the whole directory: readers see either no cache or a complete one.
mv -T "$scratch/bin" "$cache" 2>/dev/null || [ -x "$binary" ] \
  || die "cannot move the binary into $cache"
echo "$binary"
