#!/usr/bin/env bash
# Regenerates simdra's Grafana dashboard (deploy/grafana/simdra-dra.json) from the panels
# in hack/dashboard_panels.py. Run it after changing a panel. Extra arguments go to
# hack/gen_dashboard.py (e.g. --check). The standard library is all it needs: no venv.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
exec "${PYTHON:-python3}" "$root/hack/gen_dashboard.py" "$@"
