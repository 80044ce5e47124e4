#!/usr/bin/env bash
# Unpacks Debian's prometheus package into the e2e cache once, for the dashboard scenario
# (tests/e2e/node_scenarios/test_dashboard.py):
#   ${XDG_CACHE_HOME:-$HOME/.cache}/simdra-e2e/prometheus-<Debian version>/usr/bin/prometheus
# with `apt-get download` and `dpkg -x` rather than `apt-get install`: the package's
# install scripts would add a system user and start its own service on the host's port
# 9090; the e2e runs the binary itself, on loopback, for the run only. Debian builds it
# without Kubernetes service discovery, so the scenario names its targets in files.
# The cache directory is unpacked in a temporary directory and renamed into place, so a
# half-unpacked one is never used. Prints the binary's path last; on failure one line
# naming the step and the log file.
set -euo pipefail

cache="${XDG_CACHE_HOME:-$HOME/.cache}/simdra-e2e"
logs="$cache/logs"
log="$logs/prometheus-apt.log"
mkdir -p "$cache" "$logs"

fail() { echo "install-prometheus: $1 failed (log: $2)" >&2; exit 1; }

candidate() { apt-cache policy prometheus 2>/dev/null | awk '$1 == "Candidate:" {print $2}'; }

version="$(candidate)"
if [ -z "$version" ] || [ "$version" = "(none)" ]; then
    apt-get update -q >"$log" 2>&1 || fail "apt-get update" "$log"
    version="$(candidate)"
    [ -n "$version" ] && [ "$version" != "(none)" ] \
        || fail "finding the Debian package prometheus in the apt sources" "$log"
fi
dest="$cache/prometheus-${version//[^A-Za-z0-9.+-]/_}"
if [ ! -x "$dest/usr/bin/prometheus" ]; then
    echo "install-prometheus: unpacking Debian's prometheus $version (log: $log)" >&2
    tmp="$(mktemp -d "$cache/.prometheus.XXXXXX")"
    trap 'rm -rf "$tmp"' EXIT
    (cd "$tmp" && apt-get download -q "prometheus=$version") >>"$log" 2>&1 \
        || fail "apt-get download prometheus=$version" "$log"
    dpkg -x "$tmp"/prometheus_*.deb "$tmp/unpacked" >>"$log" 2>&1 || fail "dpkg -x" "$log"
    "$tmp/unpacked/usr/bin/prometheus" --version >>"$log" 2>&1 \
        || fail "prometheus --version" "$log"
    chmod 755 "$tmp/unpacked"
    rm -rf "$dest"
    mv "$tmp/unpacked" "$dest"
fi
echo "$dest/usr/bin/prometheus"
