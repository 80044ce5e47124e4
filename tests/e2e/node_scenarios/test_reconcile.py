"""Reconciliation on the real node, in free mode at its shortest settings: the kubelet
loses its DRA state while its pod is deleted, so nothing will ever unprepare the pod's
claim; the plugin finds the claim gone from the API, the kubelet's PodResources API
lists the plugin's own pod (the DaemonSet's, named by the downward API) and a pod using
another device but none using the claim's, so it unprepares it and a new pod gets the
very same device. A claim that vanishes from the API while its pod still runs is kept,
device and all."""

from __future__ import annotations

import contextlib
import json

import pytest

from .. import realnode
from ..realnode import (
    JSON,
    NAMESPACE,
    Kube,
    PluginDeployment,
    allocated,
    cdi_files,
    container,
    ledger_holders,
    request,
    spec_file,
    unit_env,
    wait,
)

pytestmark = pytest.mark.overlay("fake reconciling")

GPU = "gpu.dra.example.com"
# Checks every 2 s; a leak is acted on after 30 s (the shortest grace allowed), that is
# after ceil(30 / 2) + 1 = 16 checks in a row, and freed only when the kubelet agrees.
RECONCILE_ENV = {"RECONCILE_MODE": "free", "RECONCILE_INTERVAL": "2", "RECONCILE_GRACE": "30"}
CHECKS_NEEDED = 16
# Its own name: events outlive their pod, and another scenario has an "intruder" too.
INTRUDER = "reconcile-intruder"
KEPT = "simdra_reconcile_kept_claims_total"
READS = "simdra_reconcile_claim_reads_total"


def _reconciling(plugin: PluginDeployment) -> contextlib.AbstractContextManager[None]:
    """The DaemonSet with RECONCILE_ENV (a rolling update) for the block."""
    env = [{"name": k, "value": v} for k, v in RECONCILE_ENV.items()]
    return plugin.using("fake", pod_patch={"containers": [{"name": "plugin", "env": env}]})


def _index_of(plugin: PluginDeployment, pool: str, device: str) -> int:
    """The published `index` attribute of a device of the node."""
    for item in realnode.node_slices(plugin.cp, plugin.node.name):
        if item["spec"]["pool"]["name"] == pool:
            for published in item["spec"].get("devices") or []:
                if published["name"] == device:
                    return int(published["attributes"]["index"]["int"])
    raise AssertionError(f"device {pool}/{device} is not published")


def _claim_gone(kube: Kube, uid: str) -> bool:
    claims = kube.resource.list_namespaced_resource_claim(NAMESPACE).items
    return not any(c.metadata.uid == uid for c in claims)


