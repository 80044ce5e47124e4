"""What a Kubernetes release does differently, for the scenarios whose outcome depends
on it: each difference named once, with the release that has it."""

from __future__ import annotations

import pytest

from .controlplane import ControlPlane


def capacity_requests_allocate(cp: ControlPlane) -> bool:
    """Whether this release's scheduler allocates a request that asks for capacity.

    1.34's (DRAConsumableCapacity, alpha) checks the request against the slice's device at
    the request's own device index, not against the candidate device (`allocateDevice` in
    k8s.io/dynamic-resource-allocation v0.34; fixed in 1.35): a NIC share asking for
    bandwidth stays Pending ("cannot allocate all claims") unless the slice's device at
    that index happens to have room. A share that asks for nothing gets the default."""
    return bool(cp.features().get("DRAConsumableCapacity")) and cp.minor() >= 35


def require_capacity_requests(cp: ControlPlane) -> None:
    """Skip, naming the release, where a capacity request cannot be allocated."""
    if not cp.features().get("DRAConsumableCapacity"):
        pytest.skip(f"Kubernetes {cp.version()} has DRAConsumableCapacity off or lacks it")
    if not capacity_requests_allocate(cp):
        pytest.skip(f"Kubernetes {cp.version()}: its scheduler checks a capacity request "
                    "against the wrong device of the slice (fixed in 1.35)")


def counters_with_devices(cp: ControlPlane) -> bool:
    """Whether this release wants a counter set in the slice of the devices that consume
    it (1.34) rather than in a slice of its own (1.35+, which forbid mixing them)."""
    return cp.minor() < 35


def allocation_keeps_tolerations(cp: ControlPlane) -> bool:
    """Whether this release's scheduler copies a request's tolerations into the allocation
    result, which is what its device-taint eviction controller reads: 1.34's does not
    (k8s.io/dynamic-resource-allocation v0.34; fixed in 1.35), so it evicts a pod whose
    claim tolerates a NoExecute taint."""
    return cp.minor() >= 35


def health_names_generated_claims(cp: ControlPlane) -> bool:
    """Whether this release's kubelet shows device health in the status of a pod whose
    claim was made from a template: 1.34's matches the pod's claim entry by the
    ResourceClaim's own name (pkg/kubelet/cm/dra UpdateAllocatedResourcesStatus; fixed in
    1.35), so only a claim named like the pod's entry gets it."""
    return cp.minor() >= 35


def status_survives_a_second_prepare(kubelet_minor: int) -> bool:
    """Whether a kubelet of this minor release can write the status of a pod whose claim
    it prepared again after its restart (a reboot): 1.35's lists the claim's CDI device
    twice in the container's `allocatedResourcesStatus`, once from its checkpoint and once
    from the new answer, and the API server refuses the whole status ("Duplicate value"),
    so the pod's new container never shows in the API (seen with v1.35.4; 1.36.3 and
    1.37.2 write it)."""
    return kubelet_minor >= 36
