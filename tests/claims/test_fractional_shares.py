"""Fractional capacity ranges (KEP-5075, DRAFractionalCapacityRange): a GPU of the
`gpu-fractional` profile hands out its one GPU of `compute` in milli-unit shares (min
100m, step 50m). The scheduler's rounding is ours, the node counts the shares exactly (no
float drift: ten shares of 100m fill one GPU, the eleventh does not fit) and the
container learns the fraction it got."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from simdra import parse_quantity
from simdra._driver.builtins import builtin_kinds
from simdra._driver.claims.prepare.transaction import Preparer
from simdra._driver.claims.source import StaticClaimSource
from simdra._driver.claims.types import ClaimRef
from simdra._driver.core.validation import validate_device
from simdra._driver.devices.profiles import profile_inventory
from simdra._driver.devices.request_policy import NoFit, consumed_amount, consumed_text
from tests.claims.builders import RULES

DRIVER = "dra.example.com"
NODE = "node-a"
INVENTORY = profile_inventory("gpu-fractional", DRIVER, NODE, 1, kinds=builtin_kinds())
COMPUTE = INVENTORY.device(NODE, "gpu-0").spec["capacity"]["compute"]  # type: ignore[union-attr]


def test_the_profile_publishes_a_valid_milli_unit_range():
    device = INVENTORY.device(NODE, "gpu-0")
    assert device is not None and validate_device(device.to_json(), "d") == []
    assert COMPUTE == {"value": "1", "requestPolicy": {
        "default": "100m", "validRange": {"min": "100m", "max": "1", "step": "50m"}}}


@pytest.mark.parametrize(("requested", "amount", "text"), [
    (None, "100m", "100m"),  # the default
    ("50m", "100m", "100m"),  # raised to min
    ("120m", "150m", "150m"),  # rounded up to min + n * step
    ("333m", "350m", "350m"),
    ("250m", "250m", "250m"),  # on the grid: as is
    ("1", "1", "1"),
])
def test_a_request_is_rounded_up_to_the_milli_grid(requested, amount, text):
    assert consumed_amount(COMPUTE, requested) == parse_quantity(amount)
    assert consumed_text(COMPUTE, requested) == text


def test_a_request_that_rounds_above_the_maximum_does_not_fit():
    assert isinstance(consumed_amount(COMPUTE, "1010m"), NoFit)


def _claim(uid: str, share: str, compute: str) -> dict[str, Any]:
    result = {"request": "gpu", "driver": DRIVER, "pool": NODE, "device": "gpu-0",
              "shareID": share, "consumedCapacity": {"compute": compute, "memory": "1Gi"}}
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"namespace": "default", "name": f"c-{uid[:8]}", "uid": uid},
            "spec": {"devices": {"requests": []}},
            "status": {"allocation": {"devices": {"results": [result], "config": []}}}}


def _uid(i: int) -> str:
    return f"{i:08x}-0000-4000-8000-000000000000"


def _share(i: int) -> str:
    return f"{i:08x}-1111-4111-8111-111111111111"


def test_shares_of_a_tenth_fill_one_gpu_exactly(tmp_path: Path):
    source = StaticClaimSource()
    preparer = Preparer(DRIVER, source, lambda: INVENTORY, tmp_path / "cdi", tmp_path / "data",
                        rules=RULES)
    # 0.1 + 0.2 + ... in floats drifts past 1.0; in exact amounts ten tenths are one GPU.
    amounts = ["100m", "200m", "300m", "150m", "250m"]
    refs = []
    for i, amount in enumerate(amounts):
        source.put(_claim(_uid(i), _share(i), amount))
        refs.append(ClaimRef("default", f"c-{_uid(i)[:8]}", _uid(i)))

    answers = preparer.prepare(refs)

    assert all(a.error == "" for a in answers.values()), answers
    source.put(_claim(_uid(9), _share(9), "50m"))
    [over] = preparer.prepare([ClaimRef("default", f"c-{_uid(9)[:8]}", _uid(9))]).values()
    assert "compute" in over.error and "\n" not in over.error
    env = [e for spec in (tmp_path / "cdi").glob("*.json")
           for d in json.loads(spec.read_text())["devices"]
           for e in d["containerEdits"].get("env", [])]
    assert any(e.endswith("_CAPACITY_COMPUTE=150m") for e in env), env