def test_node_reconcile_frees_a_claim_the_kubelet_forgot(
        kube: Kube, plugin: PluginDeployment) -> None:
    """h. Kubelet stopped, its pod force-deleted (the claim goes with it) and its
    dra_manager_state removed: after the restart nobody unprepares the claim, yet the
    plugin's reconciliation does, and a new pod pinned to that device runs."""
    with _reconciling(plugin):
        kube.template("gpu-leak", "gpu.dra.example.com")
        kube.pod("leaky", "gpu-leak")
        claim = kube.claim_of(kube.wait_running("leaky"))
        uid = claim["metadata"]["uid"]
        [result] = allocated(claim)
        assert spec_file(claim) in cdi_files()

        def lose_state() -> None:
            kube.core.delete_namespaced_pod("leaky", NAMESPACE, grace_period_seconds=0)
            wait(f"claim {uid} deleted with its force-deleted pod",
                 lambda: _claim_gone(kube, uid), 60, kube.node.kubelet_log)
            state = kube.node.kubelet_root / "dra_manager_state"
            assert state.is_file(), f"no kubelet DRA checkpoint at {state}"
            state.unlink()

        kube.node.restart_kubelet(lose_state)
        plugin.wait_ready()  # registered again with the new kubelet, slices republished
        # Free mode frees only on the kubelet's positive knowledge: an answer listing DRA
        # resources for no container (gate off, claim cache lost) proves nothing, so a
        # pod on another GPU runs, and the kubelet lists its claim's device.
        index = _index_of(plugin, result["pool"], result["device"])
        kube.template("gpu-witness", GPU,
                      selector=f'device.attributes["{realnode.DRIVER}"].index != {index}')
        kube.pod("witness", "gpu-witness")
        kube.wait_running("witness")
        wait(f"CDI spec of leaked claim {uid} removed by reconciliation",
             lambda: spec_file(claim) not in cdi_files(), 120, kube.node.kubelet_log,
             lambda: plugin.logs()[-1500:])

        lines = [line for line in plugin.logs().splitlines()
                 if "reconcile: unprepared" in line and uid in line]
        assert len(lines) == 1 and f"{NAMESPACE}/{claim['metadata']['name']}" in lines[0]
        assert "claim_deleted" in lines[0], lines
        freed = plugin.metric("simdra_reconciled_claims_total", reason="claim_deleted")
        assert freed is not None and freed >= 1.0, freed

        # CEL sees no device names: pin the new claim by the device's index attribute.
        kube.template("gpu-same", "gpu.dra.example.com",
                      selector=f'device.attributes["{realnode.DRIVER}"].index == {index}')
        kube.pod("reuser", "gpu-same")
        pod = kube.wait_running("reuser")
        [unit] = unit_env(kube.env("reuser")).values()
        assert unit["NAME"] == result["device"]
        assert unit["CLAIM_UID"] == kube.claim_of(pod)["metadata"]["uid"]
        assert [f for f in kube.failed_prepares() if f.startswith("reuser:")] == []


def _refusals(kube: Kube, pod: str) -> tuple[int, list[str]]:
    """How many prepares of the pod's claims failed (the kubelet's events, counted as it
    aggregates repeats), and their messages. By the pod's UID: events outlive their pod,
    and an earlier scenario's pod of the same name must not count."""
    uid = ((kube.get_pod(pod) or {}).get("metadata") or {}).get("uid")
    if not uid:
        return 0, []
    events = kube.core.list_namespaced_event(
        NAMESPACE, field_selector=f"involvedObject.uid={uid},reason=FailedPrepareDynamicResources"
    ).items
    return sum(e.count or 1 for e in events), [e.message for e in events]


def _containers(kube: Kube, name: str) -> list[tuple[str, int, bool]]:
    """ID, restarts and running state of each of the pod's containers."""
    statuses = (kube.get_pod(name) or {}).get("status", {}).get("containerStatuses") or []
    return [(s.get("containerID", ""), s.get("restartCount", 0),
             "running" in (s.get("state") or {})) for s in statuses]


def _seem_gone(kube: Kube, claim: JSON) -> None:
    """Delete the claim and remove its finalizer, so that the API server drops it at once
    although a running pod still has it reserved (the pod runs on: the kubelet does not
    look at a claim again once its pod started)."""
    uid, name = claim["metadata"]["uid"], claim["metadata"]["name"]
    kube.resource.delete_namespaced_resource_claim(name, NAMESPACE)
    kube.cp.kubectl("patch", "resourceclaim", name, "-n", NAMESPACE, "--type=merge",
                    "-p", json.dumps({"metadata": {"finalizers": None}}))
    wait(f"claim {name} ({uid}) gone from the API server", lambda: _claim_gone(kube, uid), 30,
         kube.node.kubelet_log)


