#!/usr/bin/env bash
# Regenerates the image's dependency locks from pyproject.toml, pinned with every
# distribution's sha256 (the Dockerfile installs them with --require-hashes):
#   requirements/runtime.lock  [project].dependencies and everything they pull in
#   requirements/build.lock    [build-system].requires, to build simdra's own wheel
# Run it after changing either list (tests/deploy/test_dependency_lock.py fails while a
# lock is stale). Resolved for Python 3.11, the image's Python (PYTHON to change it).
# pip-compile (pip-tools, pinned below) runs from a venv of its own under the cache.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
python=${PYTHON:-python3.11}
tools="${XDG_CACHE_HOME:-$HOME/.cache}/simdra-lock-tools"
if [ ! -x "$tools/bin/pip-compile" ]; then
  "$python" -m venv "$tools"
  "$tools/bin/pip" install --quiet pip-tools==7.6.2
fi
cd "$root"
# --upgrade: the newest versions the ranges allow, not whatever the previous lock had.
# The package index only: local wheel directories (PIP_FIND_LINKS) are not what an image
# build sees, and their hashes would be.
unset PIP_FIND_LINKS
common=(--quiet --upgrade --generate-hashes --strip-extras --allow-unsafe
        --no-emit-index-url --no-emit-find-links)
"$tools/bin/pip-compile" "${common[@]}" --output-file requirements/runtime.lock pyproject.toml
"$tools/bin/pip-compile" "${common[@]}" --only-build-deps --build-deps-for wheel \
  --output-file requirements/build.lock pyproject.toml
echo "lock-deps: wrote requirements/runtime.lock and requirements/build.lock" >&2
