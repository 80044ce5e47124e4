#!/usr/bin/env bash
# The real-cluster e2e: builds (once, cached) etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler and kubelet from their source modules, and kwok's controller from its own,
# starts them on loopback and runs the scenarios in tests/e2e (pytest marker `e2e`), then
# prints a scenario table.
#
#   ./hack/e2e.sh                     # all scenarios
#   ./hack/e2e.sh -k cel              # pytest arguments pass through
#   K8S_VERSION=1.35.4 ./hack/e2e.sh  # another release (1.34.x-1.38.x)
#   SIMDRA_E2E_ALLOCATOR=1 ./hack/e2e.sh  # only the allocator differential's recheck
#   SIMDRA_E2E_UPGRADE_TO=1.38.0-beta.0 ./hack/e2e.sh  # only the upgrade scenario
#                                     # (hack/e2e-upgrade.sh; needs both releases built)
#
# 1.38 builds with the Go 1.27 toolchain (GOTOOLCHAIN=go1.27.3, fetched from the module
# proxy) and its node runs the 1.37.2 kubelet: the 1.38 kubelet cannot be built here
# (tests/e2e/build.sh says why).
#
# Logs of every component: $SIMDRA_E2E_LOGS (default: a fresh directory, printed).
# SIMDRA_E2E_SCHEDULER_V=7 makes the scheduler log why it passed over each device.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=hack/venv.sh
source "$root/hack/venv.sh"
cd "$root"
if [ -n "${SIMDRA_E2E_LOGS:-}" ] && [ -n "$(ls -A "$SIMDRA_E2E_LOGS" 2>/dev/null)" ]; then
  # It would hold the last run's etcd data and certificates: that cluster's objects.
  echo "e2e: SIMDRA_E2E_LOGS=$SIMDRA_E2E_LOGS is not empty (a previous run's cluster); name a new directory" >&2
  exit 2
fi
export SIMDRA_E2E_LOGS=${SIMDRA_E2E_LOGS:-$(mktemp -d "${TMPDIR:-/tmp}/simdra-e2e.XXXXXX")}
pids="$SIMDRA_E2E_LOGS/pids"
cleanup() {
  # Whatever pytest could not stop (it was killed): every process the run started.
  if [ -f "$pids" ]; then
    while read -r pid; do kill -9 "$pid" 2>/dev/null || true; done < "$pids"
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

start=$(date +%s)
if ! bin=$(bash tests/e2e/build.sh); then
  echo "e2e: FAILED in the build of the real components (see the line above)" >&2
  exit 1
fi
# kwok's controller (the fleet scenario's fake nodes), from its own Go module, cached too.
if ! kwok=$(bash tests/e2e/build-kwok.sh); then
  echo "e2e: FAILED in the build of kwok (see the line above)" >&2
  exit 1
fi
# Two runs apart from the default one: the upgrade scenario alone, from the run's release
# to another (both built), and the allocator differential's live recheck (64 cases one
# after another, a few minutes; tests/e2e/test_allocator_differential.py).
select="e2e and not upgrade and not allocator_live"
if [ "${SIMDRA_E2E_ALLOCATOR:-}" = 1 ]; then
  select="e2e and allocator_live"
fi
if [ -n "${SIMDRA_E2E_UPGRADE_TO:-}" ]; then
  if ! upgrade_bin=$(K8S_VERSION=$SIMDRA_E2E_UPGRADE_TO bash tests/e2e/build.sh); then
    echo "e2e: FAILED in the build of Kubernetes $SIMDRA_E2E_UPGRADE_TO (the upgrade's target)" >&2
    exit 1
  fi
  export SIMDRA_E2E_UPGRADE_BIN=$upgrade_bin
  select="e2e and upgrade"
fi
echo "e2e: components ready in $(( $(date +%s) - start )) s: $bin, $kwok" >&2
if [ -f "$bin/KUBELET_VERSION" ]; then
  echo "e2e: control plane $(cat "$bin/VERSION"), kubelet $(cat "$bin/KUBELET_VERSION") (the newest that builds here; a supported skew)" >&2
fi
export SIMDRA_E2E_BIN=$bin SIMDRA_E2E_KWOK=$kwok
echo "e2e: logs in $SIMDRA_E2E_LOGS" >&2
set +e
python -m pytest -m "$select" tests -p no:cacheprovider -q "$@"
rc=$?
set -e
if [ "$rc" -ne 0 ]; then
  echo "e2e: FAILED (pytest exit $rc); the E2E FAILED lines above name each scenario; logs: $SIMDRA_E2E_LOGS" >&2
fi
exit "$rc"
