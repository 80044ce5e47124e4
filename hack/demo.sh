#!/usr/bin/env bash
# Runs `simdra demo`: API stand-in + plugin (fake devices) + kubelet emulator, end to end.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=hack/venv.sh
source "$root/hack/venv.sh"
cd "$root"
exec simdra demo "$@"
