"""AccelKind under simdra's harness (simdra.testing.LocalCluster): the partitions of one
accelerator are handed out only while its counters last, and a share of a shared
accelerator takes a capacity whole unless it asks for an amount of it.

Run it where simdra (with its `demo` extra) and accel_kind import:
    PYTHONPATH=docs/examples/accel-kind python -m pytest docs/examples/accel-kind/tests
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from simdra import ProfileContext, validate_device
from simdra.testing import AllocationError, LocalCluster, exactly

import accel_kind

DRIVER = "accel.example.com"
CLASS = f"accel.{DRIVER}"


# [start:harness]
Start = Callable[[str], LocalCluster]  # starts the plugin with a profile of AccelKind


@pytest.fixture
def start(monkeypatch: pytest.MonkeyPatch) -> Iterator[Start]:
    """Starts one node whose plugin runs AccelKind's `profile` with one accelerator."""
    # The plugin is a child process: accel_kind must import there too.
    here = str(Path(accel_kind.__file__).resolve().parent)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        p for p in (here, os.environ.get("PYTHONPATH")) if p))
    workdir = tempfile.mkdtemp(dir="/tmp", prefix="accel-")  # short: socket paths
    try:
        with LocalCluster(workdir, driver_name=DRIVER) as local:
            def start_profile(profile: str) -> LocalCluster:
                # Also creates the kind's DeviceClass, CLASS, as the chart would.
                local.start_plugin(profile=profile, num_devices=1,
                                   extra=["--kind", "accel_kind:AccelKind"])
                return local

            yield start_profile
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def shape(name: str, **fields: Any) -> dict[str, Any]:
    """An `exactly` request for one device of a shape."""
    expression = f'device.attributes["{DRIVER}"].shape == "{name}"'
    return exactly("accel", CLASS, selectors=[{"cel": {"expression": expression}}], **fields)
# [end:harness]


def cdi_env(cluster: LocalCluster, uid: str) -> dict[str, str]:
    """The SIMDRA_DEVICE_<ID>_<KEY> env of the claim's one CDI device, by KEY."""
    [env] = cluster.device_env(uid).values()
    return env


def test_one_accelerator_is_a_whole_two_halves_and_four_quarters() -> None:
    made = accel_kind.accelerator(ProfileContext(DRIVER, "node-1"), 0)

    assert [d.name for d in made.devices] == ["accel-0", "accel-0-half-0", "accel-0-half-1", *(
        f"accel-0-quarter-{k}" for k in range(4))]
    assert all(validate_device(d.spec, d.name) == [] for d in made.devices)
    assert [s["name"] for s in made.shared_counters] == ["accel-0-counters"]
    assert made.partition_type_attribute == f"{DRIVER}/shape"


# [start:partitions]
def test_partitions_are_handed_out_while_the_counters_last(start: Start) -> None:
    cluster = start("accel")
    cluster.create_claim("half", shape("half"))
    cluster.allocate("half")  # 2 of the 4 cores
    ref = cluster.claim_ref("half")

    assert cluster.prepare("half")[ref.uid]["error"] == ""
    env = cdi_env(cluster, ref.uid)
    assert (env["SHAPE"], env["PARTITION"], env["CAPACITY_CORES"]) == ("half", "true", "2")

    cluster.create_claim("whole", shape("whole"))  # needs all 4 cores
    with pytest.raises(AllocationError, match="accel-0-counters/cores: needs 4, 2 of 4 used"):
        cluster.allocate("whole")

    for name in ("q1", "q2", "q3"):
        cluster.create_claim(name, shape("quarter"))
    cluster.allocate("q1")
    cluster.allocate("q2")  # the other 2 cores: two quarters are still free, but
    with pytest.raises(AllocationError, match="needs 1, 4 of 4 used"):
        cluster.allocate("q3")  # no core is left for them
# [end:partitions]


# [start:capacities]
def test_a_share_takes_a_capacity_without_a_policy_whole(start: Start) -> None:
    cluster = start("accel-shared")
    # Both ask for memory: 8Gi each, and a stream each (the policy's default).
    for name in ("a", "b"):
        cluster.create_claim(name, shape("whole", capacity={"requests": {"memory": "8Gi"}}))
        cluster.allocate(name)
    # It asks for streams only: it would take all 32Gi of memory, 16Gi are in use.
    cluster.create_claim("c", shape("whole", capacity={"requests": {"streams": "2"}}))
    with pytest.raises(AllocationError, match="has 32Gi of memory left"):
        cluster.allocate("c")

    refs = [cluster.claim_ref(name) for name in ("a", "b")]
    answer = cluster.prepare("a", "b")
    assert [answer[ref.uid]["error"] for ref in refs] == ["", ""]
    env = cdi_env(cluster, refs[0].uid)
    assert (env["CAPACITY_MEMORY"], env["CAPACITY_STREAMS"]) == ("8Gi", "1")
# [end:capacities]
