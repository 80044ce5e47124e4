"""The real kube-scheduler allocating the cases of `tests/testing/allocator_corpus.py`.

One fake Node (no kubelet: a Node object whose Ready condition a thread keeps fresh, so
the node lifecycle controller never marks it NotReady) takes every case's pods. For a
case, its classes, slices and DeviceTaintRules are created; then for each claim in turn
the claim and a pod that uses it, and the scheduler decides: the pod is bound (the claim
now carries status.allocation) or marked unschedulable. Everything is deleted before the
next case.
"""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime
from typing import Any

from simdra._driver.kubeapi.access import ClusterAccess, StaticToken
from simdra._driver.kubeapi.client import MERGE_PATCH, RestClient
from simdra._driver.kubeapi.errors import ApiStatusError
from simdra._driver.testing.cluster import wait_until
from tests.testing.allocator_corpus import (
    NAMESPACE,
    NODE,
    Case,
    Verdict,
    claim_object,
    result_lines,
)

from .controlplane import ADMIN_TOKEN, ControlPlane

JSON = dict[str, Any]
RESOURCE = "/apis/resource.k8s.io/v1"
CLAIMS = f"{RESOURCE}/namespaces/{NAMESPACE}/resourceclaims"
PODS = f"/api/v1/namespaces/{NAMESPACE}/pods"
# DeviceTaintRule: served as v1 where the release has it there, else v1alpha3.
TAINT_RULE_VERSIONS = ("v1", "v1beta2", "v1alpha3")
# Only our pods go to the fake node (the e2e's other pods do not tolerate this).
NODE_TAINT = {"key": "simdra.dev/allocator-differential", "effect": "NoSchedule"}
HEARTBEAT_SECONDS = 10.0
# Time for the scheduler's informers to see new slices and classes before a pod comes:
# a pod tried before then would be unschedulable and wait minutes for a retry.
SETTLE_SECONDS = 1.0
DECIDE_TIMEOUT = 30.0


