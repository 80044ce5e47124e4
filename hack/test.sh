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
mypy  # strict type check of simdra/ (generated code excluded): [tool.mypy] in pyproject.toml
# The deploy tests run real helm (lint, template) on the chart: build it first (cached
# after the first time, see hack/build-helm.sh). A helm that cannot be built stops the
# suite here with one line; the chart is never silently left unchecked.
SIMDRA_HELM=$("$root/hack/build-helm.sh")
export SIMDRA_HELM
# Bytecode caches (__pycache__, ignored by git) whatever the environment says: the suite
# starts hundreds of plugin processes, and with PYTHONDONTWRITEBYTECODE set (as CI images
# often do) each one compiles simdra from source again, and each worker rewrites every
# test module's asserts again.
unset PYTHONDONTWRITEBYTECODE
# Two workers per core (at most 8): most tests wait on a plugin child process or a socket,
# so one worker per core leaves the CPUs idle half the time.
workers=$(( $(nproc) * 2 > 8 ? 8 : $(nproc) * 2 ))
# worksteal: a worker that runs dry takes tests queued on another, so a queue that
# happened to get the long tests does not finish alone long after the rest.
exec python -m pytest -n "${SIMDRA_TEST_WORKERS:-$workers}" --dist worksteal "$@"
