#!/usr/bin/env bash
# Runs the whole test suite (lint first) in the project's virtual environment.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=hack/venv.sh
source "$root/hack/venv.sh"
cd "$root"
ruff check .
lint-imports --no-cache  # layer contracts: [tool.importlinter] in pyproject.toml
exec python -m pytest "$@"