class LiveAllocator:
    """Allocates corpus cases with a real control plane's scheduler. A context manager:
    entering creates the namespace and the fake node, leaving deletes them."""

    def __init__(self, plane: ControlPlane) -> None:
        access = ClusterAccess(server=plane.server, ca_file=str(plane.certs.ca_cert),
                               credentials=StaticToken(ADMIN_TOKEN))
        self.api = RestClient(access)
        self._stop = threading.Event()
        self._heartbeat = threading.Thread(target=self._beat, daemon=True)
        self.messages: dict[str, str] = {}  # case -> why the scheduler refused a pod

    def __enter__(self) -> LiveAllocator:
        self.api.request("POST", "/api/v1/namespaces", body={
            "apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": NAMESPACE,
                         "labels": {"resource.kubernetes.io/admin-access": "true"}}})
        wait_until(lambda: self._get(f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts/default"),
                   30, "the namespace's default ServiceAccount")
        self.api.request("POST", "/api/v1/nodes", body={
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": NODE, "labels": {"kubernetes.io/hostname": NODE}},
            "spec": {"taints": [NODE_TAINT]}})
        self._ready()
        self._heartbeat.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._heartbeat.join()
        self._delete(f"/api/v1/nodes/{NODE}")
        self._delete(f"/api/v1/namespaces/{NAMESPACE}")
        self.api.close()

    def verdict(self, case: Case) -> Verdict:
        """What the scheduler gives each claim of `case`, in turn."""
        created: list[str] = []  # what to delete afterwards, slices last
        try:
            for item in case.classes:
                created.append(self._create(f"{RESOURCE}/deviceclasses", item))
            for index, spec in enumerate(case.taint_rules):
                created.append(self._create_taint_rule(f"rule-{index}", spec))
            slices = self._publish(case.slices, created)
            time.sleep(SETTLE_SECONDS)
            lines: list[str] = []
            for index in range(len(case.claims)):
                if index == len(case.claims) - 1 and case.republished is not None:
                    for path in slices:
                        self._delete(path)
                    slices = self._publish(case.republished, created)
                    time.sleep(SETTLE_SECONDS)
                lines += self._allocate(case, index)
            return tuple(sorted(lines))
        finally:
            self._clean_up(case, created)

    # -- one case

    def _publish(self, slices: tuple[JSON, ...], created: list[str]) -> list[str]:
        paths = []
        for item in slices:
            paths.append(self._create(f"{RESOURCE}/resourceslices", item))
            created.append(paths[-1])
        return paths

    def _allocate(self, case: Case, index: int) -> list[str]:
        claim = claim_object(case, index)
        del claim["metadata"]["uid"]
        self._create(CLAIMS, claim)
        self._create(PODS, _pod(index))
        decided = wait_until(lambda: self._decided(index), DECIDE_TIMEOUT,
                             f"a scheduling decision on pod-{index} of {case.name!r}")
        if decided is True:
            allocation = self.api.request("GET", f"{CLAIMS}/claim-{index}")["status"]
            return result_lines(index, allocation.get("allocation"))
        self.messages[f"{case.name} #{index}"] = str(decided)
        # A pod left pending would be retried, and might take devices, when later claims
        # come: it goes now, and its claim with it.
        self._delete(f"{PODS}/pod-{index}", force=True)
        return result_lines(index, None)

    def _decided(self, index: int) -> bool | str | None:
        """True once the pod is bound; the scheduler's reason and message once it is
        refused; None while it is undecided."""
        pod = self.api.request("GET", f"{PODS}/pod-{index}")
        if pod["spec"].get("nodeName"):
            return True
        for condition in (pod.get("status") or {}).get("conditions") or []:
            if condition["type"] == "PodScheduled" and condition["status"] == "False":
                return f"{condition.get('reason')}: {condition.get('message')}"
        return None

    def _clean_up(self, case: Case, created: list[str]) -> None:
        for index in range(len(case.claims)):
            self._delete(f"{PODS}/pod-{index}", force=True)
        for index in range(len(case.claims)):
            self._delete(f"{CLAIMS}/claim-{index}")
        # The claim controller deallocates a claim once its pod is gone, then lets it go.
        wait_until(lambda: not self.api.request("GET", CLAIMS)["items"], 60,
                   f"the claims of {case.name!r} to be deleted")
        wait_until(lambda: not self.api.request("GET", PODS)["items"], 60,
                   f"the pods of {case.name!r} to be deleted")
        for path in created:
            self._delete(path)

    # -- API helpers

    def _create(self, collection: str, body: JSON) -> str:
        """POST `body`; the path of the created object."""
        self.api.request("POST", collection, body=body)
        return f"{collection}/{body['metadata']['name']}"

    def _create_taint_rule(self, name: str, spec: JSON) -> str:
        for version in TAINT_RULE_VERSIONS:
            collection = f"/apis/resource.k8s.io/{version}/devicetaintrules"
            try:
                return self._create(collection, {
                    "apiVersion": f"resource.k8s.io/{version}", "kind": "DeviceTaintRule",
                    "metadata": {"name": name}, "spec": spec})
            except ApiStatusError as error:
                if error.status != 404:
                    raise
        raise AssertionError("no served version of DeviceTaintRule")

    def _get(self, path: str) -> JSON | None:
        try:
            found: JSON = self.api.request("GET", path)
            return found
        except ApiStatusError as error:
            if error.status == 404:
                return None
            raise

    def _delete(self, path: str, force: bool = False) -> None:
        query = {"gracePeriodSeconds": 0} if force else None
        try:
            self.api.request("DELETE", path, query=query)
        except ApiStatusError as error:
            if error.status != 404:
                raise

    # -- the fake node

    def _ready(self) -> None:
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        resources = {"cpu": "64", "memory": "256Gi", "pods": "110"}
        self.api.request("PATCH", f"/api/v1/nodes/{NODE}/status", content_type=MERGE_PATCH,
                         body={"status": {
                             "capacity": resources, "allocatable": resources,
                             "conditions": [{"type": "Ready", "status": "True",
                                             "reason": "KubeletReady",
                                             "message": "a fake node of the differential",
                                             "lastHeartbeatTime": now,
                                             "lastTransitionTime": now}]}})

    def _beat(self) -> None:
        while not self._stop.wait(HEARTBEAT_SECONDS):
            self._ready()


def _pod(index: int) -> JSON:
    """A pod on the fake node that uses claim-`index`."""
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": f"pod-{index}", "namespace": NAMESPACE},
        "spec": {
            "nodeSelector": {"kubernetes.io/hostname": NODE},
            "tolerations": [{"operator": "Exists"}],
            "automountServiceAccountToken": False,
            "resourceClaims": [{"name": "c", "resourceClaimName": f"claim-{index}"}],
            "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10",
                            "resources": {"claims": [{"name": "c"}]}}],
        },
    }
