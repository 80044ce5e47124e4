"""DRAPlugin servicers (v1 and v1beta1): NodePrepareResources / NodeUnprepareResources.

Both versions call the same ClaimPreparer, which serializes its own calls (after reading
the claims, so that no call waits on the API server behind another). Whatever the
preparer does, the kubelet gets exactly one map entry per requested claim (api-facts 2.3):
a preparer exception for the whole batch becomes a per-claim error, and the process
keeps serving.
"""

from __future__ import annotations

import logging
from types import ModuleType
from typing import Any

import grpc

from simdra._driver.claims.types import ClaimPreparer, ClaimRef, PrepareResult, UnprepareResult
from simdra._driver.kubelet import dra_convert
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
        claims = dra_convert.claim_refs(request.claims)
        if log.isEnabledFor(logging.DEBUG):  # the names are joined only when shown
            log.debug("%s NodePrepareResources: %s", self.version, ", ".join(map(str, claims)))
        results = self._run_prepare(claims)
        response = dra_convert.prepare_response(
            self._pb, claims, results, share_ids=self._share_ids
        )
        _log_errors("prepare", self.version, claims, response)
        return response

    def NodeUnprepareResources(self, request: Any, context: grpc.ServicerContext) -> Any:
        """Unprepare the requested claims."""
        self._check_size("NodeUnprepareResources", request, context)
        claims = dra_convert.claim_refs(request.claims)
        if log.isEnabledFor(logging.DEBUG):
            log.debug("%s NodeUnprepareResources: %s", self.version, ", ".join(map(str, claims)))
        results = self._run_unprepare(claims)
        response = dra_convert.unprepare_response(self._pb, claims, results)
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
            errors = dra_convert.batch_failure(claims, "prepare", err)
            return {uid: PrepareResult(error=text) for uid, text in errors.items()}

    def _run_unprepare(self, claims: list[ClaimRef]) -> dict[str, UnprepareResult]:
        try:
            return dict(self._preparer.unprepare(claims))
        except Exception as err:
            log.exception("unprepare of %d claim(s) failed as a whole", len(claims))
            errors = dra_convert.batch_failure(claims, "unprepare", err)
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
