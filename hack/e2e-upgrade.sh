#!/usr/bin/env bash
# The in-place upgrade scenario (tests/e2e/node_scenarios/test_upgrade.py): a cluster of
# one release with the plugin serving prepared claims, its control plane replaced by
# another release's. Both releases are built (and cached) first: not part of the default
# CI run; hack/e2e-matrix.sh runs it after the releases.
#
#   ./hack/e2e-upgrade.sh                         # 1.37.2 -> 1.38.0-beta.0
#   UPGRADE_FROM=1.36.3 UPGRADE_TO=1.37.2 ./hack/e2e-upgrade.sh
#   RUNS=3 ./hack/e2e-upgrade.sh                  # three times in a row
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
from=${UPGRADE_FROM:-1.37.2}
to=${UPGRADE_TO:-1.38.0-beta.0}
for run in $(seq "${RUNS:-1}"); do
  echo "e2e-upgrade: run $run: Kubernetes $from -> $to" >&2
  K8S_VERSION=$from SIMDRA_E2E_UPGRADE_TO=$to bash hack/e2e.sh "$@"
done
