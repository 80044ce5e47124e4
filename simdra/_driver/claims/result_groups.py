"""The allocation results of one claim grouped into units, one per (pool, device,
shareID), with the checks that need the groups (pure)."""

from __future__ import annotations

from collections.abc import Mapping

from simdra._driver.claims.allocation import AllocatedDevice
from simdra._driver.claims.errors import ClaimError

UnitKey = tuple[str, str, str | None]  # (pool, device, shareID)


def group_results(
    results: tuple[AllocatedDevice, ...],
) -> dict[UnitKey, list[AllocatedDevice]]:
    """Results naming the same (pool, device, shareID) are one unit serving several
    requests (possible for admin access); the answer lists all their request names."""
    groups: dict[UnitKey, list[AllocatedDevice]] = {}
    for result in results:
        groups.setdefault((result.pool, result.device, result.share_id), []).append(result)
    return groups


def check_shares_allocated_once(
    groups: Mapping[UnitKey, list[AllocatedDevice]], where: str
) -> None:
    """ClaimError for a shareID in two results: the scheduler draws a fresh one for
    every allocation of a multi-allocatable device, and one shareID twice would make
    their consumed capacity count once."""
    for (pool, device, share_id), results in groups.items():
        if share_id is not None and len(results) > 1:
            requests = ", ".join(r.request for r in results)
            raise ClaimError(
                f"{where}: device {pool}/{device}: shareID {share_id} appears in "
                f"{len(results)} allocation results (requests {requests}); each share is "
                "allocated once")


def ambiguous_device_names(groups: Mapping[UnitKey, list[AllocatedDevice]]) -> set[str]:
    """Device names held in several pools by the claim: names are unique only within a
    pool, so their CDI names must carry the pool."""
    pools_by_device: dict[str, set[str]] = {}
    for pool, device, _ in groups:
        pools_by_device.setdefault(device, set()).add(pool)
    return {device for device, pools in pools_by_device.items() if len(pools) > 1}
