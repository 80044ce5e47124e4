#!/usr/bin/env bash
# Builds the e2e node's runtime once and caches it outside the repository:
#   ${XDG_CACHE_HOME:-$HOME/.cache}/simdra-e2e/containerd-<version>/bin/
#     containerd, containerd-shim-runc-v2, ctr (from tests/e2e/containerd/go.mod) and
#     pause (the sandbox image's process, tests/e2e/containerd/cmd/pause)
# and installs runc, the CNI plugins, iptables and the image tools from Debian's
# packages when they are missing. The cache directory is built in a temporary
# directory and renamed into place, so a half-built cache is never used.
# Progress goes to stderr; stdout is the bin directory. On failure it prints one line
# naming the component and the log file.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
mod="$here/containerd"
cache="${XDG_CACHE_HOME:-$HOME/.cache}/simdra-e2e"
version="$(awk '$1 == "github.com/containerd/containerd/v2" {print $2}' "$mod/go.mod")"
dest="$cache/containerd-$version"
logs="$cache/logs"
mkdir -p "$cache" "$logs"

fail() { echo "build-node: $1 failed (log: $2)" >&2; exit 1; }

# Debian packages: runc (containerd's runtime), CNI plugins (bridge, host-local,
# loopback), iptables (the bridge plugin's masquerade rules), and the image tools.
apt_packages() {
    local missing=() pkg
    for pkg in runc containernetworking-plugins iptables podman debootstrap busybox-static; do
        dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    local log="$logs/apt.log"
    echo "build-node: installing ${missing[*]} (Debian packages)" >&2
    { apt-get update -q && DEBIAN_FRONTEND=noninteractive \
        apt-get install -y -q --no-install-recommends "${missing[@]}"; } >"$log" 2>&1 \
        || fail "apt-get install ${missing[*]}" "$log"
}

build_containerd() {
    # Rebuilt when the module or the pause source changes (same containerd version).
    local inputs
    inputs="$(cat "$mod/go.mod" "$mod/go.sum" "$mod/cmd/pause/main.go" | sha256sum | cut -c1-16)"
    if [ -x "$dest/bin/containerd" ] && [ "$(cat "$dest/inputs" 2>/dev/null)" = "$inputs" ]; then
        return 0
    fi
    local log="$logs/containerd-$version.log" tmp
    tmp="$(mktemp -d "$cache/.containerd-$version.XXXXXX")"
    chmod 755 "$tmp"
    trap 'rm -rf "$tmp"' EXIT
    echo "build-node: building containerd $version, ctr, shim and pause (log: $log)" >&2
    local start=$SECONDS
    # Static binaries (no cgo): seccomp and AppArmor are runc's job, not containerd's.
    (cd "$mod" && CGO_ENABLED=0 nice go build -trimpath -ldflags=-s -o "$tmp/bin/" \
        github.com/containerd/containerd/v2/cmd/containerd \
        github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2 \
        github.com/containerd/containerd/v2/cmd/ctr \
        ./cmd/pause) >"$log" 2>&1 || fail "containerd $version (go build)" "$log"
    echo "$inputs" >"$tmp/inputs"
    rm -rf "$dest"
    mv "$tmp" "$dest"
    trap - EXIT
    echo "build-node: containerd $version built in $((SECONDS - start)) s" >&2
}

apt_packages
build_containerd
echo "$dest/bin"
