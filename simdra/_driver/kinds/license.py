"""simdra's license kind: seats of a node-locked software license, devices that need no
node-side work (Kubernetes 1.37's optional node operations, KEP-5945).

A seat is pure accounting: the scheduler hands out at most as many as the node has, by
allocating the claim, and the workload proves its entitlement with that allocation (the
claim it can read from the API), not with anything on the node. There is no device node,
no environment to inject and nothing to undo, so the kind declares
`skip_node_operations = ("*",)`: its slices carry `spec.skipNodeOperations: ["*"]`, and a
1.37 kubelet with the DRAOptionalNodeOperations gate never calls NodePrepareResources or
NodeUnprepareResources for a claim made of seats alone. Where the gate is off (the API
server drops the field) the kubelet calls the plugin as for any device, and the plugin
prepares the seat like any other (a CDI spec with its SIMDRA_DEVICE_* environment), so a
claim works either way. Uses only the public API.
"""

from __future__ import annotations

from simdra._driver.api import JSON, Device, DeviceKind, FakeProfile, stable_uuid

LICENSE_PRODUCT = "Simulated Solver"


def license_seat(driver_name: str, node_name: str, index: int) -> Device:
    """Seat `index` of the node's simulated license (an exclusive device)."""
    name = f"license-{index}"
    spec: JSON = {
        "name": name,
        "attributes": {
            "type": {"string": "license"},
            "product": {"string": LICENSE_PRODUCT},
            "seat": {"int": index},
            "uuid": {"string": stable_uuid(driver_name, node_name, name)},
        },
    }
    return Device(spec=spec)


class LicenseKind(DeviceKind):
    """Seats of a node-locked software license: nothing to set up on the node, so the
    kubelet may skip prepare and unprepare (Kubernetes 1.37, DRAOptionalNodeOperations)."""

    name = "license"
    env_attributes = {"product": "PRODUCT", "seat": "SEAT"}
    skip_node_operations = ("*",)
    profiles = (FakeProfile("license",
                            lambda c, i: license_seat(c.driver_name, c.node_name, i),
                            "license seats that need no node-side work (skipNodeOperations)"),)
