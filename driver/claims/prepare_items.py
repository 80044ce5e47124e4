"""The claims of a prepare or unprepare batch as the preparer walks them through its
steps (`driver.claims.preparer`), and the log context every step runs in."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Concatenate, ParamSpec, TypeVar

from driver.claims.claim_files import ClaimFiles
from driver.claims.errors import claim_label
from driver.claims.plan import PreparedClaim
from driver.claims.types import ClaimRef
from driver.core.logcontext import log_context
from driver.core.textlimits import clip, clip_error

# One logger for all of the preparer's modules: operators and log pipelines select the
# preparer's lines by this name, whichever module wrote them.
PREPARER_LOG = logging.getLogger("driver.claims.preparer")

T = TypeVar("T")
P = ParamSpec("P")


class Progress:
    """The step a prepare/unprepare is at, so that an error can name it."""

    def __init__(self, step: str) -> None:
        self.step = step

    def failure(self, ref: ClaimRef, exc: Exception) -> str:
        """The per-claim error text for an unexpected exception at the current step."""
        return clip_error(f"{label(ref)}: step {self.step}: {type(exc).__name__}: {clip(exc)}")


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
