"""Every deploy/examples/ workload on the real node, under each overlay its
"# Overlays:" header names: applied as written (only the image mapped to the node's
local busybox and the pods pinned to the real node), its pods run and each container
sees the devices of its claims."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from kubernetes.client.rest import ApiException

from tests.deploy.test_examples_prepare import EXAMPLES, requirements, workload_files

from .. import realnode, releases
from ..realnode import JSON, Kube, PluginDeployment, unit_env, wait

pytestmark = pytest.mark.overlay("fake-inventory")

NAMESPACE = "simdra-demo"  # deploy/examples/namespace.yaml
IMAGES = {"busybox:1.36": realnode.BUSYBOX}  # the examples' images -> the node's copies
INVENTORY_CONFIGMAP = realnode.REPO / "deploy/overlays/fake-inventory/inventory-configmap.yaml"


def _for_real_node(obj: JSON) -> JSON:
    """The object with its pod template pinned to the real node and local images."""
    body = obj.get("spec") or {}
    spec = body if obj["kind"] == "Pod" else body.get("template", {}).get("spec")
    if spec is None:
        return obj
    for c in spec["containers"]:
        assert c["image"] in IMAGES, f"example image {c['image']} has no local copy on the node"
        c["image"], c["imagePullPolicy"] = IMAGES[c["image"]], "Never"
    if obj["kind"] == "Pod":
        obj["spec"] = realnode.on_real_node(spec)
    else:
        obj["spec"]["template"]["spec"] = realnode.on_real_node(spec)
    return obj


def _documents(files: list[str]) -> list[JSON]:
    names = ["namespace.yaml", "quota.yaml", *files]
    return [_for_real_node(d) for n in names
            for d in yaml.safe_load_all((EXAMPLES / n).read_text()) if d]


def _expected_pods(docs: list[JSON]) -> int:
    return sum(1 if d["kind"] == "Pod" else d["spec"].get("replicas", 1)
               for d in docs if d["kind"] in ("Pod", "Deployment"))


def _inventory_devices(node: str) -> set[tuple[str, str]]:
    """(pool, device) of the fake-inventory overlay's inventory file on `node`."""
    configmap = yaml.safe_load(INVENTORY_CONFIGMAP.read_text())
    pools = yaml.safe_load(configmap["data"]["inventory.yaml"])["pools"]
    return {(p["name"].replace("{node}", node), d["name"]) for p in pools for d in p["devices"]}


@contextlib.contextmanager
def _overlay(plugin: PluginDeployment, overlay: str) -> Iterator[None]:
    with plugin.using(overlay):
        if overlay == "fake-inventory":
            plugin.wait_devices(_inventory_devices(plugin.node.name))
        yield


def _claims_of(kube: Kube, pod: Any) -> list[JSON]:
    """The ResourceClaims a pod uses: named ones and those made from its templates."""
    made = {s.name: s.resource_claim_name for s in pod.status.resource_claim_statuses or []}
    names = [c.resource_claim_name or made.get(c.name) for c in pod.spec.resource_claims or []]
    return [kube.api.sanitize_for_serialization(
        kube.resource.read_namespaced_resource_claim(n, NAMESPACE)) for n in names if n]


def _needs_prepare(claim: JSON) -> bool:
    """Whether the kubelet calls the plugin for the claim: some device of it does not
    skip NodePrepareResources."""
    return any(not {"*", "NodePrepareResources"} & set(r.get("skipNodeOperations") or ())
               for r in realnode.allocated(claim))


def _printed_env(kube: Kube, pod: str) -> dict[str, str]:
    try:
        text = kube.core.read_namespaced_pod_log(pod, NAMESPACE)
    except ApiException:
        return {}
    return dict(line.split("=", 1) for line in text.splitlines() if line.startswith("SIMDRA_"))


def _namespace_gone(kube: Kube) -> None:
    kube.cp.kubectl("delete", "namespace", NAMESPACE, "--ignore-not-found", "--wait=false")
    wait(f"namespace {NAMESPACE} deleted", lambda: not kube.core.list_namespace(
        field_selector=f"metadata.name={NAMESPACE}").items, 180, kube.node.kubelet_log)


