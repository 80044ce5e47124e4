"""DRAPlugin servicers (v1 and v1beta1): NodePrepareResources / NodeUnprepareResources.

Both versions call the same ClaimPreparer, which serializes its own calls (after reading
the claims, so that no call waits on the API server behind another). Whatever the
preparer does, the kubelet gets exactly one map entry per requested claim (api-facts 2.3):
a preparer exception for the whole batch becomes a per-claim error, and the process
keeps serving.

The translation between the DRA node protobuf messages and the preparer's types is
pure (`claim_refs`, `prepare_response`, `unprepare_response`). v1 and v1beta1 messages
share field names and numbers, so one function serves both; the caller passes the
generated module. Only v1 (1.35+) has Device.share_id.

The sockets serve before the plugin's preparer exists (`simdra._driver.kubelet.early`):
until then the servicers call a `DeferredPreparer`, whose calls wait for the real one.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Mapping
from types import ModuleType
from typing import Any

import grpc

from simdra._driver.claims.types import (
    ClaimPreparer,
    ClaimRef,
    PreparedDevice,
    PrepareResult,
    UnprepareResult,
)
from simdra._driver.kubelet.gen import (
    dra_v1_pb2,
    dra_v1_pb2_grpc,
    dra_v1beta1_pb2,
    dra_v1beta1_pb2_grpc,
)
from simdra._driver.kubelet.services import advertised_name

log = logging.getLogger(__name__)

# The most claims one NodePrepareResources or NodeUnprepareResources may name. The
# kubelet sends the claims of one pod per call, a few in practice; without a cap, one
# request of 15,000 claims costs 15,000 API reads and log lines. A call over it is
# refused whole, before any claim is read.
MAX_CLAIMS_PER_CALL = 256


class DRAPluginServicer:
    """Shared implementation of both DRAPlugin versions."""

    version = ""
    _pb: ModuleType
    _share_ids = False

    def __init__(self, preparer: ClaimPreparer) -> None:
        self._preparer = preparer

    def NodePrepareResources(self, request: Any, context: grpc.ServicerContext) -> Any:
        """Prepare the requested claims."""
        self._check_size("NodePrepareResources", request, context)
        claims = claim_refs(request.claims)
        if log.isEnabledFor(logging.DEBUG):  # the names are joined only when shown
            log.debug("%s NodePrepareResources: %s", self.version, ", ".join(map(str, claims)))
        results = self._run_prepare(claims)
        response = prepare_response(
            self._pb, claims, results, share_ids=self._share_ids
        )
        _log_errors("prepare", self.version, claims, response)
        return response

    def NodeUnprepareResources(self, request: Any, context: grpc.ServicerContext) -> Any:
        """Unprepare the requested claims."""
        self._check_size("NodeUnprepareResources", request, context)
        claims = claim_refs(request.claims)
        if log.isEnabledFor(logging.DEBUG):
            log.debug("%s NodeUnprepareResources: %s", self.version, ", ".join(map(str, claims)))
        results = self._run_unprepare(claims)
        response = unprepare_response(self._pb, claims, results)
        _log_errors("unprepare", self.version, claims, response)
        return response

    def _check_size(self, method: str, request: Any, context: grpc.ServicerContext) -> None:
        """Refuse a call over MAX_CLAIMS_PER_CALL with INVALID_ARGUMENT: it is the
        request that is wrong, and the same request sent again never fits (gRPC clients
        may retry RESOURCE_EXHAUSTED). One line, naming no claim."""
        count = len(request.claims)
        if count <= MAX_CLAIMS_PER_CALL:
            return
        text = f"{self.version} {method}: {count} claims, at most {MAX_CLAIMS_PER_CALL} per call"
        log.warning("refused %s", text)
        context.abort(grpc.StatusCode.INVALID_ARGUMENT, text)

    def _run_prepare(self, claims: list[ClaimRef]) -> dict[str, PrepareResult]:
        try:
            return dict(self._preparer.prepare(claims))
        except Exception as err:
            log.exception("prepare of %d claim(s) failed as a whole", len(claims))
            errors = batch_failure(claims, "prepare", err)
            return {uid: PrepareResult(error=text) for uid, text in errors.items()}

    def _run_unprepare(self, claims: list[ClaimRef]) -> dict[str, UnprepareResult]:
        try:
            return dict(self._preparer.unprepare(claims))
        except Exception as err:
            log.exception("unprepare of %d claim(s) failed as a whole", len(claims))
            errors = batch_failure(claims, "unprepare", err)
            return {uid: UnprepareResult(error=text) for uid, text in errors.items()}


def _log_errors(step: str, version: str, claims: list[ClaimRef], response: Any) -> None:
    for claim in claims:
        error = response.claims[claim.uid].error
        if error:
            log.warning("%s %s claim %s: %s", version, step, claim, error)


class DRAPluginV1(DRAPluginServicer, dra_v1_pb2_grpc.DRAPluginServicer):
    """k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin (kubelet 1.34+); sends share_id."""

    version = "v1"
    _pb = dra_v1_pb2
    _share_ids = True


class DRAPluginV1beta1(DRAPluginServicer, dra_v1beta1_pb2_grpc.DRAPluginServicer):
    """k8s.io.kubelet.pkg.apis.dra.v1beta1.DRAPlugin (kubelet 1.32+); has no share_id."""

    version = "v1beta1"
    _pb = dra_v1beta1_pb2
    _share_ids = False


def dra_methods() -> list[tuple[str, str]]:
    """(advertised service name, method) of every DRAPlugin method served, v1 first:
    ("v1.DRAPlugin", "NodePrepareResources"), ..."""
    return [
        (advertised_name(service.full_name), method.name)
        for pb in (dra_v1_pb2, dra_v1beta1_pb2)
        for service in (pb.DESCRIPTOR.services_by_name["DRAPlugin"],)
        for method in service.methods
    ]


def add_dra_services(server: grpc.Server, preparer: ClaimPreparer) -> list[str]:
    """Register both DRAPlugin versions; return their full service names, v1 first."""
    dra_v1_pb2_grpc.add_DRAPluginServicer_to_server(DRAPluginV1(preparer), server)
    dra_v1beta1_pb2_grpc.add_DRAPluginServicer_to_server(DRAPluginV1beta1(preparer), server)
    return [
        dra_v1_pb2.DESCRIPTOR.services_by_name["DRAPlugin"].full_name,
        dra_v1beta1_pb2.DESCRIPTOR.services_by_name["DRAPlugin"].full_name,
    ]


# --- the preparer until the plugin's is there ---------------------------------------


class DeferredPreparer:
    """A ClaimPreparer whose calls wait until `set()` gave it the real one; after
    `fail()`, they fail (the DRA service answers each claim with the reason)."""

    def __init__(self) -> None:
        self._ready = threading.Event()
        self._target: ClaimPreparer | None = None
        self._failure = "the plugin did not start"

    def set(self, preparer: ClaimPreparer) -> None:
        """Hand every call, waiting or later, to `preparer`."""
        self._target = preparer
        self._ready.set()

    def fail(self, reason: str) -> None:
        """The preparer will never come: waiting and later calls fail with `reason`."""
        self._failure = reason
        self._ready.set()

    def prepare(self, claims: list[ClaimRef]) -> dict[str, PrepareResult]:
        """The real preparer's prepare, once there is one."""
        return self._wait().prepare(claims)

    def unprepare(self, claims: list[ClaimRef]) -> dict[str, UnprepareResult]:
        """The real preparer's unprepare, once there is one."""
        return self._wait().unprepare(claims)

    def _wait(self) -> ClaimPreparer:
        self._ready.wait()
        if self._target is None:
            raise RuntimeError(self._failure)
        return self._target


