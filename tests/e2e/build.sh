#!/usr/bin/env bash
# Builds the real Kubernetes components the e2e cluster runs, once per version, from their
# source modules (the Go module proxy), and prints the directory holding the binaries.
#
#   K8S_VERSION=1.36.3 tests/e2e/build.sh      # default: the version go.mod pins
#
# Cache: ${XDG_CACHE_HOME:-~/.cache}/simdra-e2e/k8s-v<version>/bin. A build goes to a
# temporary directory that is renamed into place only when every binary linked, so a
# half-built cache is never reused. Progress goes to stderr; stdout is the bin directory.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
pinned=$(awk '$1 == "k8s.io/kubernetes" && $2 ~ /^v/ {print substr($2, 2); exit}' "$here/go.mod")
version=${K8S_VERSION:-$pinned}
version=${version#v}
case "$version" in
  1.3[4-7].*) ;;
  *) echo "e2e build: K8S_VERSION=$version is not supported (1.34.x-1.37.x)" >&2; exit 2 ;;
esac
cache=${XDG_CACHE_HOME:-$HOME/.cache}/simdra-e2e
dest=$cache/k8s-v$version
components=(etcd kube-apiserver kube-controller-manager kube-scheduler kubelet)

complete() {
  for c in "${components[@]}"; do [ -x "$dest/bin/$c" ] || return 1; done
}
if complete; then
  echo "$dest/bin"
  exit 0
fi

mkdir -p "$cache"
work=$(mktemp -d "$cache/.build-v$version.XXXXXX")
trap 'rm -rf "$work"' EXIT
cp -r "$here/go.mod" "$here/go.sum" "$here/cmd" "$work/"
cd "$work"
# 1.37 needs a newer Go than some machines ship; the proxy serves the toolchain.
case "$version" in 1.37.*) export GOTOOLCHAIN=${GOTOOLCHAIN:-go1.27.3} ;; esac
if [ "$version" != "$pinned" ]; then
  # Point k8s.io/kubernetes and every staging module it replaces locally at this release.
  echo "e2e build: retargeting the module at Kubernetes v$version" >&2
  modfile=$(go mod download -json "k8s.io/kubernetes@v$version" \
    | awk -F'"' '$2 == "GoMod" {print $4}')
  [ -n "$modfile" ] || { echo "e2e build: k8s.io/kubernetes@v$version is not served" >&2; exit 1; }
  staging_version="v0.${version#1.}"
  go mod edit -require="k8s.io/kubernetes@v$version"
  for m in $(awk '$2 == "=>" && $3 ~ /^\.\/staging\// {print $1}' "$modfile"); do
    go mod edit -replace="$m=$m@$staging_version"
  done
  etcd=$(awk '$1 == "go.etcd.io/etcd/server/v3" {print $2; exit}' "$modfile")
  [ -n "$etcd" ] && go mod edit -require="go.etcd.io/etcd/server/v3@$etcd"
  go mod tidy >&2
fi

mkdir -p bin
# Stamp the release into the binaries as Kubernetes' own build does (hack/lib/version.sh):
# without it they report v0.0.0-master and version-dependent behaviour goes astray.
minor=${version#1.}; minor=${minor%%.*}
stamp=""
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  stamp+=" -X $pkg.gitVersion=v$version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
  stamp+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
done
build() {  # name, package
  echo "e2e build: $1 (Kubernetes v$version)" >&2
  if ! nice go build -trimpath -ldflags="-s -w$stamp" -o "bin/$1" "$2" >&2 2>"$work/$1.log"; then
    tail -20 "$work/$1.log" >&2
    echo "e2e build: $1 failed to build (Kubernetes v$version); log above" >&2
    exit 1
  fi
}
build etcd ./cmd/etcd
for c in kube-apiserver kube-controller-manager kube-scheduler kubelet; do
  build "$c" "k8s.io/kubernetes/cmd/$c"
done
echo "v$version" > bin/VERSION
rm -rf "$dest.old"
[ -e "$dest" ] && mv "$dest" "$dest.old"
mkdir -p "$work/out" && mv bin "$work/out/bin" && mv "$work/out" "$dest"
rm -rf "$dest.old"
echo "$dest/bin"