def _asks_for_capacity(value: Any) -> bool:
    """Whether a YAML document holds a device request that asks for capacity."""
    if isinstance(value, dict):
        if isinstance(value.get("capacity"), dict) and "requests" in value["capacity"]:
            return True
        return any(_asks_for_capacity(v) for v in value.values())
    return isinstance(value, list) and any(_asks_for_capacity(v) for v in value)


def _examples(capacity: bool) -> dict[str, list[str]]:
    """Overlay -> the example files naming it that do (or do not) ask for capacity."""
    by_overlay: dict[str, list[str]] = {}
    for name, overlays in workload_files().items():
        if name in requirements():
            continue  # test_node_deploy_gated_examples_run
        docs = yaml.safe_load_all((EXAMPLES / name).read_text())
        if any(_asks_for_capacity(d) for d in docs) == capacity:
            for overlay in overlays:
                by_overlay.setdefault(overlay, []).append(name)
    return dict(sorted(by_overlay.items()))


@pytest.mark.parametrize("overlay", list(_examples(capacity=False)))
def test_node_deploy_examples_run(kube: Kube, plugin: PluginDeployment, overlay: str) -> None:
    """The examples that name `overlay` and ask for no capacity, applied together on it:
    every pod runs, and each container's env names exactly its claims' devices."""
    _run_examples(kube, plugin, overlay, _examples(capacity=False)[overlay])


@pytest.mark.parametrize("overlay", list(_examples(capacity=True)))
def test_node_deploy_capacity_examples_run(
    kube: Kube, plugin: PluginDeployment, overlay: str
) -> None:
    """The examples that name `overlay` and ask for capacity (NIC bandwidth), the same
    way, where the release's scheduler can allocate a capacity request."""
    releases.require_capacity_requests(kube.cp)
    _run_examples(kube, plugin, overlay, _examples(capacity=True)[overlay])


@pytest.mark.parametrize(("file", "overlay"), [
    (file, overlay) for file in requirements() for overlay in workload_files()[file]])
def test_node_deploy_gated_examples_run(
    kube: Kube, plugin: PluginDeployment, file: str, overlay: str
) -> None:
    """An example that needs a newer release or gates off by default (its `# Requires:`
    line), applied alone on each overlay it names, the same way, where this release and
    its gates meet that; skipped naming what is missing elsewhere."""
    need, version = requirements()[file], kube.cp.version()
    if not need.met_by(version, kube.cp.features()):
        pytest.skip(f"Kubernetes {version} cannot run {file}: it needs "
                    f"{'.'.join(map(str, need.since))}+ with {', '.join(need.gates)} on")
    _run_examples(kube, plugin, overlay, [file])


def _run_examples(kube: Kube, plugin: PluginDeployment, overlay: str, files: list[str]) -> None:
    """Apply `files` together on `overlay`; every pod runs and sees its claims' devices."""
    docs = _documents(files)
    with _overlay(plugin, overlay):
        try:
            kube.cp.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(docs))
            expected = _expected_pods(docs)

            def running() -> list[Any]:
                pods = kube.core.list_namespaced_pod(NAMESPACE).items
                return [p for p in pods if p.status.phase == "Running"]

            wait(f"{expected} example pods of {', '.join(files)} Running on {overlay}",
                 lambda: len(running()) == expected, 180, kube.node.kubelet_log,
                 lambda: str([(p.metadata.name, p.status.phase) for p in
                              kube.core.list_namespaced_pod(NAMESPACE).items]))
            for pod in running():
                # A claim whose devices all skip the prepare (license seats, Kubernetes
                # 1.37 with DRAOptionalNodeOperations) never reaches the plugin.
                claims = [c for c in _claims_of(kube, pod) if _needs_prepare(c)]
                if not claims:
                    continue
                name = pod.metadata.name
                wait(f"example pod {name} printed its env",
                     lambda name=name: bool(_printed_env(kube, name)), 60, kube.node.kubelet_log)
                units = unit_env(_printed_env(kube, name)).values()
                assert sorted(u["NAME"] for u in units) == sorted(
                    r["device"] for c in claims for r in realnode.allocated(c)), name
                assert {u["CLAIM_UID"] for u in units} == {c["metadata"]["uid"] for c in claims}
                assert {realnode.spec_file(c) for c in claims} <= realnode.cdi_files()
        finally:
            _namespace_gone(kube)
