"""LocalCluster.device_env's reader: a claim's CDI spec back to KEY -> value by device."""

from __future__ import annotations

import json
from pathlib import Path

from simdra._driver.testing.cdi_env import claim_device_env


def _spec(root: Path, uid: str, *devices: dict[str, object]) -> None:
    (root / f"simdra.example.com-claim_{uid}.json").write_text(
        json.dumps({"cdiVersion": "0.8.0", "devices": list(devices)}))


def test_keys_by_device_name_without_the_unit_id(tmp_path: Path) -> None:
    _spec(tmp_path, "u1", {"name": "u1-gpu-0", "containerEdits": {"env": [
        "SIMDRA_DEVICE_0a1b2c3d_NAME=gpu-0", "SIMDRA_DEVICE_0a1b2c3d_CAPACITY_MEMORY=8Gi",
        "SIMDRA_DEVICE_0a1b2c3d_MODEL=a=b", "OTHER=1"]}})
    assert claim_device_env(tmp_path, "u1") == {
        "gpu-0": {"NAME": "gpu-0", "CAPACITY_MEMORY": "8Gi", "MODEL": "a=b"}}


def test_another_claims_spec_is_not_read_and_none_is_empty(tmp_path: Path) -> None:
    _spec(tmp_path, "u2", {"name": "x", "containerEdits": {"env": [
        "SIMDRA_DEVICE_00000000_NAME=nic-0"]}})
    assert claim_device_env(tmp_path, "u1") == {}
    assert list(claim_device_env(tmp_path, "u2")) == ["nic-0"]
