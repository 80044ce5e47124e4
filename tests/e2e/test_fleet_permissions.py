"""The fleet's ServiceAccount with only what deploy/fleet grants, enforced by the real API
server: RBAC lets it write any Node and any ResourceSlice, its admission policies hold it
to the Nodes labelled with its prefix and its own driver's slices of them. Each forged
request is sent as cluster-admin impersonating the ServiceAccount, with dryRun."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from kubernetes import client

from .conftest import REPO
from .controlplane import ControlPlane
from .forged import JSON, MERGE_PATCH, NODES, SLICES, Caller, denied, node_body, slice_body

MANIFESTS = ("namespace.yaml", "serviceaccount.yaml", "rbac.yaml", "admission-policy.yaml")
USER = "system:serviceaccount:simdra-fleet:simdra-fleet"
PREFIX = "simdra-fleet"  # deploy/fleet's --node-prefix
DRIVER = "dra.example.com"  # and --driver-name
LABEL = "simdra.dev/fleet"
OURS = f"{PREFIX}-e2e-policy"  # a Node the fleet made
REAL = "e2e-fleet-policy-real"  # one it did not
OTHER_DRIVER = "other.example.com"


@pytest.fixture(scope="module")
def fleet(control_plane: ControlPlane) -> Iterator[Caller]:
    """deploy/fleet's permissions and policies applied, one Node of the fleet's and one
    real, and a slice of another driver on the fleet's; the fleet as caller."""
    for manifest in MANIFESTS:
        control_plane.kubectl("apply", "-f", str(REPO / "deploy/fleet" / manifest))
    api = control_plane.api_client()
    core, resource = client.CoreV1Api(api), client.ResourceV1Api(api)
    core.create_node(node_body(OURS, {LABEL: PREFIX}))
    core.create_node(node_body(REAL, {"role": "db"}))
    resource.create_resource_slice(slice_body("e2e-fleet-other-driver", OTHER_DRIVER, OURS))
    try:
        yield Caller(control_plane, user=USER)
    finally:
        resource.delete_resource_slice("e2e-fleet-other-driver")
        for name in (OURS, REAL):
            core.delete_node(name)
        for manifest in ("admission-policy.yaml", "rbac.yaml"):
            control_plane.kubectl("delete", "-f", str(REPO / "deploy/fleet" / manifest),
                                  "--ignore-not-found")


def _stored_slice(cp: ControlPlane, name: str) -> JSON:
    raw = client.ResourceV1Api(cp.api_client()).read_resource_slice(
        name, _preload_content=False)
    return dict(json.loads(raw.data))


@pytest.mark.parametrize("labels", [{}, {LABEL: "other-fleet"}], ids=["none", "another"])
def test_the_fleet_cannot_create_a_node_without_its_label(fleet: Caller,
                                                          labels: dict[str, str]) -> None:
    answer = fleet.refused("POST", NODES, node_body(f"{PREFIX}-e2e-forged", labels))
    assert denied(answer, f"the simdra fleet may only create Nodes labelled {LABEL}={PREFIX}, "
                          f"not node '{PREFIX}-e2e-forged'"), answer


@pytest.mark.parametrize("method", ["PATCH", "DELETE"])
def test_the_fleet_cannot_patch_or_delete_a_node_it_did_not_label(fleet: Caller,
                                                                  method: str) -> None:
    # Even a patch that would add the label: the node was not the fleet's before it.
    body = {"metadata": {"labels": {LABEL: PREFIX}}} if method == "PATCH" else None
    answer = fleet.refused(method, f"{NODES}/{REAL}", body, content_type=MERGE_PATCH)
    assert denied(answer, "the simdra fleet may only change or delete Nodes labelled "
                          f"{LABEL}={PREFIX}, not node '{REAL}'"), answer


def test_the_fleet_cannot_strip_its_label(fleet: Caller) -> None:
    answer = fleet.refused("PATCH", f"{NODES}/{OURS}", {"metadata": {"labels": {LABEL: None}}},
                           content_type=MERGE_PATCH)
    assert denied(answer, f"the simdra fleet may not remove or change the label {LABEL} "
                          f"of node '{OURS}'"), answer


def test_the_fleet_writes_only_its_drivers_slices(control_plane: ControlPlane,
                                                  fleet: Caller) -> None:
    message = (f"the simdra fleet of driver '{DRIVER}' may only write ResourceSlices of that "
               f"driver, not slices of driver '{OTHER_DRIVER}'")
    create = fleet.refused("POST", SLICES, slice_body("e2e-fleet-forged", OTHER_DRIVER, OURS))
    assert denied(create, message), create
    path = f"{SLICES}/e2e-fleet-other-driver"
    update = fleet.refused("PUT", path, _stored_slice(control_plane, "e2e-fleet-other-driver"))
    assert denied(update, message), update
    delete = fleet.refused("DELETE", path)
    assert denied(delete, message), delete


def test_the_fleet_writes_no_slice_of_a_real_node(fleet: Caller) -> None:
    answer = fleet.refused("POST", SLICES, slice_body("e2e-fleet-forged", DRIVER, REAL))
    assert denied(answer, f"the simdra fleet may only write ResourceSlices of its nodes "
                          f"({PREFIX}-...), not slices of node '{REAL}'"), answer


def test_the_fleet_still_does_everything_it_needs(fleet: Caller) -> None:
    # After a refusal: the policies are in effect, so a pass is theirs to give.
    fleet.refused("POST", NODES, node_body(f"{PREFIX}-e2e-forged"))
    fleet.refused("POST", SLICES, slice_body("e2e-fleet-forged", DRIVER, REAL))
    allowed = {
        "create its node": fleet.send("POST", NODES,
                                      node_body(f"{PREFIX}-e2e-new", {LABEL: PREFIX})),
        "patch its node": fleet.send("PATCH", f"{NODES}/{OURS}",
                                     {"metadata": {"annotations": {"e2e": "1"}}},
                                     content_type=MERGE_PATCH),
        "write its node's status": fleet.send(
            "PATCH", f"{NODES}/{OURS}/status",
            {"status": {"capacity": {"pods": "110"}}}, content_type=MERGE_PATCH),
        "delete its node": fleet.send("DELETE", f"{NODES}/{OURS}"),
        "create its slice": fleet.send("POST", SLICES,
                                       slice_body("e2e-fleet-own", DRIVER, OURS)),
    }
    refused = {what: answer for what, answer in allowed.items() if answer[0] >= 300}
    assert refused == {}, refused
