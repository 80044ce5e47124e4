"""What the kubelet says its pods use: the evidence reconciliation needs before it may
free a prepared claim (`simdra._driver.claims.reconciler`). The kubelet's PodResources API
answers it (`simdra._driver.kubelet.pod_resources`); this module is the claims lane's view of
that answer, so the lane never imports the kubelet's wire types, and holds the rules
that say when an answer may free a record (`KubeletUsage.unknown`, `KubeletUsage.uses`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from simdra._driver.claims.reconcile_plan import DeviceKey, RecordedClaim

PodKey = tuple[str, str]  # (namespace, name): how PodResources names a pod (no UID in List)


class KubeletUnavailable(Exception):
    """The kubelet could not be asked (no socket, no answer, an error): its pods' use of
    every claim is unknown, so nothing may be freed."""


@dataclass(frozen=True)
class KubeletUsage:
    """One answer of the kubelet: the pods it lists, and the devices of this driver it
    lists for their containers' claims."""

    pods: frozenset[PodKey]
    devices: frozenset[DeviceKey]  # (pool, device, shareID) of this driver
    lists_dra: bool  # any container listed any DRA resource at all

    def unknown(self, own_pod: PodKey | None) -> str | None:
        """Why this answer cannot prove that a record is unused, or None when it can.

        Only positive knowledge frees. The kubelet lists this plugin's own pod once it
        has synced its pods after a (re)start, and only the node's own kubelet lists it,
        so without it the answer may be an empty early one or another node's. And an
        answer with no DRA resource for any container is what a kubelet with its
        KubeletPodResourcesDynamicResources gate off, or with its claim cache lost,
        gives too: it proves nothing while any record exists, and one does (the record
        being judged)."""
        if own_pod is None:
            return ("this plugin's pod is not known (--pod-namespace and --pod-name unset), "
                    "so the kubelet's answer cannot be checked")
        if own_pod not in self.pods:
            return (f"the kubelet does not list this plugin's pod {own_pod[0]}/{own_pod[1]} "
                    "(not synced since its restart, or another kubelet's socket)")
        if not self.lists_dra:
            return ("the kubelet lists no DRA resources for any container (its "
                    "KubeletPodResourcesDynamicResources gate off, its claim cache lost, "
                    "or not yet synced)")
        return None

    def uses(self, record: RecordedClaim) -> bool:
        """True when a container on the node uses any of the record's devices, under
        whatever claim name.

        Devices, not the claim's name, decide: the kubelet lists a claim's devices only
        once it is prepared (a claim it could not prepare yet is listed without devices:
        its claim cache entry starts with no devices per driver and takes them from the
        NodePrepareResources answer, pkg/kubelet/cm/dra/claiminfo.go),
        so a claim deleted and made again under the same name, pending on the record's
        device or running on another one, is another claim and does not keep the stale
        record; and a device the kubelet lists for any claim is in use, whatever the API
        says. A share ID is compared only where both sides have one (a kubelet may list
        none), which errs on the side of in use."""
        return any(_matches(device, self.devices) for device in record.devices)


def _matches(device: DeviceKey, listed: frozenset[DeviceKey]) -> bool:
    pool, name, share = device
    return any((p, n) == (pool, name) and (s is None or share is None or s == share)
               for p, n, s in listed)


class KubeletUsageSource(Protocol):
    """Asks the kubelet which claims its pods use now."""

    def usage(self) -> KubeletUsage:
        """The kubelet's current answer; KubeletUnavailable when it cannot be had."""
        ...
