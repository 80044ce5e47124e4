"""pyproject.toml's lower bounds admit no client version that lacks what simdra imports.

The facts below were read from the published wheels (`pip download kubernetes==<v>
--no-deps`, listing `kubernetes/client/api/`): 33.1.0 has no `resource_v1_api.py`,
34.1.0 (the next release) is the first that has it.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import kubernetes.client

ROOT = Path(__file__).resolve().parents[1]
# (package, first version exposing it, the API simdra uses)
FIRST_WITH = {"kubernetes": ((34, 1, 0), "ResourceV1Api")}


def _floor(package: str) -> tuple[int, ...]:
    dependencies = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    (spec,) = [d for d in dependencies if re.match(rf"{package}\s*[<>=!~,]", d)]
    found = re.search(r">=\s*([0-9][0-9.]*)", spec)
    assert found, f"{spec!r} has no lower bound"
    parts = tuple(int(p) for p in found.group(1).split("."))
    return parts + (0,) * (3 - len(parts))


def test_driver_uses_the_api_named_in_the_fact():
    """The fact is about what the code really imports (else it guards nothing)."""
    uses = [p for p in (ROOT / "simdra").rglob("*.py") if "ResourceV1Api" in p.read_text()]
    assert uses
    assert hasattr(kubernetes.client, FIRST_WITH["kubernetes"][1])


def test_kubernetes_floor_has_resource_v1_api():
    first, api = FIRST_WITH["kubernetes"]
    assert _floor("kubernetes") >= first, (
        f"pyproject.toml admits kubernetes {_floor('kubernetes')}, but {api} first exists in "
        f"{'.'.join(map(str, first))}"
    )
