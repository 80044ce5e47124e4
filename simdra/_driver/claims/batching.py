"""Group commit: calls that arrive while one is being written are written together.

The first caller to find no batch in progress becomes the leader: it takes every request
queued so far, runs them as one batch (one pass of fsyncs for all of them) and hands
each caller its own answer; callers that arrive meanwhile queue for the next batch, which
the same leader runs before it leaves. A caller never waits for more than the batch in
progress plus its own.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

Request = TypeVar("Request")
Answer = TypeVar("Answer")


@dataclass
class _Slot(Generic[Request, Answer]):
    request: Request
    wake: threading.Event = field(default_factory=threading.Event)  # answered or promoted
    answered: bool = False
    answer: Answer | None = None
    error: BaseException | None = None


class GroupCommit(Generic[Request, Answer]):
    """Runs `run_batch(requests) -> answers` (same order, same length) for batches of
    concurrent `submit` calls."""

    def __init__(self, run_batch: Callable[[Sequence[Request]], Sequence[Answer]]) -> None:
        self._run_batch = run_batch
        self._mutex = threading.Lock()
        self._queue: list[_Slot[Request, Answer]] = []
        self._leading = False

    @property
    def waiting(self) -> int:
        """Requests queued for the next batch."""
        with self._mutex:
            return len(self._queue)

    def submit(self, request: Request) -> Answer:
        """The answer to `request`, computed in a batch with the concurrent ones."""
        slot: _Slot[Request, Answer] = _Slot(request)
        with self._mutex:
            self._queue.append(slot)
            lead = not self._leading
            self._leading = True
        if not lead:
            slot.wake.wait()
        if not slot.answered:  # the leader of the next batch, which holds this request
            self._lead()
        if slot.error is not None:
            raise slot.error
        return slot.answer  # type: ignore[return-value]

    def _lead(self) -> None:
        """Run one batch (every queued request), then hand the lead to the first request
        queued meanwhile, so that no caller runs other callers' batches after its own."""
        with self._mutex:
            batch, self._queue = self._queue, []
        try:
            answers = self._run_batch([slot.request for slot in batch])
        except BaseException as exc:  # every caller of the batch sees the failure
            for slot in batch:
                slot.error = exc
        else:
            for slot, answer in zip(batch, answers, strict=True):
                slot.answer = answer
        finally:
            for slot in batch:
                slot.answered = True
                slot.wake.set()
            with self._mutex:
                if self._queue:
                    self._queue[0].wake.set()
                else:
                    self._leading = False
