"""The contract between the kubelet-facing gRPC layer and the claim preparer, and the
errors about one claim.

The gRPC servicers (v1 and v1beta1) only translate these types to and from protobuf;
everything else about a claim happens behind `ClaimPreparer`. A ClaimError's text goes
verbatim into the kubelet's per-claim answer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from simdra._driver.core.textlimits import one_line


@dataclass(frozen=True)
class ClaimRef:
    """A claim as the kubelet names it in NodePrepare/NodeUnprepare requests."""

    namespace: str
    name: str
    uid: str

    def __str__(self) -> str:
        # Each value comes from the kubelet (or whoever reached the DRA socket): clipped
        # and on one line, so that no request can make a log line long or forge another.
        return f"{one_line(self.namespace)}/{one_line(self.name)} (uid {one_line(self.uid)})"


@dataclass(frozen=True)
class PreparedDevice:
    """One entry of the prepare answer for a claim."""

    request_names: tuple[str, ...]  # main request names, subrequest suffix already stripped
    pool_name: str
    device_name: str
    cdi_device_ids: tuple[str, ...]  # fully qualified: vendor/class=name
    share_id: str | None = None  # set for allocations of multi-allocatable devices


@dataclass(frozen=True)
class PrepareResult:
    """The answer for one claim: its devices, or an error that explains the failure."""

    devices: tuple[PreparedDevice, ...] = ()
    error: str = ""


@dataclass(frozen=True)
class UnprepareResult:
    """The answer for one claim on unprepare; empty error means success."""

    error: str = ""


class ClaimPreparer(Protocol):
    """What the gRPC layer needs: one result per requested claim UID, never an exception
    for a single bad claim."""

    def prepare(self, claims: list[ClaimRef]) -> dict[str, PrepareResult]:
        """Prepare each claim; the result maps every requested claim UID to its answer."""
        ...

    def unprepare(self, claims: list[ClaimRef]) -> dict[str, UnprepareResult]:
        """Unprepare each claim from persisted state alone; unknown UIDs succeed."""
        ...


class ClaimError(Exception):
    """Something is wrong with one claim; the message names the claim and the problem."""


class ClaimNotFound(ClaimError):
    """The ResourceClaim does not exist (any more) in the API server."""


def claim_label(namespace: str, name: str, uid: str) -> str:
    """How every message names a claim: `ns/name (uid U)`, each value clipped (they come
    from the kubelet or the API server and may be anything) and on one line."""
    return f"claim {one_line(namespace)}/{one_line(name)} (uid {one_line(uid)})"
