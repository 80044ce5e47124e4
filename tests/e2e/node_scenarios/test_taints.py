"""Device taints on the real node: a DeviceTaintRule with NoExecute evicts the running
pod that uses the device (the eviction controller says so, and the kubelet unprepares
its claim), a claim tolerating the taint keeps its device while a pod that does not
tolerate it is evicted, and the plugin's own NoSchedule taint on an unhealthy device
(`simdra fault`) keeps new claims that do not tolerate it off the device."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable, Iterator

import pytest
from kubernetes import watch

from .. import releases
from ..realnode import (
    DATA_DIR,
    DRIVER,
    JSON,
    NAMESPACE,
    Kube,
    PluginDeployment,
    allocated,
    cdi_files,
    exact_request,
    ledger_holders,
    require_feature,
    served_version,
    slice_device,
    spec_file,
    unit_env,
    wait,
)

GPU = "gpu.dra.example.com"
RULE = "simdra-e2e-maintenance"
MAINTENANCE = "simdra.e2e/maintenance"
# What Kubernetes' device-taint eviction controller (pkg/controller/devicetainteviction)
# leaves: the pod's DisruptionTarget condition reason, and its event about the pod.
TAINT_EVICTION_REASON = "DeletionByDeviceTaintManager"
TAINT_EVICTION_EVENT = "DeviceTaintManagerEviction"


def gpu(index: int) -> str:
    return f'device.attributes["dra.example.com"].index == {index}'


def _rule_version(kube: Kube) -> str:
    """The DeviceTaintRule API version this cluster serves (skips where there is none)."""
    require_feature(kube.cp, "DRADeviceTaints")
    version = served_version(kube.cp, "resource.k8s.io", "devicetaintrules")
    if version is None:
        pytest.skip(
            f"Kubernetes {kube.cp.version()} serves no DeviceTaintRule "
            "(DRADeviceTaintRules off, or only in an API version this cluster does not enable)"
        )
    return version


@contextlib.contextmanager
def _maintenance_rules(kube: Kube, version: str, pool: str, *devices: str) -> Iterator[None]:
    """A NoExecute DeviceTaintRule with the maintenance taint on each of `devices`, made
    one after the other in this order, while the block runs."""
    names = [f"{RULE}-{device}" for device in devices]
    try:
        for name, device in zip(names, devices, strict=True):
            rule = {
                "apiVersion": version,
                "kind": "DeviceTaintRule",
                "metadata": {"name": name},
                "spec": {
                    "deviceSelector": {"driver": DRIVER, "pool": pool, "device": device},
                    "taint": {"key": MAINTENANCE, "value": "true", "effect": "NoExecute"},
                },
            }
            kube.cp.kubectl("apply", "-f", "-", input=json.dumps(rule))
        yield
    finally:
        kind = f"devicetaintrules.{version.split('/')[1]}.resource.k8s.io"
        kube.cp.kubectl("delete", kind, *names, "--ignore-not-found")


def _pods_version(kube: Kube) -> str:
    """The resourceVersion of NAMESPACE's pod list now: a watch from it misses nothing
    that happens after."""
    return str(kube.core.list_namespaced_pod(NAMESPACE).metadata.resource_version)


def _watch_pods(kube: Kube, since: str, until: Callable[[str, JSON], bool], what: str,
                timeout: int) -> list[tuple[str, JSON]]:
    """Every change to NAMESPACE's pods after resourceVersion `since` (watch event type,
    pod), up to the first for which `until` is true; fails naming `what` if none is
    within `timeout` seconds."""
    seen: list[tuple[str, JSON]] = []
    deadline = time.monotonic() + timeout
    stream = watch.Watch()
    while (left := deadline - time.monotonic()) > 0:
        for event in stream.stream(kube.core.list_namespaced_pod, NAMESPACE,
                                   resource_version=since, timeout_seconds=max(1, int(left))):
            pod = kube.api.sanitize_for_serialization(event["object"])
            seen.append((event["type"], pod))
            since = pod["metadata"]["resourceVersion"]
            if until(event["type"], pod):
                stream.stop()
                return seen
    changes = [(t, p["metadata"]["name"], p.get("status", {}).get("phase")) for t, p in seen]
    raise AssertionError(f"{what}: not within {timeout} s; pod changes seen: {changes[-8:]} "
                         f"(log: {kube.node.kubelet_log})")


def _deleted(name: str) -> Callable[[str, JSON], bool]:
    return lambda kind, pod: kind == "DELETED" and pod["metadata"]["name"] == name


def _taint_eviction(pod: JSON) -> JSON | None:
    """The DisruptionTarget condition the device-taint eviction controller sets on a pod
    before deleting it (pkg/controller/devicetainteviction), or None."""
    for condition in pod.get("status", {}).get("conditions") or []:
        if (condition["type"], condition["status"], condition.get("reason")) == (
                "DisruptionTarget", "True", TAINT_EVICTION_REASON):
            return dict(condition)
    return None


def _marked(seen: list[tuple[str, JSON]], name: str) -> bool:
    """Whether any state of pod `name` in `seen` carries the eviction controller's
    condition."""
    return any(_taint_eviction(pod) for _, pod in seen if pod["metadata"]["name"] == name)


def _eviction_events(kube: Kube, uid: str) -> list[str]:
    """Messages of the eviction controller's events about the pod with this UID."""
    events = kube.core.list_namespaced_event(
        NAMESPACE, field_selector=f"involvedObject.uid={uid},reason={TAINT_EVICTION_EVENT}"
    ).items
    return [e.message for e in events]


