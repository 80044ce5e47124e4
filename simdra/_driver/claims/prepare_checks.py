"""The checks a prepare makes of a claim's record inside the serialized section, before it
plans (the preparer's rules, apart from its sections): a corrupt record is never
prepared over, a record that changed since the call looked sends the claim to another
round, and the old plan of a claim allocated anew stays held until the batch is written.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from simdra._driver.claims.checkpoint import CorruptRecord
from simdra._driver.claims.errors import ClaimError
from simdra._driver.claims.plan import PreparedClaim
from simdra._driver.claims.prepare_items import label
from simdra._driver.claims.types import ClaimRef

# Serialized sections one prepare call may take: one, and one more each time a claim's
# record changed between the call's look and the section (a race, not a steady state).
PREPARE_ROUNDS = 3


def refuse_corrupt(ref: ClaimRef, corrupt: Mapping[str, CorruptRecord]) -> None:
    """ClaimError when the claim's record cannot be read: preparing it again could
    double-book what the unreadable record holds."""
    if ref.uid in corrupt:
        raise ClaimError(
            f"{label(ref)}: {corrupt[ref.uid]}; not preparing it again "
            "(an unprepare of the claim moves the record aside)"
        )


def record_unchanged(
    ref: ClaimRef, recorded: PreparedClaim | None, looked: PreparedClaim | None, *, last: bool
) -> bool:
    """True when the record is the one the call looked at before reading the claim (the
    read is then at least as new as the record). False: answer in another round;
    ClaimError when this was the call's last round."""
    if recorded == looked:
        return True
    if not last:
        return False
    raise ClaimError(
        f"{label(ref)}: its checkpoint record changed between the claim's read and the "
        f"serialized section {PREPARE_ROUNDS} times in a row (other prepares or unprepares "
        "of the claim ran meanwhile); the kubelet retries"
    )


def held_key(claim_uid: str) -> str:
    """Where the old plan of a claim planned anew is held (a "/" is never in a UID, so no
    claim's own entries are ever filed under it)."""
    return f"{claim_uid}/previous-allocation"


def held_until_written(recorded: PreparedClaim) -> PreparedClaim:
    """The recorded plan of a claim being planned anew, filed under `held_key`: should
    the claim's record write fail, the old record still names those devices, so no
    other claim of the batch may take them."""
    return dataclasses.replace(
        recorded, claim=dataclasses.replace(recorded.claim, uid=held_key(recorded.claim.uid)))
