"""What the kubelet says its pods use: the evidence reconciliation needs before it may
free a prepared claim (`driver.claims.reconciler`). The kubelet's PodResources API
answers it (`driver.kubelet.pod_resources`); this module is the claims lane's view of
that answer, so the lane never imports the kubelet's wire types.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from driver.claims.reconcile_plan import DeviceKey, RecordedClaim


class KubeletUnavailable(Exception):
    """The kubelet could not be asked (no socket, no answer, an error): its pods' use of
    every claim is unknown, so nothing may be freed."""


@dataclass(frozen=True)
class KubeletUsage:
    """One answer of the kubelet: the claims its pods' containers use, and the devices
    of this driver it lists for them."""

    claims: frozenset[tuple[str, str]]  # (namespace, name)
    devices: frozenset[DeviceKey]  # (pool, device, shareID) of this driver
    lists_dra: bool  # any container listed any DRA resource at all

    def uses(self, record: RecordedClaim) -> bool:
        """True when a pod on the node uses the record's claim by name, or any of its
        devices: a claim deleted and made again under the same name, or a device
        another claim got meanwhile, both count as in use (the safe side)."""
        ref = record.ref
        return (ref.namespace, ref.name) in self.claims or bool(record.devices & self.devices)


class KubeletUsageSource(Protocol):
    """Asks the kubelet which claims its pods use now."""

    def usage(self) -> KubeletUsage:
        """The kubelet's current answer; KubeletUnavailable when it cannot be had."""
        ...