def test_node_taint_rule_evicts(kube: Kube, plugin: PluginDeployment) -> None:
    """gpu-6 in use; a NoExecute DeviceTaintRule on it: the device-taint eviction
    controller evicts the pod (the pod's DisruptionTarget condition and the controller's
    event say so, not just its disappearance), and the kubelet unprepares its claim on
    the node (CDI spec, ledger entry and the device's prepared units gone)."""
    version = _rule_version(kube)
    kube.template("gpu-6", GPU, selector=gpu(6))
    kube.pod("victim", "gpu-6")
    pod = kube.wait_running("victim")
    claim = kube.claim_of(pod)
    uid = claim["metadata"]["uid"]
    [held] = allocated(claim)
    assert held["device"] == "gpu-6"
    assert spec_file(claim) in cdi_files() and ledger_holders("gpu-6") == [uid]
    assert plugin.metric("simdra_device_prepared_units", pool=held["pool"], device="gpu-6") == 1
    since = _pods_version(kube)
    with _maintenance_rules(kube, version, held["pool"], "gpu-6"):
        seen = _watch_pods(kube, since, _deleted("victim"), "pod victim evicted", 90)
    # The controller sets the condition, then deletes the pod.
    assert _marked(seen, "victim"), seen[-1][1]["status"].get("conditions")
    wait(f"event {TAINT_EVICTION_EVENT} about pod victim", lambda: bool(
        _eviction_events(kube, pod["metadata"]["uid"])), 30, kube.node.kubelet_log)
    wait(f"claim {uid} of the evicted pod unprepared (CDI spec and ledger entry gone)",
         lambda: spec_file(claim) not in cdi_files() and not ledger_holders("gpu-6"), 60,
         kube.node.kubelet_log, lambda: str(ledger_holders("gpu-6")))
    assert plugin.metric("simdra_device_prepared_units", pool=held["pool"], device="gpu-6") == 0


