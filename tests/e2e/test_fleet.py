"""`simdra fleet` on the e2e's real control plane: 100 simulated DRA nodes that kwok keeps
Ready, pods the REAL scheduler places on them, claims whose status.devices the fleet
writes, and a NoExecute device taint that the real eviction controller acts on; and a
fleet whose node names a real Node already has, which refuses to start.

kwok (tests/e2e/build-kwok.sh) manages only the nodes annotated kwok.x-k8s.io/node=fake:
the fleet's, never the e2e's other nodes. Everything the scenario made goes at the end.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from simdra._driver.fleet.mix import parse_mix
from simdra._driver.fleet.plan import created_fleet
from simdra._driver.fleet.pool_plan import plan_inventory
from simdra._driver.testing.cluster import wait_until

from .conftest import REPO, logs_dir
from .controlplane import ComponentError, ControlPlane, free_port, record_pid
from .kubectl_plugin import kubectl_dra_json
from .kwok import Kwok, build_kwok
from .realnode import require_feature, served_version

JSON = dict[str, Any]
DRIVER = "dra.example.com"
GPU = f"gpu.{DRIVER}"
NODES = 100
PREFIX = "e2e-fleet"
MIX = "gpu8:70,nic2:20,partitioned:10"
NAMESPACE = "default"
TEMPLATE = "e2e-fleet-one-gpu"
PODS = 6
PUBLISHED = re.compile(r"fleet: published (\d+) nodes, (\d+) slices")
RULE = "e2e-fleet-maintenance"


@dataclass
class FleetRun:
    """The running fleet: its process, its log, what it said it published."""

    process: subprocess.Popen[bytes]
    log: Path
    nodes: int = 0
    slices: int = 0

    def tail(self) -> str:
        lines = self.log.read_text(errors="replace").strip().splitlines()
        return lines[-1] if lines else "(empty log)"

    def published(self) -> bool:
        if self.process.poll() is not None:
            raise AssertionError(f"fleet exited {self.process.returncode}: {self.tail()} "
                                 f"(log: {self.log})")
        found = PUBLISHED.search(self.log.read_text(errors="replace"))
        if found:
            self.nodes, self.slices = int(found[1]), int(found[2])
        return bool(found)


def _start_fleet(cp: ControlPlane, log: Path) -> FleetRun:
    args = [sys.executable, "-m", "simdra", "fleet", "--kubeconfig", str(cp.kubeconfig),
            "--driver-name", DRIVER, "--nodes", str(NODES), "--mix", MIX, "--seed", "1",
            "--node-prefix", PREFIX, "--metrics-port", str(free_port())]
    with open(log, "ab") as out:
        process = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, cwd=REPO,
                                   start_new_session=True)
    record_pid(process.pid)
    return FleetRun(process, log)


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _fleet_nodes(core: client.CoreV1Api) -> set[str]:
    return {n.metadata.name for n in
            core.list_node(label_selector=f"simdra.dev/fleet={PREFIX}").items}


def _fleet_slices(resource: client.ResourceV1Api, nodes: set[str]) -> list[Any]:
    return [s for s in resource.list_resource_slice(field_selector=f"spec.driver={DRIVER}").items
            if s.spec.node_name in nodes]


def _clean_up(cp: ControlPlane) -> None:
    """Remove the scenario's pods, template, rule, nodes and slices."""
    core, resource = client.CoreV1Api(cp.api_client()), client.ResourceV1Api(cp.api_client())
    core.delete_collection_namespaced_pod(NAMESPACE, label_selector="e2e-fleet=1",
                                          grace_period_seconds=0)
    cp.kubectl("delete", "resourceclaimtemplate", TEMPLATE, "--ignore-not-found")
    nodes = _fleet_nodes(core)
    for slice_ in _fleet_slices(resource, nodes):
        resource.delete_resource_slice(slice_.metadata.name)
    core.delete_collection_node(label_selector=f"simdra.dev/fleet={PREFIX}")


