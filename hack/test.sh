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
lint-imports --no-cache  # layer contracts: [tool.importlinter] in pyproject.toml
# The deploy tests run real helm (lint, template) on the chart: build it first (cached
# after the first time, see hack/build-helm.sh). A helm that cannot be built stops the
# suite here with one line; the chart is never silently left unchecked.
SIMDRA_HELM=$("$root/hack/build-helm.sh")
export SIMDRA_HELM
# Two workers per core (at most 8): most tests wait on a plugin child process or a socket,
# so one worker per core leaves the CPUs idle half the time.
workers=$(( $(nproc) * 2 > 8 ? 8 : $(nproc) * 2 ))
exec python -m pytest -n "${SIMDRA_TEST_WORKERS:-$workers}" "$@"