def test_node_taint_rule_toleration_admits(kube: Kube) -> None:
    """A claim that tolerates the maintenance taint keeps gpu-6 under a NoExecute
    DeviceTaintRule while a pod on gpu-7, whose claim does not tolerate the same taint,
    is evicted: the tolerant pod is watched from before the rules until that eviction,
    and never marked for eviction nor deleted."""
    version = _rule_version(kube)
    if not releases.allocation_keeps_tolerations(kube.cp):
        pytest.skip(f"Kubernetes {kube.cp.version()}: its scheduler does not copy a "
                    "request's tolerations into the allocation (fixed in 1.35), so its "
                    "eviction controller evicts a tolerating pod too")
    toleration = {"key": MAINTENANCE, "operator": "Exists", "effect": "NoExecute"}
    kube.claim_template(
        "gpu-6-tolerant", [exact_request("dev", GPU, gpu(6), tolerations=[toleration])]
    )
    kube.template("gpu-7", GPU, selector=gpu(7))
    kube.pod("tolerant", "gpu-6-tolerant")
    kube.pod("control", "gpu-7")
    claim = kube.claim_of(kube.wait_running("tolerant"))
    kube.wait_running("control")
    [result] = allocated(claim)
    assert result["device"] == "gpu-6"
    kept = [(t.get("key"), t.get("effect")) for t in result.get("tolerations") or []]
    assert kept == [(MAINTENANCE, "NoExecute")]
    since = _pods_version(kube)
    # The window: the controller handles DeviceTaintRule events in the order the rules
    # were made, and handling one re-judges every allocated claim against all rules
    # (handleRuleChange). gpu-6's rule is made first, so by the time the controller
    # evicts the control pod for gpu-7's rule it has judged the tolerant pod twice, and
    # an eviction it decided is queued at once (no tolerationSeconds delays it) ahead of
    # the control's. The control's eviction ends the watch.
    with _maintenance_rules(kube, version, result["pool"], "gpu-6", "gpu-7"):
        seen = _watch_pods(kube, since, _deleted("control"), "control pod on gpu-7 evicted", 90)
        tolerant = [(kind, pod) for kind, pod in seen if pod["metadata"]["name"] == "tolerant"]
        assert not [kind for kind, pod in tolerant if kind == "DELETED"
                    or pod["metadata"].get("deletionTimestamp") or _taint_eviction(pod)], (
            "the tolerant pod was marked for eviction")
        assert _marked(seen, "control"), "the control pod went, but not by eviction"
        now = kube.get_pod("tolerant") or {}
        assert now.get("status", {}).get("phase") == "Running"
        assert not now["metadata"].get("deletionTimestamp")
        [unit] = unit_env(kube.env("tolerant")).values()
        assert (unit["NAME"], unit["CLAIM_UID"]) == ("gpu-6", claim["metadata"]["uid"])
    assert spec_file(claim) in cdi_files()


def test_node_unhealthy_taint_keeps_new_claims_off(kube: Kube, plugin: PluginDeployment) -> None:
    """`simdra fault gpu-4 unhealthy`: the plugin taints gpu-4 NoSchedule in its slice; a
    new claim for gpu-4 that does not tolerate it stays Pending, one that tolerates it
    runs, and after `fault reset` the first runs too."""
    require_feature(kube.cp, "DRADeviceTaints")
    plugin.exec("simdra", "fault", "--plugin-dir", DATA_DIR, "gpu-4", "unhealthy")
    try:
        taints: list[dict[str, str]] = []

        def tainted() -> bool:
            taints[:] = (slice_device(kube.cp, kube.node.name, "gpu-4") or {}).get("taints") or []
            return any(t["effect"] == "NoSchedule" for t in taints)

        wait("gpu-4 tainted NoSchedule in the node's slice", tainted, 60, kube.node.kubelet_log)
        [taint] = taints
        kube.template("gpu-4", GPU, selector=gpu(4))
        kube.pod("intolerant", "gpu-4")
        kube.wait_unschedulable("intolerant")
        toleration = {"key": taint["key"], "operator": "Exists", "effect": "NoSchedule"}
        kube.claim_template(
            "gpu-4-tolerant", [exact_request("dev", GPU, gpu(4), tolerations=[toleration])]
        )
        kube.pod("tolerant", "gpu-4-tolerant")
        [result] = allocated(kube.claim_of(kube.wait_running("tolerant")))
        assert result["device"] == "gpu-4"
        kube.delete_pod("tolerant")
    finally:
        plugin.exec("simdra", "fault", "--plugin-dir", DATA_DIR, "reset")
    # The taint was what kept it off: healthy again, gpu-4 goes to the waiting pod.
    [result] = allocated(kube.claim_of(kube.wait_running("intolerant")))
    assert result["device"] == "gpu-4"
