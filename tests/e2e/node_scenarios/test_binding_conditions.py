"""Device binding conditions on the real node (DRADeviceBindingConditions): a device the
plugin publishes from an inventory file with bindingConditions keeps its pod from being
bound until the condition is True in the claim's status.devices. Setting it is the job
of a controller outside the plugin (one that attaches the device); the test plays it."""

from __future__ import annotations

import datetime
import json

from .. import realnode
from ..realnode import (
    DRIVER,
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


def _attached(kube: Kube, claim: dict, result: dict) -> None:
    """What the attaching controller writes: condition Attached True for the device."""
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    condition = {"type": "Attached", "status": "True", "reason": "Attached",
                 "message": "attached by the e2e", "lastTransitionTime": now}
    device = {"driver": DRIVER, "pool": result["pool"], "device": result["device"],
              "conditions": [condition]}
    kube.cp.kubectl("patch", "resourceclaim", claim["metadata"]["name"], "-n", NAMESPACE,
                    "--subresource=status", "--type=merge",
                    "-p", json.dumps({"status": {"devices": [device]}}))


def _events(kube: Kube, pod: str) -> list[str]:
    items = kube.core.list_namespaced_event(
        NAMESPACE, field_selector=f"involvedObject.name={pod}"
    ).items
    return [str(e.reason) for e in items]


def test_node_binding_conditions_hold_the_pod(kube: Kube, plugin: PluginDeployment) -> None:
    """The pod waits unbound (nothing prepared) while Attached is not True, then binds,
    runs and sees the device once it is."""
    realnode.require_feature(kube.cp, "DRADeviceBindingConditions")
    with plugin.using("fake-inventory", inventory=INVENTORY):
        plugin.wait_devices({(kube.node.name, DEVICE)})
        slices = node_slices(kube.cp, kube.node.name)
        [published] = [d for s in slices for d in s["spec"]["devices"]]
        assert published.get("bindingConditions") == ["Attached"], published
        kube.template("attach", "gpu.dra.example.com")
        kube.pod("attach-pod", "attach")
        wait("scheduler waits for the binding conditions of attach-pod (BindingConditionsPending)",
             lambda: "BindingConditionsPending" in _events(kube, "attach-pod"), 90,
             kube.node.kubelet_log, lambda: kube.pod_summary("attach-pod"))
        pod = kube.get_pod("attach-pod") or {}
        assert not pod["spec"].get("nodeName"), "bound before its device was attached"
        claim = kube.claim_of(pod)
        [result] = allocated(claim)
        assert (result["device"], result.get("bindingConditions")) == (DEVICE, ["Attached"])
        assert spec_file(claim) not in cdi_files(), "prepared before the pod was bound"

        _attached(kube, claim, result)
        kube.wait_running("attach-pod")
        [unit] = unit_env(kube.env("attach-pod")).values()
        assert (unit["NAME"], unit["CLAIM_UID"]) == (DEVICE, claim["metadata"]["uid"])
        assert spec_file(claim) in cdi_files()
        kube.delete_all()  # unprepared by this instance, before the overlay switches back
