"""Device binding conditions on the real node (DRADeviceBindingConditions): a device the
plugin publishes from an inventory file with bindingConditions keeps its pod from being
bound until the condition is True in the claim's status.devices; a binding failure
condition, or no condition before the scheduler's bindingTimeout, makes the scheduler
give up: it clears the allocation and schedules the pod afresh.

Setting the conditions is the job of a controller outside the plugin (one that attaches
the device); the test plays it, and checks only what the scheduler does in return (its
events, the claim's allocation, the pod's binding)."""

from __future__ import annotations

import datetime
import json
from collections.abc import Callable, Iterator

import pytest
from kubernetes import watch

from .. import realnode
from ..realnode import (
    DRIVER,
    JSON,
    NAMESPACE,
    Kube,
    PluginDeployment,
    allocated,
    cdi_files,
    node_slices,
    spec_file,
    unit_env,
    wait,
)

pytestmark = pytest.mark.overlay("fake-inventory attachable")

GPU = "gpu.dra.example.com"
DEVICE = "gpu-attach-0"
INVENTORY = f"""\
pools:
  - name: "{{node}}"
    devices:
      - name: {DEVICE}
        attributes:
          type: {{string: gpu}}
        bindingConditions: [Attached]
        bindingFailureConditions: [AttachFailed]
"""
# After the scheduler's cue (a failure condition, or its bindingTimeout), how long until
# it has cleared the allocation: PreBind looks at the claim every 5 s, then the pod waits
# out its backoff (at most 10 s, the default podMaxBackoffSeconds) before the cycle whose
# PostFilter deallocates; the rest is slack for a loaded machine.
GIVE_UP_WINDOW = 60


@pytest.fixture(scope="module")
def attachable(plugin: PluginDeployment) -> Iterator[None]:
    """The DaemonSet publishing only DEVICE, with its binding (failure) conditions, for
    this file's scenarios; the usual overlay again after them."""
    with plugin.using("fake-inventory", inventory=INVENTORY):
        plugin.wait_devices({(plugin.node.name, DEVICE)})
        yield


def _report(kube: Kube, claim: JSON, condition: str, reason: str, message: str) -> None:
    """What the attaching controller writes: `condition` True for the claim's device."""
    [result] = allocated(claim)
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    entry = {"type": condition, "status": "True", "reason": reason, "message": message,
             "lastTransitionTime": now}
    device = {"driver": DRIVER, "pool": result["pool"], "device": result["device"],
              "conditions": [entry]}
    kube.cp.kubectl("patch", "resourceclaim", claim["metadata"]["name"], "-n", NAMESPACE,
                    "--subresource=status", "--type=merge",
                    "-p", json.dumps({"status": {"devices": [device]}}))


def _events(kube: Kube, pod: str, reason: str) -> list[str]:
    """Messages of the pod's events with this reason."""
    items = kube.core.list_namespaced_event(
        NAMESPACE, field_selector=f"involvedObject.name={pod},reason={reason}"
    ).items
    return [str(e.message) for e in items]


def _pending(kube: Kube, pod: str) -> JSON:
    """Wait until the scheduler holds `pod` in PreBind for DEVICE's binding conditions;
    the pod's claim then (allocated, not yet bound)."""
    wait(f"scheduler waits for the binding conditions of {pod} (BindingConditionsPending)",
         lambda: bool(_events(kube, pod, "BindingConditionsPending")), 90,
         kube.node.kubelet_log, lambda: kube.pod_summary(pod))
    found = kube.get_pod(pod) or {}
    assert not found["spec"].get("nodeName"), f"{pod} bound before its device was attached"
    claim = kube.claim_of(found)
    [result] = allocated(claim)
    assert (result["device"], result.get("bindingConditions"),
            result.get("bindingFailureConditions")) == (DEVICE, ["Attached"], ["AttachFailed"])
    return claim


def _watch_claim(kube: Kube, claim: JSON, since: str, until: Callable[[JSON], bool],
                 what: str, window: int = GIVE_UP_WINDOW) -> JSON:
    """The first version of `claim` after resourceVersion `since` for which `until` holds
    (an API watch: no change is missed, however brief); fails after `window` s."""
    name = claim["metadata"]["name"]
    seen: list[str] = []
    # The client finds no model by the list method's name (V1ResourceClaim): name it.
    stream = watch.Watch(return_type="ResourceV1ResourceClaim")
    for event in stream.stream(kube.resource.list_namespaced_resource_claim, NAMESPACE,
                               field_selector=f"metadata.name={name}", resource_version=since,
                               timeout_seconds=window, _request_timeout=window + 10):
        obj = event["raw_object"]
        if event["type"] == "ERROR":
            raise AssertionError(f"{what}: watch of claim {name} failed: {obj}")
        status = obj.get("status") or {}
        seen.append(f"{event['type']} allocated={bool(status.get('allocation'))} "
                    f"reserved={len(status.get('reservedFor') or [])}")
        if until(obj):
            stream.stop()
            return dict(obj)
    raise AssertionError(f"{what}: not within {window} s: claim {name} went "
                         f"{seen[-6:]} (log: {kube.cp.workdir / 'kube-scheduler.log'})")


def _deallocated(obj: JSON) -> bool:
    return not (obj.get("status") or {}).get("allocation")


