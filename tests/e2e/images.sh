#!/usr/bin/env bash
# Builds the e2e node's images with no registry and exports them as archives that
# the node imports into containerd's k8s.io namespace (tests/e2e/node.py):
#   base     a debootstrap'ed minimal Debian bookworm with python3 and python3-venv
#            (rootfs tarball cached, keyed by a hash of its inputs)
#   simdra   our Dockerfile built on that base (podman, runc)   -> localhost/simdra:e2e
#   crypto   the example driver built on simdra (docs/examples/crypto-driver/Dockerfile)
#                                                               -> localhost/crypto-driver:e2e
#   pause    the sandbox image (tests/e2e/containerd/cmd/pause) -> localhost/simdra-e2e/pause:1
#   busybox  busybox-static as the workload image               -> localhost/simdra-e2e/busybox:1
# Usage: images.sh PAUSE_BINARY   (build-node.sh builds it). Prints the archive
# directory last. Podman keeps its own storage under the cache so nothing mixes with
# the host's images; its layer cache makes a warm rebuild quick.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
pause_bin="${1:?usage: images.sh PAUSE_BINARY}"
cache="${XDG_CACHE_HOME:-$HOME/.cache}/simdra-e2e"
logs="$cache/logs"
out="$cache/images"
mkdir -p "$logs" "$out"

fail() { echo "images: $1 failed (log: $2)" >&2; exit 1; }

# podman flags that work on these machines: runc (crun fails on hybrid cgroups),
# cgroupfs (no systemd), rlimits that cannot be raised, and a private store.
podman_() {
    nice podman --root "$cache/podman/storage" --runroot "${TMPDIR:-/tmp}/simdra-e2e-podman-run" \
        --storage-driver overlay --runtime runc --cgroup-manager cgroupfs \
        --events-backend none "$@"
}

# The first Debian mirror in the apt sources (deb822 or one-line format).
debian_mirror() {
    local m
    m="$(grep -hs '^URIs:' /etc/apt/sources.list.d/*.sources | awk '{print $2}' \
        | grep -v security | head -n1 || true)"
    [ -n "$m" ] || m="$(grep -hs '^deb ' /etc/apt/sources.list | awk '{print $2}' \
        | grep -v security | head -n1 || true)"
    echo "${m:-http://deb.debian.org/debian}"
}

base_image() {
    local mirror suite=bookworm include=python3,python3-venv key tarball log
    mirror="$(debian_mirror)"
    key="$(printf 'v1 %s minbase %s %s' "$suite" "$include" "$mirror" | sha256sum | cut -c1-16)"
    tarball="$cache/base-rootfs-$key.tar"
    base_tag="localhost/simdra-e2e/debian-python:$suite-$key"
    if [ ! -s "$tarball" ]; then
        log="$logs/debootstrap.log"
        echo "images: debootstrap $suite ($include) from $mirror (log: $log)" >&2
        local root
        root="$(mktemp -d "$cache/.rootfs.XXXXXX")"
        trap 'rm -rf "$root"' EXIT
        nice debootstrap --variant=minbase --include="$include" "$suite" "$root" "$mirror" \
            >"$log" 2>&1 || fail "base image (debootstrap $suite)" "$log"
        # Debian ships python3 only; the Dockerfile calls `python`.
        ln -sf python3 "$root/usr/bin/python"
        rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
        tar -C "$root" -cf "$tarball.tmp" . || fail "base image (tar)" "$log"
        mv "$tarball.tmp" "$tarball"
        rm -rf "$root"
        trap - EXIT
    fi
    if ! podman_ image exists "$base_tag"; then
        log="$logs/podman-import-base.log"
        podman_ import "$tarball" "$base_tag" >"$log" 2>&1 || fail "base image (podman import)" "$log"
    fi
}

simdra_image() {
    local log="$logs/podman-build.log"
    echo "images: building localhost/simdra:e2e from Dockerfile (log: $log)" >&2
    # pip inside the build reaches the package index through the host network with
    # the host's CA bundle.
    podman_ build --network=host --ulimit nofile=1024:1024 --ulimit nproc=1024:1024 \
        -v /etc/ssl/certs:/etc/ssl/certs:ro --build-arg PYTHON_IMAGE="$base_tag" \
        -t localhost/simdra:e2e -f "$repo/Dockerfile" "$repo" >"$log" 2>&1 \
        || fail "simdra image (podman build)" "$log"
}

# The example driver built on simdra: its own Dockerfile, simdra's build context.
crypto_image() {
    local log="$logs/podman-build-crypto.log"
    echo "images: building localhost/crypto-driver:e2e (log: $log)" >&2
    podman_ build --network=host --ulimit nofile=1024:1024 --ulimit nproc=1024:1024 \
        -v /etc/ssl/certs:/etc/ssl/certs:ro --build-arg PYTHON_IMAGE="$base_tag" \
        -t localhost/crypto-driver:e2e -f "$repo/docs/examples/crypto-driver/Dockerfile" \
        "$repo" >"$log" 2>&1 || fail "crypto-driver image (podman build)" "$log"
}

# A one-binary image from a rootfs made here.
small_image() {
    local name="$1" change="$2"; shift 2
    local root log="$logs/podman-import-${name##*/}.log"
    root="$(mktemp -d)"
    "$@" "$root"
    tar -C "$root" -cf "$root.tar" . && podman_ import --change "$change" "$root.tar" "$name" \
        >"$log" 2>&1 || fail "$name image (podman import)" "$log"
    rm -rf "$root" "$root.tar"
}

pause_root() { install -m 0755 "$pause_bin" "$1/pause"; }
busybox_root() {
    mkdir -p "$1/bin" "$1/tmp"
    install -m 0755 /bin/busybox "$1/bin/busybox"
    local a
    for a in sh env ls cat sleep echo grep test true wc; do ln -s busybox "$1/bin/$a"; done
}

# Skipped when the archive already holds this very image (warm runs).
save() {
    local name="$1" file="$2" log="$logs/podman-save.log" id
    id="$(podman_ image inspect --format '{{.Id}}' "$name")"
    if [ -s "$file" ] && [ "$(cat "$file.id" 2>/dev/null)" = "$id" ]; then
        return 0
    fi
    rm -f "$file" "$file.id"
    podman_ save --format docker-archive -o "$file.tmp" "$name" >"$log" 2>&1 \
        || fail "$name (podman save)" "$log"
    mv "$file.tmp" "$file"
    echo "$id" >"$file.id"
}

start=$SECONDS
base_image
simdra_image
crypto_image
small_image localhost/simdra-e2e/pause:1 'ENTRYPOINT ["/pause"]' pause_root
small_image localhost/simdra-e2e/busybox:1 'CMD ["sh"]' busybox_root
save localhost/simdra:e2e "$out/simdra.tar"
save localhost/crypto-driver:e2e "$out/crypto-driver.tar"
save localhost/simdra-e2e/pause:1 "$out/pause.tar"
save localhost/simdra-e2e/busybox:1 "$out/busybox.tar"
podman_ image prune -f >/dev/null 2>&1 || true
size="$(podman_ image inspect --format '{{.Size}}' localhost/simdra:e2e)"
base_size="$(podman_ image inspect --format '{{.Size}}' "$base_tag")"
echo "images: localhost/simdra:e2e $((size / 1000000)) MB (base $((base_size / 1000000)) MB), archive $(($(stat -c %s "$out/simdra.tar") / 1000000)) MB; built in $((SECONDS - start)) s" >&2
echo "$out"
