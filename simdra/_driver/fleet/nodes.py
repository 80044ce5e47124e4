"""The fleet's Node objects: what one looks like (pure) and creating, adopting and
removing them (side effects).

The fleet touches only Nodes that carry its label with its prefix: a Node of the same
name without it (a real node, another fleet's) is someone else's, and any write to it is
refused with NotOurs. The fleet's admission policy (deploy/fleet) holds the API server
to the same rule.

A fleet node is labelled `simdra.dev/fleet=<prefix>` (how the fleet finds its own after
a restart), annotated `kwok.x-k8s.io/node: fake` (so a kwok controller started with
`--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake` keeps it Ready and
runs its pods) and tainted `simdra.dev/fleet=true:NoSchedule`, so only pods that
tolerate the taint (a scale test's) land there.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from simdra._driver.fleet import retry
from simdra._driver.fleet.metrics import FleetMetrics, verb_of
from simdra._driver.kubeapi.client import RestClient
from simdra._driver.kubeapi.errors import ApiStatusError
from simdra._driver.slices.backoff import Backoff

JSON = dict[str, Any]
NODES = "/api/v1/nodes"
FLEET_LABEL = "simdra.dev/fleet"
SHAPE_LABEL = "simdra.dev/fleet-shape"
KWOK_ANNOTATION = "kwok.x-k8s.io/node"
FLEET_TAINT = {"key": FLEET_LABEL, "value": "true", "effect": "NoSchedule"}
# What a node offers besides its devices (a mid-size server).
NODE_RESOURCES = {"cpu": "32", "memory": "256Gi", "pods": "110", "ephemeral-storage": "1Ti"}


class NotOurs(Exception):
    """A Node the fleet would write carries no label `simdra.dev/fleet=<its prefix>`."""

    def __init__(self, node: JSON, prefix: str) -> None:
        meta = node.get("metadata") or {}
        label = (meta.get("labels") or {}).get(FLEET_LABEL)
        has = (f"no label {FLEET_LABEL}" if label is None
               else f"{FLEET_LABEL}={str(label)[:63]!r}")
        super().__init__(f"node {meta.get('name')} exists and is not this fleet's (it has "
                         f"{has}, not {FLEET_LABEL}={prefix!r}): left alone; pick a "
                         "--node-prefix that no real node's name starts with")


def is_ours(node: JSON, prefix: str) -> bool:
    """Whether `node` carries the label of the fleet with `prefix` (pure)."""
    labels = (node.get("metadata") or {}).get("labels") or {}
    return bool(labels.get(FLEET_LABEL) == prefix)


@dataclass(frozen=True)
class FleetNode:
    """A node the fleet plays: its name, shape, and UID once it exists."""

    name: str
    shape: str
    uid: str = ""


def node_body(name: str, prefix: str, shape: str, now: str) -> JSON:
    """The Node object the fleet creates for `name` (pure)."""
    ready = {"type": "Ready", "status": "True", "reason": "KubeletReady",
             "message": "simulated by simdra fleet", "lastHeartbeatTime": now,
             "lastTransitionTime": now}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {FLEET_LABEL: prefix, SHAPE_LABEL: shape, "type": "kwok",
                       "kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                       "kubernetes.io/arch": "amd64"},
            "annotations": {KWOK_ANNOTATION: "fake"},
        },
        "spec": {"taints": [dict(FLEET_TAINT)]},
        "status": {"capacity": dict(NODE_RESOURCES), "allocatable": dict(NODE_RESOURCES),
                   "conditions": [ready], "phase": "Running"},
    }


class NodeApi:
    """Nodes through the fleet's client, waiting out an unavailable API server."""

    def __init__(self, client: RestClient, metrics: FleetMetrics, stop: threading.Event,
                 backoff: Backoff) -> None:
        self._client, self._metrics, self._stop, self._backoff = client, metrics, stop, backoff

    def _call(self, action: str, method: str, path: str, **options: Any) -> Any:
        def send() -> Any:
            return self._client.request(method, path, **options)

        return retry.call(action, verb_of(method), send, stop=self._stop,
                          metrics=self._metrics, backoff=self._backoff)

    def list(self, label_selector: str) -> list[JSON]:
        """The nodes matching `label_selector`."""
        answer = self._call(f"list nodes {label_selector}", "GET", NODES,
                            query={"labelSelector": label_selector})
        return list(answer.get("items") or [])

    def ensure(self, body: JSON) -> str:
        """Create the node unless it exists; its UID either way (an existing node of
        this fleet is adopted as it is: a restarted fleet writes nothing for it).
        NotOurs when a node of that name exists without the fleet's label."""
        name, prefix = body["metadata"]["name"], body["metadata"]["labels"][FLEET_LABEL]
        try:
            created = self._call(f"create node {name}", "POST", NODES, body=body)
            return self._set_status(created, body["status"])
        except ApiStatusError as exc:
            if exc.status != 409:
                raise
        existing = self._get(name)
        if not is_ours(existing, prefix):
            raise NotOurs(existing, prefix)
        return str(existing["metadata"]["uid"])

    def _set_status(self, created: JSON, status: Mapping[str, Any]) -> str:
        """Nodes created with a status keep it on a real API server; where the server
        dropped it (no Ready condition), write it once (kwok keeps it up after that)."""
        name, uid = created["metadata"]["name"], str(created["metadata"]["uid"])
        if (created.get("status") or {}).get("conditions"):
            return uid
        self._call(f"write status of node {name}", "PATCH",
                   f"{NODES}/{quote(name)}/status", body={"status": dict(status)},
                   content_type="application/merge-patch+json")
        return uid

    def _get(self, name: str) -> JSON:
        node: JSON = self._call(f"get node {name}", "GET", f"{NODES}/{quote(name)}")
        return node

    def owned_uid(self, name: str, prefix: str) -> str | None:
        """The UID of node `name` if it is this fleet's, None if it is gone; NotOurs
        when it exists without the fleet's label."""
        try:
            node = self._get(name)
        except ApiStatusError as exc:
            if exc.status != 404:
                raise
            return None
        if not is_ours(node, prefix):
            raise NotOurs(node, prefix)
        return str(node["metadata"]["uid"])

    def delete(self, name: str, uid: str) -> bool:
        """Delete the node if it is still the object `uid` (gone already is fine); False
        when another object replaced it after the caller checked it (left alone)."""
        options = {"apiVersion": "v1", "kind": "DeleteOptions",
                   "preconditions": {"uid": uid}}
        try:
            self._call(f"delete node {name}", "DELETE", f"{NODES}/{quote(name)}",
                       body=options)
        except ApiStatusError as exc:
            if exc.status == 409:  # the uid precondition failed
                return False
            if exc.status != 404:
                raise
        return True
