"""A fleet node publishes exactly what `simdra run` on that node publishes.

The plugin runs as a real process (`simdra run`, fake devices) against one API
stand-in, the fleet against another, for the same node name, shape and driver; the
slices as each server stores them are compared as JSON text: names, specs, owners.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest

from simdra._driver.fleet.mix import SHAPES
from simdra._driver.testing.apiserver import APIServer
from simdra._driver.testing.cluster import LocalCluster

from .conftest import DRIVER, StartFleet, fleet_slices

NODE = "simdra-fleet-0000"


# Each release the stand-in answers as: the slice layout follows the server's /version.
@pytest.mark.parametrize("release", ["1.34", "1.37", "1.38"])
@pytest.mark.parametrize("shape", ["gpu8", "nic2", "partitioned", "gpu8-nic2"])
def test_a_fleet_node_publishes_byte_for_byte_what_the_plugin_publishes(
        shape: str, release: str, start_fleet: StartFleet) -> None:
    workdir = Path(tempfile.mkdtemp(dir="/tmp", prefix="sdf-"))
    try:
        with APIServer(kubernetes_version=release) as server, LocalCluster(
                workdir, node_name=NODE, driver_name=DRIVER, apiserver=server) as cluster:
            cluster.start_plugin(profile=SHAPES[shape].profile,
                                 num_devices=SHAPES[shape].num_devices)
            plugin = [_comparable(s) for s in cluster.slices()]
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    with APIServer(kubernetes_version=release) as other:
        start_fleet(other, nodes=1, mix=f"{shape}:100")
        fleet = [_comparable(s) for s in fleet_slices(other, NODE)]
    assert len(plugin) >= 1
    assert fleet == plugin


def _comparable(piece: dict[str, Any]) -> str:
    """The slice as JSON text, less what each server sets on its own (uid, times,
    resourceVersion) and the Node's UID, which differs between the two servers."""
    metadata = piece["metadata"]
    owners = [{k: v for k, v in o.items() if k != "uid"}
              for o in metadata.get("ownerReferences", [])]
    kept = {"name": metadata["name"], "labels": metadata.get("labels"),
            "ownerReferences": owners}
    return json.dumps({"metadata": kept, "spec": piece["spec"]})
