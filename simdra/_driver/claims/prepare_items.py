"""The claims of a prepare or unprepare batch as the preparer walks them through its
steps (`simdra._driver.claims.preparer`), and the log context every step runs in."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any, Concatenate, ParamSpec, TypeVar

from simdra._driver.claims.claim_files import ClaimFiles
from simdra._driver.claims.errors import claim_label
from simdra._driver.claims.plan import PreparedClaim
from simdra._driver.claims.types import ClaimRef
from simdra._driver.core.logcontext import log_context
from simdra._driver.core.textlimits import clip, clip_error

# One logger for all of the preparer's modules: operators and log pipelines select the
# preparer's lines by this name, whichever module wrote them.
PREPARER_LOG = logging.getLogger("simdra._driver.claims.preparer")

T = TypeVar("T")
P = ParamSpec("P")

# A claim as read from the API server, or the exception reading it raised.
Fetched = dict[str, Any] | Exception


class Progress:
    """The step a prepare/unprepare is at, so that an error can name it."""

    def __init__(self, step: str) -> None:
        self.step = step

    def failure(self, ref: ClaimRef, exc: Exception) -> str:
        """The per-claim error text for an unexpected exception at the current step."""
        return clip_error(f"{label(ref)}: step {self.step}: {type(exc).__name__}: {clip(exc)}")


@dataclass(frozen=True)
class PrepareRound:
    """What one prepare call brings to a serialized section: its claims still to answer,
    and what it saw of each before taking the lock, in this order: the record memory
    held (`looked`, None: none), then the claim as read from the API server (`fetched`).

    A section answers a claim only while its record is still the one looked at (so the
    read is newer than whatever read the record was made from); one whose record changed
    meanwhile is left unanswered, read again and brought to a later round. `last`: the
    call's last round, in which such a claim gets an error instead."""

    claims: list[ClaimRef]
    looked: Mapping[str, PreparedClaim | None]
    fetched: Mapping[str, Fetched]
    last: bool


class Unanswered(Enum):
    """A claim a section leaves to a later round of its call (see `PrepareRound`)."""

    RECORD_CHANGED = "its checkpoint record changed after the call looked at it"


@dataclass
class BatchItem:
    """A claim of a batch, and the step it is at."""

    ref: ClaimRef
    progress: Progress


@dataclass
class Planned(BatchItem):
    """A claim to prepare that passed its checks and waits for its files."""

    prepared: PreparedClaim
    spec_path: Path
    files: ClaimFiles | None = None  # staged at "write checkpoint"


@dataclass
class Removal(BatchItem):
    """A claim to unprepare: its spec file, and its record if it has one."""

    recorded: PreparedClaim | None
    spec_path: Path
    spec_removed: bool = False  # whether a directory fsync is owed for it
    record_removed: bool = False


Item = TypeVar("Item", bound=BatchItem)


def in_context(ref: ClaimRef, work: Callable[[ClaimRef], T]) -> T:
    """Run `work(ref)` with the claim's identity on every log line it emits."""
    with log_context(claim=f"{ref.namespace}/{ref.name}", claim_uid=ref.uid):
        return work(ref)


def in_item_context(
    item: Item, work: Callable[Concatenate[Item, P], T], *args: P.args, **kwargs: P.kwargs
) -> T:
    """Run `work(item, *args, **kwargs)` with its claim's identity on every log line it
    emits. (Not a lambda with `i=item` in the loops: mypy cannot type its defaults.)"""
    return in_context(item.ref, lambda _ref: work(item, *args, **kwargs))


def label(ref: ClaimRef) -> str:
    """The claim as error and log texts name it."""
    return claim_label(ref.namespace, ref.name, ref.uid)