@pytest.fixture(scope="module")
def fleet(control_plane: ControlPlane) -> Iterator[FleetRun]:
    """kwok, then the fleet of NODES nodes, until every slice is first published."""
    workdir = logs_dir() / "fleet"
    workdir.mkdir(parents=True, exist_ok=True)
    try:
        kwok = Kwok(control_plane, build_kwok(), workdir)
    except ComponentError as err:
        pytest.fail(f"kwok: {err}", pytrace=False)
    run: FleetRun | None = None
    try:
        try:
            kwok.start()
        except ComponentError as err:
            pytest.fail(f"kwok: {str(err).splitlines()[0]}", pytrace=False)
        run = _start_fleet(control_plane, workdir / "fleet.log")
        wait_until(run.published, 150, f"the fleet's 'published' line (log: {run.log})")
        yield run
    finally:
        if run is not None:
            _stop(run.process)
        kwok.stop()
        _clean_up(control_plane)


def _pod(name: str) -> JSON:
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": {"e2e-fleet": "1"}},
        "spec": {
            "terminationGracePeriodSeconds": 0,
            "automountServiceAccountToken": False,
            "tolerations": [{"key": "simdra.dev/fleet", "operator": "Exists"}],
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": TEMPLATE}],
            "containers": [{"name": "main", "image": "e2e-fleet/none:never-pulled",
                            "resources": {"claims": [{"name": "gpu"}]}}],
        },
    }


def _read_pod(api: client.ApiClient, name: str) -> JSON:
    """The pod as stored (JSON, not the client's model)."""
    raw = client.CoreV1Api(api).read_namespaced_pod(name, NAMESPACE, _preload_content=False)
    return dict(json.loads(raw.data))


def _read_claim(api: client.ApiClient, name: str) -> JSON:
    """The claim as stored (JSON)."""
    raw = client.ResourceV1Api(api).read_namespaced_resource_claim(name, NAMESPACE,
                                                                   _preload_content=False)
    return dict(json.loads(raw.data))


def _ready(pod: JSON) -> bool:
    return any(c["type"] == "Ready" and c["status"] == "True"
               for c in pod.get("status", {}).get("conditions") or [])


@dataclass
class Placed:
    """A pod the scheduler placed on the fleet, its claim, and the device it holds."""

    name: str
    uid: str
    node: str
    claim: JSON

    @property
    def device(self) -> JSON:
        [result] = self.claim["status"]["allocation"]["devices"]["results"]
        return dict(result)


def _claim_of(api: client.ApiClient, pod: JSON) -> JSON:
    [status] = pod["status"]["resourceClaimStatuses"]
    return _read_claim(api, status["resourceClaimName"])


@pytest.fixture(scope="module")
def placed(control_plane: ControlPlane, fleet: FleetRun) -> list[Placed]:
    """PODS pods, each with a one-GPU claim from a template, Running on fleet nodes."""
    api = control_plane.api_client()
    control_plane.kubectl("apply", "-f", "-", input=json.dumps({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
        "metadata": {"name": TEMPLATE, "namespace": NAMESPACE},
        "spec": {"spec": {"devices": {"requests": [
            {"name": "gpu", "exactly": {"deviceClassName": GPU}}]}}}}))
    core = client.CoreV1Api(api)
    names = [f"e2e-fleet-pod-{i}" for i in range(PODS)]
    for name in names:
        core.create_namespaced_pod(NAMESPACE, _pod(name))

    def running() -> list[JSON] | None:
        pods = [_read_pod(api, n) for n in names]
        return pods if all(_ready(p) for p in pods) else None
    pods = wait_until(running, 90, f"{PODS} pods scheduled on fleet nodes and made Ready "
                      "by kwok")
    return [Placed(p["metadata"]["name"], p["metadata"]["uid"], p["spec"]["nodeName"],
                   _claim_of(api, p)) for p in pods]