def test_node_binding_conditions_hold_the_pod(kube: Kube, attachable: None) -> None:
    """The pod waits unbound (nothing prepared) while Attached is not True, then binds,
    runs and sees the device once it is."""
    realnode.require_feature(kube.cp, "DRADeviceBindingConditions")
    slices = node_slices(kube.cp, kube.node.name)
    [published] = [d for s in slices for d in s["spec"]["devices"]]
    assert published.get("bindingConditions") == ["Attached"], published
    kube.template("attach", GPU)
    kube.pod("attach-pod", "attach")
    claim = _pending(kube, "attach-pod")
    assert spec_file(claim) not in cdi_files(), "prepared before the pod was bound"

    _report(kube, claim, "Attached", "Attached", "attached by the e2e")
    kube.wait_running("attach-pod")
    [unit] = unit_env(kube.env("attach-pod")).values()
    assert (unit["NAME"], unit["CLAIM_UID"]) == (DEVICE, claim["metadata"]["uid"])
    assert spec_file(claim) in cdi_files()


def test_node_binding_failure_condition_reschedules(kube: Kube, attachable: None) -> None:
    """AttachFailed True: the scheduler gives up the binding with a FailedScheduling
    event naming the condition's reason and message, clears the claim's allocation
    (status.devices with it), and schedules the pod again; attached on that second
    allocation, the pod runs."""
    realnode.require_feature(kube.cp, "DRADeviceBindingConditions")
    kube.template("attach-fail", GPU)
    kube.pod("fails-once", "attach-fail")
    claim = _pending(kube, "fails-once")
    since = claim["metadata"]["resourceVersion"]
    message = "e2e: the fabric refused the attach"
    _report(kube, claim, "AttachFailed", "FabricRefused", message)

    cleared = _watch_claim(kube, claim, since, _deallocated,
                           "scheduler clears the allocation after AttachFailed")
    status = cleared.get("status") or {}
    assert not status.get("devices") and not status.get("reservedFor"), status
    wait("FailedScheduling event naming the binding failure of fails-once",
         # "device binding failed" since 1.36, "claim <name> binding failed" before.
         lambda: any("binding failed" in m and "FabricRefused" in m and message in m
                     for m in _events(kube, "fails-once", "FailedScheduling")),
         GIVE_UP_WINDOW, kube.cp.workdir / "kube-scheduler.log",
         lambda: str(_events(kube, "fails-once", "FailedScheduling")[-3:]))
    assert not (kube.get_pod("fails-once") or {})["spec"].get("nodeName")

    again = _watch_claim(kube, cleared, cleared["metadata"]["resourceVersion"],
                         lambda c: not _deallocated(c), "scheduler allocates the claim again")
    assert not again["status"].get("devices"), "the failed attempt's conditions stayed"
    assert not (kube.get_pod("fails-once") or {})["spec"].get("nodeName")
    _report(kube, again, "Attached", "Attached", "attached by the e2e on the second try")
    kube.wait_running("fails-once")
    [unit] = unit_env(kube.env("fails-once")).values()
    assert (unit["NAME"], unit["CLAIM_UID"]) == (DEVICE, claim["metadata"]["uid"])


def test_node_binding_timeout_deallocates(kube: Kube, attachable: None) -> None:
    """No condition ever set: the pod is not bound; once the scheduler's bindingTimeout
    has passed since the allocation it gives up (FailedScheduling: device binding
    timeout) and clears the allocation; nothing was prepared."""
    realnode.require_feature(kube.cp, "DRADeviceBindingConditions")
    timeout = kube.cp.binding_timeout
    if timeout is None:
        pytest.skip(f"Kubernetes {kube.cp.version()}: its scheduler takes no DynamicResources "
                    "bindingTimeout (1.35+) to shorten the 10 min wait")
    kube.template("attach-never", GPU)
    kube.pod("never-attached", "attach-never")
    claim = _pending(kube, "never-attached")
    stamp = claim["status"]["allocation"]["allocationTimestamp"]
    allocated_at = datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00"))

    # The watch starts as the scheduler begins to wait: the timeout, then GIVE_UP_WINDOW.
    _watch_claim(kube, claim, claim["metadata"]["resourceVersion"], _deallocated,
                 f"scheduler clears the allocation {timeout} s after it (bindingTimeout)",
                 timeout + GIVE_UP_WINDOW)
    waited = datetime.datetime.now(datetime.UTC) - allocated_at
    # It waited the timeout out, not less (the stamp has whole seconds: 1 s of slack):
    # giving up at once would be the failure path's behaviour, not this one's.
    assert waited >= datetime.timedelta(seconds=timeout - 1), waited
    # A binding is final: unbound now means never bound.
    assert not (kube.get_pod("never-attached") or {})["spec"].get("nodeName")
    # "device binding timeout" since 1.36, "claim <name> binding timeout" before.
    wait("FailedScheduling event naming the binding timeout of never-attached",
         lambda: any("binding timeout" in m
                     for m in _events(kube, "never-attached", "FailedScheduling")),
         GIVE_UP_WINDOW, kube.cp.workdir / "kube-scheduler.log",
         lambda: str(_events(kube, "never-attached", "FailedScheduling")[-3:]))
    assert spec_file(claim) not in cdi_files(), "prepared though never bound"
