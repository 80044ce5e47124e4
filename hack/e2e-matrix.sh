#!/usr/bin/env bash
# The e2e on every supported Kubernetes release, one after another, then one table of
# scenario x release. Each release's components are built once and cached like the
# default's (about 15 minutes each on 2 cores the first time).
#
#   ./hack/e2e-matrix.sh                      # 1.34.4 1.35.4 1.36.3 1.37.2 1.38.0-beta.0,
#                                             # then the upgrade 1.37.2 -> 1.38.0-beta.0
#   E2E_VERSIONS="1.35.4 1.37.2" ./hack/e2e-matrix.sh -k node   # pytest arguments pass through
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
versions=${E2E_VERSIONS:-"1.34.4 1.35.4 1.36.3 1.37.2 1.38.0-beta.0"}
# The in-place upgrade scenario (hack/e2e-upgrade.sh) after the releases; "" skips it.
upgrade=${E2E_UPGRADE-"1.37.2 1.38.0-beta.0"}
base=$(mktemp -d "${TMPDIR:-/tmp}/simdra-e2e-matrix.XXXXXX")
failed=()
for v in $versions; do
  start=$(date +%s)
  echo "e2e-matrix: Kubernetes $v (logs: $base/$v)" >&2
  if ! SIMDRA_E2E_LOGS="$base/$v" K8S_VERSION=$v bash hack/e2e.sh "$@"; then
    failed+=("$v")
  fi
  echo "e2e-matrix: Kubernetes $v done in $(( $(date +%s) - start )) s" >&2
done
# The allocator differential's live recheck on each release that has a recording.
for v in $versions; do
  minor=$(echo "$v" | cut -d. -f1,2)
  [ -f "tests/testing/allocator_verdicts/$minor.json" ] || continue
  echo "e2e-matrix: allocator differential on $v (logs: $base/allocator-$v)" >&2
  if ! SIMDRA_E2E_LOGS="$base/allocator-$v" K8S_VERSION=$v SIMDRA_E2E_ALLOCATOR=1 \
      bash hack/e2e.sh "$@"; then
    failed+=("allocator $v")
  fi
done
if [ -n "$upgrade" ]; then
  read -r from to <<< "$upgrade"
  echo "e2e-matrix: upgrade $from -> $to (logs: $base/upgrade)" >&2
  if ! SIMDRA_E2E_LOGS="$base/upgrade" K8S_VERSION=$from SIMDRA_E2E_UPGRADE_TO=$to \
      bash hack/e2e.sh "$@"; then
    failed+=("upgrade $from -> $to")
  fi
fi
.venv/bin/python -m tests.e2e.matrix "$base"/[0-9]*/results.tsv
if [ ${#failed[@]} -gt 0 ]; then
  echo "e2e-matrix: FAILED on ${failed[*]}; logs under $base" >&2
  exit 1
fi