def test_node_reconcile_keeps_a_claim_its_running_pod_uses(
        kube: Kube, plugin: PluginDeployment) -> None:
    """A running pod's claim is made to look gone (finalizer removed, claim deleted; the
    pod runs on). In free mode the plugin, once the leak has lasted the checks it needs,
    asks the kubelet, which lists the pod as using the claim: the claim is kept (counted
    as kept{why=in_use}, logged once), and stays so for another full round of checks,
    with its CDI spec, ledger entry and device; a second claim pinned to that exclusive
    GPU, which the scheduler now thinks free, is refused at prepare naming the device
    and the holder, again on the kubelet's retry, and its pod never runs."""
    with _reconciling(plugin):
        kube.claim("held", [request("dev", GPU)])
        kube.create_pod("holder", [container("app", [{"name": "dev"}])],
                        [{"name": "dev", "resourceClaimName": "held"}])
        kube.wait_running("holder")
        claim = kube.read_claim("held")
        uid = claim["metadata"]["uid"]
        [result] = allocated(claim)
        device, where = result["device"], f"{result['pool']}/{result['device']}"
        assert spec_file(claim) in cdi_files() and ledger_holders(device) == [uid]
        running = _containers(kube, "holder")
        kept_before = plugin.metric(KEPT, why="in_use")
        assert kept_before is not None, f"{KEPT}{{why=in_use}} not exposed"

        _seem_gone(kube, claim)
        # CEL sees no device names: pin the new claim by the device's index attribute.
        index = _index_of(plugin, result["pool"], device)
        kube.template("gpu-taken", GPU,
                      selector=f'device.attributes["{realnode.DRIVER}"].index == {index}')
        kube.pod(INTRUDER, "gpu-taken")
        wait(f"plugin keeps claim held ({uid}): {KEPT}{{why=in_use}} counted",
             lambda: (plugin.metric(KEPT, why="in_use") or 0.0) > kept_before, 150,
             kube.node.kubelet_log, lambda: plugin.logs()[-1500:])
        reads = plugin.metric(READS, result="gone") or 0.0
        # A second refusal: the kubelet retried the prepare (its pod sync backs off 10 s,
        # then 20 s), and the device was still held then.
        wait(f"the kubelet's prepare of intruder's claim refused twice: {where} held by {uid}",
             lambda: _refusals(kube, INTRUDER)[0] >= 2, 90, kube.node.kubelet_log,
             lambda: f"{kube.pod_summary(INTRUDER)}; {_refusals(kube, INTRUDER)}")
        # Every check reads the claim of a suspect: these many more gone reads are at
        # least as many checks again as a leak needs, each of which found it in use.
        wait(f"{CHECKS_NEEDED} more checks after the claim was kept",
             lambda: (plugin.metric(READS, result="gone") or 0.0) >= reads + CHECKS_NEEDED,
             120, kube.node.kubelet_log)

        _, messages = _refusals(kube, INTRUDER)
        # The kubelet keeps the head and a fixed-length tail of a long event message; the
        # tail names the device (not always all of its pool) and its holder.
        refusal = f"/{device} is exclusive and already prepared for claim {uid}"
        assert messages and all(refusal in m for m in messages), messages
        intruder = kube.get_pod(INTRUDER) or {}
        assert intruder["status"]["phase"] == "Pending", kube.pod_summary(INTRUDER)
        assert not any(up for _, _, up in _containers(kube, INTRUDER))
        assert spec_file(kube.claim_of(intruder)) not in cdi_files()
        assert spec_file(claim) in cdi_files(), "the CDI spec of the claim in use was removed"
        assert ledger_holders(device) == [uid], "the ledger let go of the device in use"
        assert _containers(kube, "holder") == running, "the holder's container changed"
        [unit] = unit_env(kube.env("holder")).values()
        assert (unit["NAME"], unit["CLAIM_UID"]) == (device, uid)
        log = plugin.logs().splitlines()
        kept = [line for line in log if "reconcile: kept" in line and uid in line]
        assert len(kept) == 1 and f"{NAMESPACE}/held" in kept[0], kept
        assert "claim_deleted" in kept[0] and "still uses it" in kept[0], kept[0]
        assert not [line for line in log if "reconcile: unprepared" in line and uid in line]
