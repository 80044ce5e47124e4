"""Where the deployment files are, and small lookups over rendered objects."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

JSON = dict[str, Any]

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
# Every overlay in the tree: adding one needs no edit here.
OVERLAYS = tuple(sorted(f"overlays/{k.parent.name}"
                        for k in (DEPLOY / "overlays").glob("*/kustomization.yaml")))
KUSTOMIZATIONS = ("base", *OVERLAYS, "examples", "fleet")
# The Helm chart, and the values files that make it render what an overlay renders.
HELM_CHART = DEPLOY / "helm" / "simdra"
HELM_VALUES = DEPLOY / "helm" / "values"
# Chart rendering (a name like an overlay's) -> (values files, the overlay it equals).
HELM_RENDERINGS = {
    "helm/default": ((), "overlays/fake"),
    "helm/sysfs": (("sysfs.yaml",), "overlays/sysfs"),
    "helm/sysfs-nvidia": (("sysfs-nvidia.yaml",), "overlays/sysfs-nvidia"),
    "helm/fake-inventory": (("fake-inventory.yaml",), "overlays/fake-inventory"),
    "helm/fake-claim-status": (("fake-claim-status.yaml",), "overlays/fake-claim-status"),
}
# Everything that installs the plugin: each passes the same deploy checks.
DEPLOYMENTS = (*OVERLAYS, *HELM_RENDERINGS)
# Opt-in features (Kustomize components) and the overlays that turn each one on.
CLAIM_STATUS_COMPONENT = "components/claim-status"
CLAIM_STATUS_OVERLAYS = ("overlays/fake-claim-status", "helm/fake-claim-status")
PLUGIN_ROLE = "simdra-kubelet-plugin"
CLAIM_STATUS_ROLE = "simdra-kubelet-plugin-claim-status"
# Not Kubernetes objects: applied by hand on OpenShift only (validated with our own schema).
OPENSHIFT_ONLY = ("quota/openshift-clusterresourcequota.yaml",)
# The Kubernetes releases simdra supports (docs/operator.md "Deploy to a cluster").
K8S_VERSIONS = ("1.34.0", "1.35.0", "1.36.0", "1.37.0")


def of_kind(objects: Iterable[JSON], kind: str) -> list[JSON]:
    """The objects of one kind, in order."""
    return [obj for obj in objects if obj["kind"] == kind]


def one(objects: Iterable[JSON], kind: str, name: str | None = None) -> JSON:
    """The single object of `kind` (and `name`); fails the test if there is not exactly one."""
    found = [o for o in of_kind(objects, kind) if name is None or o["metadata"]["name"] == name]
    assert len(found) == 1, f"expected one {kind} {name or ''}, found {len(found)}"
    return found[0]


def env_of(container: JSON) -> dict[str, JSON]:
    """A container's env entries by variable name."""
    return {entry["name"]: entry for entry in container.get("env") or []}
