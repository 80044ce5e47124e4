#!/usr/bin/env bash
# Regenerates simdra/_driver/kubelet/gen/ (pb2, pb2_grpc, .pyi) from protos/*.proto.
# Extra arguments go to hack/gen_protos.py (e.g. --out DIR).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=hack/venv.sh
source "$root/hack/venv.sh"
cd "$root"
exec python hack/gen_protos.py "$@"