# --- messages <-> the preparer's types (pure) --------------------------------------


def claim_refs(claims: Iterable[Any]) -> list[ClaimRef]:
    """Request `Claim` messages -> ClaimRefs, in request order, each UID once.

    The answer holds one map entry per UID, so a claim named twice (two pod claim
    entries may point at one ResourceClaim) is worked on and answered once; otherwise
    its entry would list every device once per mention.
    """
    refs: dict[str, ClaimRef] = {}
    for c in claims:
        refs.setdefault(c.uid, ClaimRef(namespace=c.namespace, name=c.name, uid=c.uid))
    return list(refs.values())


def batch_failure(claims: Iterable[ClaimRef], step: str, err: BaseException) -> dict[str, str]:
    """Per-claim error texts for a failure of a whole prepare/unprepare batch."""
    reason = str(err) or type(err).__name__
    return {c.uid: f"{step} claim {c} failed: {reason}" for c in claims}


def missing_result(claim: ClaimRef, step: str) -> str:
    """Error text for a claim the preparer gave no answer for."""
    return f"{step} claim {claim} failed: the driver returned no result for it"


def _drop_unknown(requested: list[ClaimRef], results: Mapping[str, object], step: str) -> None:
    # The kubelet rejects a whole response that names an unrequested UID, so such
    # entries are dropped rather than sent.
    wanted = {c.uid for c in requested}
    for uid in results:
        if uid not in wanted:
            log.warning("%s: dropping result for claim UID %s that was not requested", step, uid)


def device_message(pb: ModuleType, device: PreparedDevice, share_ids: bool) -> Any:
    """PreparedDevice -> `Device`; share_id only when the API version has it."""
    msg = pb.Device(
        request_names=list(device.request_names),
        pool_name=device.pool_name,
        device_name=device.device_name,
        cdi_device_ids=list(device.cdi_device_ids),
    )
    if share_ids and device.share_id is not None:
        msg.share_id = device.share_id
    return msg


def prepare_response(
    pb: ModuleType,
    requested: list[ClaimRef],
    results: Mapping[str, PrepareResult],
    *,
    share_ids: bool,
) -> Any:
    """Build `NodePrepareResourcesResponse` with exactly one entry per requested claim."""
    _drop_unknown(requested, results, "prepare")
    response = pb.NodePrepareResourcesResponse()
    for claim in requested:
        result = results.get(claim.uid)
        entry = response.claims[claim.uid]
        if result is None:
            entry.error = missing_result(claim, "prepare")
        elif result.error:
            entry.error = result.error
        else:
            entry.devices.extend(device_message(pb, d, share_ids) for d in result.devices)
    return response


def unprepare_response(
    pb: ModuleType, requested: list[ClaimRef], results: Mapping[str, UnprepareResult]
) -> Any:
    """Build `NodeUnprepareResourcesResponse` with exactly one entry per requested claim."""
    _drop_unknown(requested, results, "unprepare")
    response = pb.NodeUnprepareResourcesResponse()
    for claim in requested:
        result = results.get(claim.uid)
        entry = response.claims[claim.uid]
        entry.error = missing_result(claim, "unprepare") if result is None else result.error
    return response
