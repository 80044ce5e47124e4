"""The plugin process over its lifetime: registration, publishing, crash and restart,
clean shutdown, bad start-up input."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import kubernetes_validate
import yaml

from simdra._driver.testing.allocation.builders import exactly
from simdra._driver.testing.cluster import LocalCluster, wait_until


def test_registers_with_v1_first_and_serves_dra_socket(cluster: LocalCluster) -> None:
    cluster.start_plugin()
    assert cluster.kubelet is not None

    instance = cluster.kubelet.plugin(cluster.driver_name)

    assert instance.supported_versions[:2] == ("v1.DRAPlugin", "v1beta1.DRAPlugin")
    assert instance.dra_version == "v1"
    assert instance.endpoint == str(cluster.data_dir / "dra.sock")
    assert instance.registration_socket == str(
        cluster.registrar_dir / f"{cluster.driver_name}-reg.sock")


def test_publishes_eight_valid_gpus_owned_by_the_node(cluster: LocalCluster) -> None:
    cluster.start_plugin()
    node_uid = cluster.core.read_node(cluster.node_name).metadata.uid

    [item] = cluster.complete_pools()[cluster.node_name]

    spec = item["spec"]
    assert spec["nodeName"] == cluster.node_name
    assert spec["pool"]["resourceSliceCount"] == 1
    assert [d["name"] for d in spec["devices"]] == [f"gpu-{i}" for i in range(8)]
    [owner] = item["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["uid"], owner["controller"]) == (
        "Node", cluster.node_name, node_uid, True)
    kubernetes_validate.validate(item, "1.35", strict=True)
    uuids = {d["attributes"]["uuid"]["string"] for d in spec["devices"]}
    assert len(uuids) == 8


def test_three_hundred_device_inventory_becomes_a_complete_multi_slice_pool(
        cluster: LocalCluster) -> None:
    inventory = cluster.workdir / "inventory.yaml"
    devices = [{"name": f"dev-{i}", "attributes": {"index": {"int": i}}} for i in range(300)]
    inventory.write_text(yaml.safe_dump({"pools": [{"name": "big", "devices": devices}]}))

    cluster.start_plugin(profile=str(inventory))

    items = cluster.complete_pools()["big"]
    assert sorted(len(s["spec"]["devices"]) for s in items) == [44, 128, 128]
    assert {s["spec"]["pool"]["resourceSliceCount"] for s in items} == {3}
    assert len({s["spec"]["pool"]["generation"] for s in items}) == 1
    names = [d["name"] for s in items for d in s["spec"]["devices"]]
    assert sorted(names) == sorted(d["name"] for d in devices)
    for item in items:
        kubernetes_validate.validate(item, "1.35", strict=True)


def test_slices_deleted_behind_its_back_come_back(cluster: LocalCluster) -> None:
    cluster.start_plugin()
    before = {d for d in cluster.published_devices()}

    # What a restarting kubelet does: delete every slice of the node at once.
    cluster.resource.delete_collection_resource_slice(
        field_selector=f"spec.nodeName={cluster.node_name}")

    wait_until(lambda: set(cluster.published_devices()) == before, what="republished slices")


def test_quiet_node_makes_no_api_writes(cluster: LocalCluster) -> None:
    cluster.start_plugin()
    writes = cluster.api.writes()

    time.sleep(1.5)

    assert cluster.api.writes() == writes


def test_restart_after_sigkill_keeps_prepared_claims(cluster: LocalCluster) -> None:
    plugin = cluster.start_plugin(profile="gpu,nic", num_devices=2)
    cluster.create_claim("kept", exactly("gpu", "gpu.dra.example.com"),
                         exactly("net", "nic.dra.example.com",
                                 capacity={"requests": {"bandwidth": "1G"}}))
    cluster.allocate("kept")
    ref = cluster.claim_ref("kept")
    first = cluster.prepare("kept")
    assert first[ref.uid]["error"] == ""

    assert plugin.stop(signal.SIGKILL) == -signal.SIGKILL
    cluster.start_plugin(profile="gpu,nic", num_devices=2)

    assert cluster.prepare("kept") == first
    assert cluster.unprepare(ref) == {ref.uid: {"error": ""}}
    assert list(cluster.cdi_root.glob(f"*{ref.uid}*")) == []


def test_restart_adopts_published_slices_without_writes(cluster: LocalCluster) -> None:
    plugin = cluster.start_plugin()
    names = sorted(s["metadata"]["name"] for s in cluster.slices())
    plugin.stop()
    writes = cluster.api.writes()

    cluster.start_plugin()
    time.sleep(0.5)

    assert sorted(s["metadata"]["name"] for s in cluster.slices()) == names
    assert cluster.api.writes() == writes


def test_sigterm_removes_own_sockets_and_exits_zero(cluster: LocalCluster) -> None:
    plugin = cluster.start_plugin()
    sockets = [cluster.data_dir / "dra.sock",
               cluster.registrar_dir / f"{cluster.driver_name}-reg.sock"]
    assert all(p.is_socket() for p in sockets)

    assert plugin.stop(signal.SIGTERM) == 0

    assert not any(p.exists() for p in sockets)
    assert "shutting down" in plugin.log()


def test_stale_socket_files_are_replaced(cluster: LocalCluster) -> None:
    stale = [cluster.data_dir / "dra.sock",
             cluster.registrar_dir / f"{cluster.driver_name}-reg.sock"]
    for path in stale:
        path.parent.mkdir(parents=True, exist_ok=True)
        leftover = socket.socket(socket.AF_UNIX)
        leftover.bind(str(path))  # bound, never listening: what a crashed plugin leaves
        leftover.close()

    cluster.start_plugin()

    assert cluster.kubelet is not None
    assert cluster.kubelet.plugin(cluster.driver_name).endpoint == str(stale[0])


def test_invalid_inventory_file_fails_start_naming_device_and_rule(
        cluster: LocalCluster) -> None:
    inventory = cluster.workdir / "bad.yaml"
    inventory.write_text(yaml.safe_dump({"pools": [{"name": "p", "devices": [
        {"name": "ok-0"},
        {"name": "Bad_Name"},
        {"name": "nic-x", "capacity": {"bandwidth": {
            "value": "10G", "requestPolicy": {"default": "1M"}}}},
    ]}]}))

    plugin = cluster.start_plugin(profile=str(inventory), wait=False)

    assert plugin.process.wait(30) == 1
    log = plugin.log()
    assert "Bad_Name" in log
    assert "nic-x" in log and "allowMultipleAllocations" in log
    assert cluster.slices() == []


def _run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if k not in ("NODE_NAME", "NUM_DEVICES")}
    return subprocess.run([sys.executable, "-m", "simdra", *args], capture_output=True,
                          text=True, env={**base, **(env or {})}, timeout=60, check=False)


def test_python_dash_m_driver_prints_help() -> None:
    result = _run_cli("--help")

    assert result.returncode == 0
    assert "run" in result.stdout and "demo" in result.stdout


def test_demo_runs_end_to_end() -> None:
    result = subprocess.run([sys.executable, "-m", "simdra", "demo"], capture_output=True,
                            text=True, timeout=120, check=False, cwd=Path(__file__).parent)

    assert result.returncode == 0, result.stdout + result.stderr
    for marker in ("Published ResourceSlices", "NodePrepareResources", "cdiVersion",
                   "bandwidth  1M    10G   9999M",  # the NIC claim's share: the default
                   "CDI spec files left: none", "sockets left: none"):
        assert marker in result.stdout


# Makes one import fail inside `simdra demo` (and its children), as a plain install
# without kubernetes_validate once did: the stand-in then answers 500 to every write.
_BLOCK_IMPORT = '''
import sys

class _Block:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "kubernetes_validate":
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, _Block())
'''


def test_demo_that_fails_exits_at_once_with_one_line(tmp_path: Path) -> None:
    (tmp_path / "sitecustomize.py").write_text(_BLOCK_IMPORT)
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}

    # The timeout only bounds a hang (the demo used to wait forever here).
    result = subprocess.run([sys.executable, "-m", "simdra", "demo"], capture_output=True,
                            text=True, timeout=60, check=False, env=env,
                            cwd=Path(__file__).parent)

    assert result.returncode == 1, result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("simdra demo: step ")
    assert "No module named 'kubernetes_validate'" in lines[0]