def test_fleet_publishes_every_node_and_kwok_keeps_them_ready(
        control_plane: ControlPlane, fleet: FleetRun) -> None:
    core = client.CoreV1Api(control_plane.api_client())
    resource = client.ResourceV1Api(control_plane.api_client())
    nodes = _fleet_nodes(core)
    assert len(nodes) == NODES == fleet.nodes, (
        f"fleet nodes in the API: {len(nodes)}, the fleet said {fleet.nodes}, asked {NODES}")
    slices = _fleet_slices(resource, nodes)
    assert len(slices) == fleet.slices, (
        f"fleet slices in the API: {len(slices)}, the fleet said it published {fleet.slices}")
    bare = nodes - {s.spec.node_name for s in slices}
    assert not bare, f"{len(bare)} fleet nodes have no slice, e.g. {sorted(bare)[:3]}"

    def all_ready() -> bool:
        items = core.list_node(label_selector=f"simdra.dev/fleet={PREFIX}").items
        return all(any(c.type == "Ready" and c.status == "True"
                       for c in n.status.conditions or []) for n in items)
    wait_until(all_ready, 60, f"kwok to make all {NODES} fleet nodes Ready")


def test_fleet_writes_status_of_claims_the_real_scheduler_allocated(
        control_plane: ControlPlane, fleet: FleetRun, placed: list[Placed]) -> None:
    nodes = _fleet_nodes(client.CoreV1Api(control_plane.api_client()))
    strays = [p.name for p in placed if p.node not in nodes]
    assert not strays, f"pods placed off the fleet: {strays}"
    api = control_plane.api_client()

    def written(p: Placed) -> bool:
        claim = _read_claim(api, p.claim["metadata"]["name"])
        entries = {(d["driver"], d["pool"], d["device"])
                   for d in claim.get("status", {}).get("devices") or []}
        return (p.device["driver"], p.device["pool"], p.device["device"]) in entries
    for p in placed:
        wait_until(lambda p=p: written(p), 60,
                   f"the fleet to write status.devices of claim {p.claim['metadata']['name']} "
                   f"(device {p.device['device']} on {p.node}; log: {fleet.log})")


def test_fleet_kubectl_dra_top_counts_what_the_fleet_published(
        control_plane: ControlPlane, fleet: FleetRun, placed: list[Placed]) -> None:
    """`kubectl dra top` against the fleet's own counts: per node, the devices of its
    shape in the mix (the fleet's plan: `created_fleet` and `plan_inventory`, what
    `simdra fleet` publishes) and, allocated, the placed pods' one GPU each; per driver,
    the fleet's sum and the devices the driver publishes on the run's other nodes."""
    planned = created_fleet(PREFIX, NODES, parse_mix(MIX), 1)
    per_shape = {node.shape.name: len(list(plan_inventory(node.name, DRIVER, node.shape)
                                            .devices())) for node in planned}
    expected = {node.name: per_shape[node.shape.name] for node in planned}
    by_node = {g["group"]: g for g in kubectl_dra_json(control_plane, "top")["groups"]}
    assert {name: by_node[name]["devices"] for name in expected if name in by_node} == expected
    held = Counter(p.node for p in placed)
    assert {name: by_node[name]["allocated"] for name in expected
            if by_node[name]["allocated"]} == dict(held)
    resource = client.ResourceV1Api(control_plane.api_client())
    elsewhere = sum(len(s.spec.devices or []) for s in resource.list_resource_slice(
        field_selector=f"spec.driver={DRIVER}").items if s.spec.node_name not in expected)
    by_driver = {g["group"]: g for g in kubectl_dra_json(
        control_plane, "top", "--by", "driver")["groups"]}
    assert by_driver[DRIVER]["devices"] == sum(expected.values()) + elsewhere
    assert by_driver[DRIVER]["allocated"] >= PODS


