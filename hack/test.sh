#!/usr/bin/env bash
# Runs the test suite (lint first) in the project's virtual environment, on parallel
# workers (pytest-xdist), without the e2e tests (see pyproject.toml; `-m e2e` runs them).
# Arguments go to pytest: `./hack/test.sh tests/test_usage.py -n 0` runs one file serially.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=hack/venv.sh
source "$root/hack/venv.sh"
cd "$root"
ruff check .
# Two workers per core (at most 8): most tests wait on a plugin child process or a socket,
# so one worker per core leaves the CPUs idle half the time.
workers=$(( $(nproc) * 2 > 8 ? 8 : $(nproc) * 2 ))
exec python -m pytest -n "${SIMDRA_TEST_WORKERS:-$workers}" "$@"
