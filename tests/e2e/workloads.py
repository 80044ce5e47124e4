"""Pods with ResourceClaimTemplates, created in the real API server, and the waits around
what the real controller-manager and scheduler then do with them."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable, Sequence
from typing import Any

from kubernetes import client

from simdra._driver.testing.cluster import wait_until

from .controlplane import ControlPlane
from .kubectl_plugin import why_agrees_pending

JSON = dict[str, Any]
_names = itertools.count()


def unique(prefix: str) -> str:
    """A fresh object name for this run."""
    return f"{prefix}-{next(_names)}"


def exactly(name: str, device_class: str, *, count: int | None = None,
            selectors: Sequence[str] = (), capacity: dict[str, str] | None = None,
            admin_access: bool = False, all_devices: bool = False) -> JSON:
    """One `exactly` device request of a claim spec."""
    request: JSON = {"deviceClassName": device_class}
    if all_devices:
        request["allocationMode"] = "All"
    elif count is not None:
        request["count"] = count
    if selectors:
        request["selectors"] = [{"cel": {"expression": e}} for e in selectors]
    if capacity:
        request["capacity"] = {"requests": capacity}
    if admin_access:
        request["adminAccess"] = True
    return {"name": name, "exactly": request}


class Workloads:
    """Creates and removes pods that use ResourceClaimTemplates, in one namespace."""

    def __init__(self, api: client.ApiClient, namespace: str = "default",
                 cp: ControlPlane | None = None) -> None:
        self.cp = cp  # for `kubectl dra why` on each Pending pod
        self.core = client.CoreV1Api(api)
        self.resource = client.ResourceV1Api(api)
        self.namespace = namespace
        self.pods: list[str] = []

    def template(self, name: str, requests: Iterable[JSON],
                 config: list[JSON] | None = None) -> str:
        """Create a ResourceClaimTemplate with these requests; returns its name."""
        devices: JSON = {"requests": list(requests)}
        if config:
            devices["config"] = config
        body = {
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": name, "namespace": self.namespace},
            "spec": {"spec": {"devices": devices}},
        }
        self.resource.create_namespaced_resource_claim_template(self.namespace, body)
        return name

    def pod(self, name: str, templates: dict[str, str], *, node: str | None = None,
            image: str = "simdra-e2e/none:never-pulled") -> str:
        """Create a pod whose one container uses claims made from these templates
        (claim name in the pod -> template name), optionally pinned to a node."""
        spec: JSON = {
            "automountServiceAccountToken": False,
            "terminationGracePeriodSeconds": 0,
            "tolerations": [{"key": "simdra.e2e/emulated", "operator": "Exists"}],
            "resourceClaims": [{"name": c, "resourceClaimTemplateName": t}
                               for c, t in templates.items()],
            "containers": [{"name": "main", "image": image,
                            "resources": {"claims": [{"name": c} for c in templates]}}],
        }
        if node:
            spec["nodeSelector"] = {"kubernetes.io/hostname": node}
        body = {"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": name, "namespace": self.namespace}, "spec": spec}
        self.core.create_namespaced_pod(self.namespace, body)
        self.pods.append(name)
        return name

    # -- what the control plane did -----------------------------------------------------

    def read_pod(self, name: str) -> JSON:
        """The pod as stored (JSON)."""
        raw = self.core.read_namespaced_pod(name, self.namespace, _preload_content=False)
        return dict(json.loads(raw.data))

    def wait_scheduled(self, name: str, timeout: float = 60.0) -> str:
        """Wait until the scheduler bound the pod; returns the node name."""
        def bound() -> str | None:
            node = self.read_pod(name)["spec"].get("nodeName")
            return str(node) if node else None
        return wait_until(bound, timeout, f"pod {self.namespace}/{name} scheduled")

    def unschedulable_reason(self, name: str) -> str | None:
        """The scheduler's message when it marked the pod unschedulable, else None."""
        for condition in self.read_pod(name).get("status", {}).get("conditions", []):
            if condition["type"] == "PodScheduled" and condition["status"] == "False":
                return f"{condition.get('reason')}: {condition.get('message')}"
        return None

    def wait_unschedulable(self, name: str, timeout: float = 60.0) -> str:
        """Wait for the scheduler's Unschedulable verdict, which `kubectl dra why` must
        share; returns reason and message."""
        reason = wait_until(lambda: self.unschedulable_reason(name), timeout,
                            f"pod {self.namespace}/{name} marked unschedulable")
        if self.cp is not None:
            why_agrees_pending(self.cp, self.namespace, name)
        return reason

    def claims_of(self, name: str) -> dict[str, JSON]:
        """Claim name in the pod -> the ResourceClaim the controller made for it (JSON)."""
        statuses = self.read_pod(name).get("status", {}).get("resourceClaimStatuses", [])
        out = {}
        for status in statuses:
            if status.get("resourceClaimName"):
                raw = self.resource.read_namespaced_resource_claim(
                    status["resourceClaimName"], self.namespace, _preload_content=False)
                out[status["name"]] = json.loads(raw.data)
        return out

    def allocated_devices(self, name: str) -> dict[str, list[JSON]]:
        """Claim name in the pod -> its allocation results (device, pool, shareID, ...)."""
        return {
            claim_name: claim["status"]["allocation"]["devices"]["results"]
            for claim_name, claim in self.claims_of(name).items()
            if claim.get("status", {}).get("allocation")
        }

    # -- clean-up -----------------------------------------------------------------------

    def delete_pod(self, name: str, timeout: float = 60.0) -> list[str]:
        """Delete the pod at once (no kubelet will confirm it) and wait until the
        controller removed its generated claims; returns those claims' names."""
        claims = [c["metadata"]["name"] for c in self.claims_of(name).values()]
        self.core.delete_namespaced_pod(name, self.namespace, grace_period_seconds=0)
        if name in self.pods:
            self.pods.remove(name)

        def gone() -> bool:
            remaining = {c.metadata.name for c in self.resource.list_namespaced_resource_claim(
                self.namespace).items}
            return not remaining.intersection(claims)
        wait_until(gone, timeout, f"claims {claims} of pod {name} removed")
        return claims

    def delete_all(self) -> None:
        """Delete every pod made here and every template in the namespace."""
        for name in list(self.pods):
            try:
                self.delete_pod(name)
            except client.ApiException as err:
                if err.status != 404:
                    raise
        self.resource.delete_collection_namespaced_resource_claim_template(self.namespace)