def test_fleet_device_noexecute_taint_evicts_its_pod(
        control_plane: ControlPlane, fleet: FleetRun, placed: list[Placed]) -> None:
    require_feature(control_plane, "DRADeviceTaints")
    version = served_version(control_plane, "resource.k8s.io", "devicetaintrules")
    if version is None:
        pytest.skip(f"Kubernetes {control_plane.version()} serves no DeviceTaintRule")
    victim, bystander = placed[0], placed[1]
    rule = {"apiVersion": version, "kind": "DeviceTaintRule", "metadata": {"name": RULE},
            "spec": {"deviceSelector": {"driver": DRIVER, "pool": victim.device["pool"],
                                        "device": victim.device["device"]},
                     "taint": {"key": "e2e-fleet/maintenance", "value": "true",
                               "effect": "NoExecute"}}}
    core = client.CoreV1Api(control_plane.api_client())
    control_plane.kubectl("apply", "-f", "-", input=json.dumps(rule))
    try:
        def gone() -> bool:
            names = {p.metadata.name for p in core.list_namespaced_pod(
                NAMESPACE, label_selector="e2e-fleet=1").items}
            return victim.name not in names
        wait_until(gone, 90, f"pod {victim.name} evicted for the NoExecute taint on "
                   f"{victim.device['pool']}/{victim.device['device']}")
        # Who deleted it: the device-taint eviction controller, by its Event, or (1.34.4
        # wrote the Event late or not at all, its broadcaster being asynchronous and
        # lossy) by its own log line naming the pod.
        def evicted_by_the_controller() -> bool:
            reasons = {e.reason for e in core.list_namespaced_event(
                NAMESPACE, field_selector=f"involvedObject.uid={victim.uid}").items}
            log = (control_plane.workdir / "kube-controller-manager.log").read_text()
            line = (f'"Deleting pod" logger="device-taint-eviction-controller" '
                    f'pod="{NAMESPACE}/{victim.name}:{victim.uid}"')
            return "DeviceTaintManagerEviction" in reasons or line in log
        wait_until(evicted_by_the_controller, 30,
                   f"the device-taint eviction event or log line of pod {victim.name} "
                   "(it is gone)")
        still = {p.metadata.name for p in core.list_namespaced_pod(
            NAMESPACE, label_selector="e2e-fleet=1").items}
        assert bystander.name in still, (
            f"pod {bystander.name} on untainted {bystander.device['device']} was evicted too")
    finally:
        kind = f"devicetaintrules.{version.split('/')[1]}.resource.k8s.io"
        control_plane.kubectl("delete", kind, RULE, "--ignore-not-found")


TAKEN = "e2e-taken"


def test_a_fleet_whose_node_name_a_real_node_has_refuses_and_leaves_it_alone(
        control_plane: ControlPlane, tmp_path: Path) -> None:
    """A real node named like the fleet's second: the fleet exits 1 with one line naming
    it, publishes no slice, and leaves the Node as it was."""
    core = client.CoreV1Api(control_plane.api_client())
    resource = client.ResourceV1Api(control_plane.api_client())
    real = core.create_node({"metadata": {"name": f"{TAKEN}-0001",
                                          "labels": {"role": "db"}}})
    try:
        done = subprocess.run(
            [sys.executable, "-m", "simdra", "fleet", "--kubeconfig",
             str(control_plane.kubeconfig), "--driver-name", DRIVER, "--nodes", "3",
             "--node-prefix", TAKEN], capture_output=True, text=True, timeout=120, cwd=REPO)
        after = core.read_node(real.metadata.name)
        slices = [s.metadata.name for s in resource.list_resource_slice(
            field_selector=f"spec.driver={DRIVER}").items
            if s.spec.node_name.startswith(f"{TAKEN}-")]
    finally:
        core.delete_node(real.metadata.name)
        core.delete_collection_node(label_selector=f"simdra.dev/fleet={TAKEN}")
    assert done.returncode == 1, done.stderr[-2000:]
    errors = [line for line in done.stderr.splitlines() if "ERROR" in line]
    assert len(errors) == 1, done.stderr[-2000:]
    assert f"cannot start: node {TAKEN}-0001 exists and is not this fleet's" in errors[0]
    assert slices == []
    # The node lifecycle controller may taint it (no kubelet): only the fleet's marks count.
    assert after.metadata.uid == real.metadata.uid
    assert after.metadata.labels == {"role": "db"}
    assert "kwok.x-k8s.io/node" not in (after.metadata.annotations or {})
    assert "simdra.dev/fleet" not in {t.key for t in after.spec.taints or []}
