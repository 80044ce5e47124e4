"""Claim status writes in the background: prepare never waits for the API server, and
only the latest wanted state of a claim is ever written."""

from __future__ import annotations

import threading

from simdra._driver.claims.status.worker import BackgroundStatusWriter
from simdra._driver.claims.types import ClaimRef

REF = ClaimRef("default", "c", "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d")


class _Prepared:
    """Stands in for a PreparedClaim: the worker only passes it through."""

    claim = REF


class _RecordingWriter:
    """Records sync calls; can block the first call and fail a number of calls."""

    def __init__(self, block: threading.Event | None = None, failures: int = 0) -> None:
        self.calls: list[object] = []
        self.started = threading.Event()
        self._block = block
        self._failures = failures

    def sync(self, ref: ClaimRef, state: object) -> bool:
        self.started.set()
        if self._block is not None:
            self._block.wait(5)
            self._block = None
        if self._failures:
            self._failures -= 1
            raise RuntimeError("API server unavailable")
        self.calls.append(state)
        return True


def test_prepare_returns_before_a_slow_write_and_the_write_happens():
    release = threading.Event()
    writer = _RecordingWriter(block=release)
    worker = BackgroundStatusWriter(writer)  # type: ignore[arg-type]
    try:
        worker.prepared(_Prepared())  # type: ignore[arg-type]
        assert writer.started.wait(5)
        assert worker.pending == [REF.uid]  # still being written: the caller did not wait
        release.set()
        assert worker.flush(5)
        assert len(writer.calls) == 1 and writer.calls[0] is not None
    finally:
        worker.stop()


def test_unprepare_supersedes_a_queued_prepare_and_is_written_last():
    release = threading.Event()
    writer = _RecordingWriter(block=release)
    worker = BackgroundStatusWriter(writer)  # type: ignore[arg-type]
    other = ClaimRef("default", "other", "11111111-1111-4111-8111-111111111111")
    try:
        worker.unprepared(other)  # occupies the thread while the next two arrive
        assert writer.started.wait(5)
        worker.prepared(_Prepared())  # type: ignore[arg-type]
        worker.unprepared(REF)
        release.set()
        assert worker.flush(5)
        assert writer.calls == [None, None]  # the prepare's entries were never written
    finally:
        worker.stop()


def test_failed_write_is_retried_until_it_succeeds():
    writer = _RecordingWriter(failures=2)
    worker = BackgroundStatusWriter(writer, retry_seconds=0.05)  # type: ignore[arg-type]
    try:
        worker.unprepared(REF)
        assert worker.flush(5)
        assert writer.calls == [None]
    finally:
        worker.stop()


def test_stop_ends_the_thread_with_writes_still_failing():
    writer = _RecordingWriter(failures=1000)
    worker = BackgroundStatusWriter(writer, retry_seconds=60)  # type: ignore[arg-type]
    worker.unprepared(REF)
    assert writer.started.wait(5)

    worker.stop()

    assert not worker.flush(0.01)
    assert not any(t.name == "claim-status" and t.is_alive() for t in threading.enumerate())
