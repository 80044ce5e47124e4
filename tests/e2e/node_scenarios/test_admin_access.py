"""Admin access on the real node: the API server admits a claim with adminAccess only in
a namespace labelled for it; there such a claim gets a device another pod's claim
already holds (monitoring reserves nothing), both pods run, and the admin container sees
the device, marked as admin access."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator

import pytest
from kubernetes.client.rest import ApiException

from ..realnode import NAMESPACE, Kube, allocated, exact_request, require_feature, unit_env

GPU = "gpu.dra.example.com"
ADMIN_LABEL = "resource.kubernetes.io/admin-access"
GPU_5 = 'device.attributes["dra.example.com"].index == 5'
# kube-apiserver's refusal (pkg/registry/resource AuthorizedForAdmin, 1.33+).
REFUSAL = (f"admin access to devices requires the `{ADMIN_LABEL}: true` label on the "
           "containing namespace")


@pytest.fixture
def admin_namespace(kube: Kube) -> Iterator[None]:
    """NAMESPACE labelled for admin access (the API server admits adminAccess requests
    only there) for one scenario."""
    kube.cp.kubectl("label", "namespace", NAMESPACE, f"{ADMIN_LABEL}=true", "--overwrite")
    try:
        yield
    finally:
        kube.cp.kubectl("label", "namespace", NAMESPACE, f"{ADMIN_LABEL}-")


def test_node_admin_access_shares_a_used_device(kube: Kube, admin_namespace: None) -> None:
    """gpu-5 held by one pod's claim; a second pod's adminAccess claim gets it too."""
    require_feature(kube.cp, "DRAAdminAccess")
    kube.template("gpu-5", GPU, selector=GPU_5)
    kube.pod("owner", "gpu-5")
    [held] = allocated(kube.claim_of(kube.wait_running("owner")))
    assert held["device"] == "gpu-5"

    kube.claim_template("gpu-5-admin", [exact_request("dev", GPU, GPU_5, adminAccess=True)])
    kube.pod("monitor", "gpu-5-admin")
    claim = kube.claim_of(kube.wait_running("monitor"))
    [result] = allocated(claim)
    assert (result["device"], result.get("adminAccess")) == ("gpu-5", True)
    units = unit_env(kube.env("monitor"))
    assert len(units) == 1, f"expected the env of one device, got {sorted(units)}"
    [unit] = units.values()
    assert unit["NAME"] == "gpu-5"
    assert unit["CLAIM_UID"] == claim["metadata"]["uid"]
    assert unit["ADMIN_ACCESS"] == "true"
    assert "CAPACITY_MEMORY" not in unit  # it reserves nothing
    # The owner keeps running and its own container still sees gpu-5 as its own.
    assert (kube.get_pod("owner") or {}).get("status", {}).get("phase") == "Running"
    [own] = unit_env(kube.env("owner")).values()
    assert own["NAME"] == "gpu-5" and "ADMIN_ACCESS" not in own


def _refused(create: Callable[[], object]) -> str:
    """Call `create`; it must be refused as invalid; the refusal's message."""
    with pytest.raises(ApiException) as refused:
        create()
    body = json.loads(refused.value.body)
    assert (refused.value.status, body.get("reason")) == (422, "Invalid"), body
    return str(body.get("message"))


def test_node_admin_access_refused_without_namespace_label(kube: Kube) -> None:
    """In NAMESPACE without the admin-access label the API server refuses a claim and a
    claim template that ask for adminAccess, naming the field and the label; once the
    namespace has the label it admits the very same claim."""
    require_feature(kube.cp, "DRAAdminAccess")
    labels = kube.core.read_namespace(NAMESPACE).metadata.labels or {}
    assert ADMIN_LABEL not in labels, f"{NAMESPACE} is labelled {ADMIN_LABEL} already"
    requests = [exact_request("dev", GPU, GPU_5, adminAccess=True)]

    for what, create in (
        ("ResourceClaim", lambda: kube.claim("admin-unlabelled", requests)),
        ("ResourceClaimTemplate", lambda: kube.claim_template("admin-unlabelled", requests)),
    ):
        message = _refused(create)
        assert REFUSAL in message and "requests[0].adminAccess" in message, (what, message)
    assert not kube.resource.list_namespaced_resource_claim(NAMESPACE).items
    assert not kube.resource.list_namespaced_resource_claim_template(NAMESPACE).items

    kube.cp.kubectl("label", "namespace", NAMESPACE, f"{ADMIN_LABEL}=true", "--overwrite")
    try:
        claim = kube.claim("admin-unlabelled", requests)
        assert claim["spec"]["devices"]["requests"][0]["exactly"]["adminAccess"] is True
    finally:
        kube.cp.kubectl("label", "namespace", NAMESPACE, f"{ADMIN_LABEL}-")
