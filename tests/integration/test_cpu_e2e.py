"""CPU shares prepared through the whole plugin (stand-in API server, kubelet emulator):
a claim for CPUs of one NUMA node gets a CDI device whose env tells the container that
node, its CPUs and how many it was granted; claims fill a node's CPUs and no more."""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from simdra._driver.claims.plan.cdi import ENV_PREFIX, ID_LENGTH
from simdra._driver.testing.allocation.builders import exactly, selector
from simdra._driver.testing.cluster import LocalCluster
from simdra._driver.testing.scheduler import AllocationError

CPU_CLASS = "cpu.dra.example.com"
ON_NODE = 'device.attributes["resource.kubernetes.io"].numaNode == {}'


@pytest.fixture(scope="module")
def cpu_node() -> Iterator[LocalCluster]:
    """Two simulated NUMA nodes of 32 CPUs each."""
    workdir = Path(tempfile.mkdtemp(dir="/tmp", prefix="sdc-"))
    with LocalCluster(workdir) as local:
        local.start_plugin(profile="cpu", num_devices=2)
        yield local
    shutil.rmtree(workdir, ignore_errors=True)


def _env(cluster: LocalCluster, uid: str) -> dict[str, str]:
    [spec_file] = cluster.cdi_root.glob(f"*_{uid}.json")
    [device] = json.loads(spec_file.read_text())["devices"]
    pairs = (entry.split("=", 1) for entry in device["containerEdits"]["env"])
    return {name[len(ENV_PREFIX) + ID_LENGTH + 1:]: value for name, value in pairs}


def _claim(cluster: LocalCluster, name: str, cpus: str, numa_node: int) -> None:
    cluster.create_claim(name, exactly("cpu", CPU_CLASS,
                                       selectors=[selector(ON_NODE.format(numa_node))],
                                       capacity={"requests": {"cpus": cpus}}))


def test_a_cpu_share_tells_the_container_its_numa_node_and_cpu_count(
        cpu_node: LocalCluster) -> None:
    _claim(cpu_node, "four-cpus", "4", numa_node=1)
    cpu_node.allocate("four-cpus")
    ref = cpu_node.claim_ref("four-cpus")

    answer = cpu_node.kubelet.prepare([ref], driver_name=cpu_node.driver_name)  # type: ignore[union-attr]

    assert answer[ref.uid]["error"] == ""
    env = _env(cpu_node, ref.uid)
    assert (env["NAME"], env["TYPE"], env["NUMA_NODE"]) == ("cpu-1", "cpu", "1")
    assert (env["CAPACITY_CPUS"], env["CPU_LIST"]) == ("4", "32-63")


def test_claims_take_a_numa_nodes_cpus_and_no_more(cpu_node: LocalCluster) -> None:
    _claim(cpu_node, "all-of-node-0", "32", numa_node=0)
    cpu_node.allocate("all-of-node-0")
    _claim(cpu_node, "one-more", "1", numa_node=0)

    with pytest.raises(AllocationError):
        cpu_node.allocate("one-more")
