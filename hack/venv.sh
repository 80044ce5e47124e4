#!/usr/bin/env bash
# Creates (or refreshes) the project's virtual environment in .venv from pyproject.toml.
# Sourced by the other hack/ scripts; reinstalls only when pyproject.toml changed.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
venv="$root/.venv"
python=${PYTHON:-python3}
"$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
  || { echo "simdra needs Python 3.11 or newer (found: $("$python" --version))" >&2; exit 1; }
stamp="$venv/.simdra-installed"
want=$(sha256sum "$root/pyproject.toml" | cut -d' ' -f1)
if [ ! -x "$venv/bin/python" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  "$python" -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --upgrade pip
  "$venv/bin/python" -m pip install --quiet -e "$root[demo,test]"
  echo "$want" > "$stamp"
fi
export PATH="$venv/bin:$PATH"
