"""No prepare reads the API server while it holds the node's serialize lock, not even
when a claim's record changes between the call's first look and the lock.

Two instances over one directory (a rolling update) share the real file lock
(`CallSerializer`); the claim source checks that lock file on every read."""

from __future__ import annotations

import contextlib
import fcntl
import os

import pytest

from simdra._driver.claims.prepare.batch import CallSerializer
from simdra._driver.claims.prepare.transaction import PREPARE_ROUNDS, Preparer
from simdra._driver.claims.source import FETCH_DEADLINE_S, StaticClaimSource, fetch_claims
from simdra._driver.claims.types import ClaimError, ClaimRef
from tests.claims.builders import RULES

from .builders import DRIVER, GPU_POOL, claim, inventory, result

A = "aaaaaaaa-0000-4000-8000-000000000001"


def _locked(lock_file):
    """Whether anyone holds the flock on `lock_file` (a second open file description
    conflicts with the holder's, even in the same process)."""
    fd = os.open(lock_file, os.O_RDONLY | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)


class LockWatchingSource(StaticClaimSource):
    """The API's claims; notes at every read whether the serialize lock is held."""

    def __init__(self, lock_file):
        super().__init__()
        self.lock_file = lock_file
        self.held_at_reads = []

    def get(self, namespace, name):
        self.held_at_reads.append(_locked(self.lock_file))
        return super().get(namespace, name)


class Node:
    """Two plugin instances over one node's directories, and the API's claims."""

    def __init__(self, tmp_path):
        self.cdi, self.data = tmp_path / "cdi", tmp_path / "data"
        self.data.mkdir()
        self.lock_file = str(self.data / "serialize.lock")
        self.source = LockWatchingSource(self.lock_file)
        self.inventory = inventory(gpus=2, nics=1)
        self.before_lock = None  # run once by `racing`, just before it takes the lock
        self.racing = self.instance(self._racing_lock)
        self.other = self.instance(self._file_lock)

    def instance(self, serialize):
        return Preparer(DRIVER, self.source, lambda: self.inventory, self.cdi, self.data,
                        serialize=serialize, rules=RULES)

    def add(self, uid, *results):
        raw = claim(uid, list(results))
        self.source.put(raw)
        return ClaimRef("default", raw["metadata"]["name"], uid)

    def record_path(self, uid):
        return self.data / "claims" / f"{uid}.json"

    def spec_path(self, uid):
        return self.cdi / f"k8s.{DRIVER}-device_{uid}.json"

    def _file_lock(self):
        return CallSerializer(self.lock_file)

    @contextlib.contextmanager
    def _racing_lock(self):
        """The file lock, with `before_lock` run in the window between a call's first
        look (and reads) and its serialized section."""
        action, self.before_lock = self.before_lock, None
        if action is not None:
            action()
        with CallSerializer(self.lock_file):
            yield


@pytest.fixture
def node(tmp_path):
    return Node(tmp_path)


def test_a_record_removed_before_the_lock_is_read_again_outside_it(node):
    ref = node.add(A, result("gpus", "gpu-0"))
    assert node.racing.prepare([ref])[A].error == ""
    node.source.held_at_reads.clear()
    # The other instance unprepares the claim after this call looked at its record.
    node.before_lock = lambda: node.other.unprepare([ref])

    (device,) = node.racing.prepare([ref])[A].devices

    assert (device.pool_name, device.device_name) == (GPU_POOL, "gpu-0")
    assert node.source.held_at_reads == [False, False]  # read before each section
    assert node.record_path(A).exists() and node.spec_path(A).exists()
    assert A in node.racing.ledger


def test_a_record_changing_before_every_section_gets_one_error_line(node):
    ref = node.add(A, result("gpus", "gpu-0"))
    assert node.racing.prepare([ref])[A].error == ""
    node.source.held_at_reads.clear()

    def flip():
        """Before each section, the other instance unprepares or prepares the claim."""
        if node.record_path(A).exists():
            assert node.other.unprepare([ref])[A].error == ""
        else:
            assert node.other.prepare([ref])[A].error == ""
        node.before_lock = flip

    node.before_lock = flip

    error = node.racing.prepare([ref])[A].error

    node.before_lock = None
    assert f"claim default/{ref.name} (uid {A}): its checkpoint record changed" in error
    assert f"{PREPARE_ROUNDS} times in a row" in error and error.endswith("[step: check record]")
    assert "\n" not in error
    assert node.source.held_at_reads and not any(node.source.held_at_reads)
    # Nothing half-done is left: the node answers the next call as usual.
    assert node.racing.prepare([ref])[A].error == ""


def test_claims_are_never_read_under_the_lock(node):
    ref = node.add(A, result("gpus", "gpu-0"))
    for preparer in (node.racing, node.other, node.racing):  # new, recorded, and the other's
        assert preparer.prepare([ref])[A].error == ""
    node.add(A, result("gpus", "gpu-1"))  # allocated anew: planned again
    assert [d.device_name for d in node.racing.prepare([ref])[A].devices] == ["gpu-1"]
    assert len(node.source.held_at_reads) >= 4 and not any(node.source.held_at_reads)


def test_a_later_round_with_no_time_left_reads_nothing(node):
    ref = node.add(A, result("gpus", "gpu-0"))
    (error,) = fetch_claims(node.source, [ref], deadline_s=0).values()

    assert isinstance(error, ClaimError) and node.source.held_at_reads == []
    assert f"claim default/{ref.name}: not read again from the API server" in str(error)
    assert f"the call's {FETCH_DEADLINE_S:g} s for reads are spent" in str(error)


def test_a_link_at_the_lock_file_is_refused_and_its_target_never_made(tmp_path):
    """A symlink planted at serialize.lock while the plugin runs: the next call fails
    instead of creating (or flock-ing) the file the link points at."""
    target = tmp_path / "elsewhere" / "made-by-the-plugin"
    target.parent.mkdir()
    lock_file = tmp_path / "serialize.lock"
    lock_file.symlink_to(target)
    serializer = CallSerializer(str(lock_file))

    with pytest.raises(OSError), serializer:
        pass
    assert not target.exists()
    # The in-process lock was released: the next call (once the link is gone) works.
    lock_file.unlink()
    with serializer:
        assert _locked(str(lock_file))
