#!/usr/bin/env bash
# Regenerates the DeviceClasses the deployment ships (deploy/base/deviceclasses.yaml and
# the chart's deviceClasses.classes in deploy/helm/simdra/values.yaml) from the
# registered device kinds, with `simdra deviceclasses`. Run it after adding or changing a
# kind in simdra/_driver/kinds/. Extra arguments go to hack/gen_deviceclasses.py (e.g. --check).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=hack/venv.sh
source "$root/hack/venv.sh"
cd "$root"
exec python hack/gen_deviceclasses.py "$@"
