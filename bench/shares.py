"""Allocated NIC-share claims for the node-scale benches, written straight into the API
stand-in as the scheduler would write them: bypassing the allocator keeps setting up
thousands of claims to seconds."""

from __future__ import annotations

import uuid

from simdra._driver.claims.types import ClaimRef
from simdra._driver.testing.allocation.builders import exactly
from simdra._driver.testing.cluster import LocalCluster

NIC_BANDWIDTH = 10_000_000_000  # the fake NIC's capacity
BANDWIDTH_STEP = 8  # its request policy's step


def make_shares(cluster: LocalCluster, count: int, nics: int) -> list[ClaimRef]:
    """`count` allocated claims, each one share of one of the first `nics` NICs, sized
    so that all of them fit the NICs' bandwidth together."""
    template = cluster.create_claim("template", exactly("net", f"nic.{cluster.driver_name}"))
    per_nic = -(-count // nics)
    bandwidth = NIC_BANDWIDTH // per_nic // BANDWIDTH_STEP * BANDWIDTH_STEP
    refs = []
    for i in range(count):
        meta = {"name": f"c-{i}", "namespace": "default", "uid": str(uuid.uuid4())}
        result = {"request": "net", "driver": cluster.driver_name, "pool": cluster.node_name,
                  "device": f"nic-{i % nics}", "shareID": str(uuid.uuid4()),
                  "consumedCapacity": {"bandwidth": str(bandwidth)}}
        cluster.api.put_object("resourceclaims", {
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": meta,
            "spec": template["spec"],
            "status": {"allocation": {"devices": {"results": [result]}}}})
        refs.append(ClaimRef("default", meta["name"], meta["uid"]))
    return refs
