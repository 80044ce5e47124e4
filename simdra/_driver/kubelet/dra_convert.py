"""Translation between DRA node protobuf messages and the claim preparer's types.

Pure functions. v1 and v1beta1 messages share field names and numbers, so one function
serves both; the caller passes the generated module. Only v1 (1.35+) has Device.share_id.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from types import ModuleType
from typing import Any

from simdra._driver.claims.types import ClaimRef, PreparedDevice, PrepareResult, UnprepareResult

log = logging.getLogger(__name__)


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
