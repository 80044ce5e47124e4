"""What the fleet's requests were, as the API server counted them: by verb and resource,
and the answers that were not a success.

`apiserver_request_total` has no label for who asked, but priority and fairness counts
every request by the FlowSchema that matched it. So the fleet's service account gets one
FlowSchema per (verb, resource) it could use on Nodes and slices, ahead of a catch-all:
`apiserver_flowcontrol_dispatched_requests_total{flow_schema=...}` then says, per verb and
resource, what the fleet alone sent. Answer codes are in `apiserver_request_total` only, for
the whole server: its writes during the fleet's start show what else the server did for
the fleet's Nodes (kwok's leases and status patches).
"""

from __future__ import annotations

import re
from typing import Any

PREFIX = "simdra-fleet"
VERBS = ("get", "list", "watch", "create", "update", "patch", "delete", "deletecollection")
# (schema name part, API group, resource as a FlowSchema names it)
RESOURCES = (("nodes", "", "nodes"), ("nodestatus", "", "nodes/status"),
             ("slices", "resource.k8s.io", "resourceslices"))
SAMPLE = re.compile(r'^(\w+)\{(.*)\} ([0-9.e+-]+)$')
LABEL = re.compile(r'(\w+)="([^"]*)"')


def flow_schemas(namespace: str, name: str, prefix: str = PREFIX) -> list[dict[str, Any]]:
    """The catch-all schema `prefix` and one per (verb, resource), matched before it."""
    subject = [{"kind": "ServiceAccount",
                "serviceAccount": {"name": name, "namespace": namespace}}]
    every = {"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"], "clusterScope": True,
             "namespaces": ["*"]}
    out = [_schema(prefix, 100, subject, [every],
                   [{"verbs": ["*"], "nonResourceURLs": ["*"]}])]
    for short, group, resource in RESOURCES:
        for verb in VERBS:
            rule = {"verbs": [verb], "apiGroups": [group], "resources": [resource],
                    "clusterScope": True}
            out.append(_schema(f"{prefix}-{verb}-{short}", 90, subject, [rule], []))
    return out


def _schema(name: str, precedence: int, subjects: list[dict[str, Any]],
            resource_rules: list[dict[str, Any]],
            non_resource_rules: list[dict[str, Any]]) -> dict[str, Any]:
    rule: dict[str, Any] = {"subjects": subjects, "resourceRules": resource_rules}
    if non_resource_rules:
        rule["nonResourceRules"] = non_resource_rules
    return {"metadata": {"name": name},
            "spec": {"matchingPrecedence": precedence,  # before the service-accounts schema
                     "priorityLevelConfiguration": {"name": "workload-high"},
                     "distinguisherMethod": {"type": "ByUser"}, "rules": [rule]}}


def samples(text: str, name: str) -> list[tuple[dict[str, str], float]]:
    """Every sample of metric `name` in Prometheus text: (labels, value)."""
    out = []
    for line in text.splitlines():
        if not line.startswith(name + "{"):
            continue
        found = SAMPLE.match(line)
        if found and found[1] == name:
            out.append((dict(LABEL.findall(found[2])), float(found[3])))
    return out


def by_schema(text: str, prefix: str = PREFIX) -> dict[str, float]:
    """The dispatched requests of the schemas `flow_schemas` made under `prefix`, by
    their names less the prefix ('other' for the catch-all)."""
    out: dict[str, float] = {}
    for labels, value in samples(text, "apiserver_flowcontrol_dispatched_requests_total"):
        schema = labels.get("flow_schema", "")
        if schema == prefix or schema.startswith(prefix + "-"):
            key = schema.removeprefix(prefix).removeprefix("-") or "other"
            out[key] = out.get(key, 0.0) + value
    return out


def codes(text: str) -> dict[str, float]:
    """Every client's requests by `verb resource[/sub] code`."""
    out: dict[str, float] = {}
    for labels, value in samples(text, "apiserver_request_total"):
        if not labels.get("resource"):
            continue
        sub = f"/{labels['subresource']}" if labels.get("subresource") else ""
        key = f"{labels.get('verb', '').lower()} {labels['resource']}{sub} {labels.get('code')}"
        out[key] = out.get(key, 0.0) + value
    return out


def writes(by_code: dict[str, float]) -> dict[str, float]:
    """`codes`' writes by `verb resource[/sub]` (the metric's verbs are HTTP's: a create
    is a POST, an update a PUT)."""
    out: dict[str, float] = {}
    for key, value in by_code.items():
        verb_resource = key.rsplit(" ", 1)[0]
        if verb_resource.split(" ")[0] in ("post", "put", "patch", "delete", "apply"):
            out[verb_resource] = out.get(verb_resource, 0.0) + value
    return out


def delta(after: dict[str, float], before: dict[str, float]) -> dict[str, float]:
    """after - before, the keys that changed only."""
    changed = {k: v - before.get(k, 0.0) for k, v in after.items()}
    return {k: v for k, v in sorted(changed.items()) if v}


def line(counts: dict[str, float], nodes: int) -> str:
    """`create-nodes 1.00, create-slices 1.18, ...` per node, largest first."""
    ranked = sorted(counts.items(), key=lambda kv: -kv[1])
    return ", ".join(f"{k} {v:.0f} ({v / nodes:.2f}/node)" for k, v in ranked) or "none"
