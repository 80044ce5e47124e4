"""Workload claims (KEP-5729, DRAWorkloadResourceClaims) on the real node: a PodGroup
names a claim template in spec.resourceClaims, the resourceclaim controller makes one
claim for the whole group (owned by the PodGroup), the scheduler reserves it for the
PodGroup (status.reservedFor names the group, not its pods) and the kubelet prepares it
once for every pod of the group on the node.

The plugin's reconciliation (free mode, checking every 2 s) reads such a claim as in use
while any pod of the group runs, so it never unprepares it under a running pod; the
kubelet unprepares it when the last pod of the group on the node is gone, although the
claim stays allocated and reserved for the PodGroup.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

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
    spec_file,
    unit_env,
    wait,
)
from .test_reconcile import READS, _reconciling

pytestmark = pytest.mark.overlay("fake reconciling")

GPU = "gpu.dra.example.com"
GROUP = "trainers"
TEMPLATE = "gpu-per-group"
LEAKED = "simdra_reconcile_leaked_claims"
# The claim as both the PodGroup and each of its pods name it: the kubelet and the
# controller match them by name and template.
GROUP_CLAIM = {"name": "gpu", "resourceClaimTemplateName": TEMPLATE}


@pytest.fixture
def pod_group(kube: Kube) -> Iterator[str]:
    """The PodGroup GROUP (basic scheduling: each pod placed on its own) sharing one
    claim from TEMPLATE; deleted after (its claim goes with it, by ownership)."""
    realnode.require_feature(kube.cp, "DRAWorkloadResourceClaims")
    realnode.require_feature(kube.cp, "GenericWorkload")
    version = realnode.served_version(kube.cp, "scheduling.k8s.io", "podgroups")
    assert version, "DRAWorkloadResourceClaims is on but no scheduling.k8s.io serves podgroups"
    kube.template(TEMPLATE, GPU)
    body = {
        "apiVersion": version,
        "kind": "PodGroup",
        "metadata": {"name": GROUP, "namespace": NAMESPACE},
        "spec": {"schedulingPolicy": {"basic": {}}, "resourceClaims": [GROUP_CLAIM]},
    }
    kube.cp.kubectl("create", "-f", "-", input=json.dumps(body))
    try:
        yield version
    finally:
        kube.cp.kubectl("delete", "podgroup", GROUP, "-n", NAMESPACE, "--ignore-not-found")


def _member(kube: Kube, name: str) -> None:
    """A pod of GROUP whose container uses the group's claim."""
    spec = realnode.on_real_node({
        "containers": [container("app", [{"name": "gpu"}])],
        "restartPolicy": "Never",
        "resourceClaims": [GROUP_CLAIM],
        "schedulingGroup": {"podGroupName": GROUP},
    })
    body: JSON = {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": NAMESPACE}, "spec": spec}
    kube.core.create_namespaced_pod(NAMESPACE, body)


def _reads_found(plugin: PluginDeployment) -> float:
    return plugin.metric(READS, result="found") or 0.0


def test_node_pod_group_claim_prepared_once_and_kept_while_a_member_runs(
        kube: Kube, plugin: PluginDeployment, pod_group: str) -> None:
    """Two pods of one PodGroup share the group's claim: both run and see the same device
    and claim UID; the plugin prepares it once. With the first pod deleted, reconciliation
    reads the claim again and again (found, in use: reserved for the PodGroup) and keeps
    it, the second pod running on it; with the last pod gone the kubelet unprepares it,
    though the claim stays reserved for the PodGroup."""
    names = ("member-1", "member-2")
    with _reconciling(plugin):
        for name in names:
            _member(kube, name)
        pods = [kube.wait_running(name) for name in names]
        claim_names = {s["resourceClaimName"] for p in pods
                       for s in p["status"]["resourceClaimStatuses"]}
        assert len(claim_names) == 1, f"the group's pods use different claims: {claim_names}"
        claim = kube.claim_of(pods[0])
        uid = claim["metadata"]["uid"]
        [result] = allocated(claim)
        group = json.loads(kube.cp.kubectl("get", "podgroup", GROUP, "-n", NAMESPACE,
                                           "-o", "json").stdout)
        assert claim["status"]["reservedFor"] == [{
            "apiGroup": "scheduling.k8s.io", "resource": "podgroups", "name": GROUP,
            "uid": group["metadata"]["uid"]}], claim["status"]["reservedFor"]
        [owner] = claim["metadata"]["ownerReferences"]
        assert (owner["kind"], owner["name"], owner.get("controller")) == (
            "PodGroup", GROUP, True)
        seen = [unit_env(kube.env(n)) for n in names]
        assert all(len(units) == 1 for units in seen), f"expected one device each: {seen}"
        assert seen[0] == seen[1], "the group's pods see different CDI devices of one claim"
        [unit] = seen[0].values()
        assert (unit["NAME"], unit["CLAIM_UID"]) == (result["device"], uid)
        assert [f for f in cdi_files() if uid in f] == [spec_file(claim)]
        assert plugin.prepares_of(claim) == 1

        kube.delete_pod(names[0])
        before = _reads_found(plugin)
        # The only prepared claim here: three more found reads are three checks that read
        # it in use, its reads backing off (2, 4, 8 s ...) well past the 2 s interval.
        wait(f"reconciliation read claim {uid} (found) three times after {names[0]} went",
             lambda: _reads_found(plugin) >= before + 3, 120, kube.node.kubelet_log,
             lambda: plugin.logs()[-1500:])
        assert spec_file(claim) in cdi_files(), f"unprepared while {names[1]} uses it"
        assert ledger_holders(result["device"]) == [uid]
        assert plugin.metric(LEAKED) == 0.0, plugin.logs()[-1500:]
        assert (kube.get_pod(names[1]) or {}).get("status", {}).get("phase") == "Running"
        assert not [line for line in plugin.logs().splitlines()
                    if "reconcile:" in line and uid in line], "reconciliation acted on it"

        kube.delete_pod(names[1])
        wait(f"claim {uid} unprepared after the group's last pod on the node",
             lambda: spec_file(claim) not in cdi_files() and not ledger_holders(result["device"]),
             60, kube.node.kubelet_log)
        still = kube.read_claim(claim["metadata"]["name"])
        assert still["metadata"]["uid"] == uid and still["status"]["reservedFor"], still
