"""The harness allocator (`simdra._driver.testing.scheduler.allocate`) and the real kube-scheduler
allocate a corpus of slices and claims alike: the same devices for each claim, or both
unschedulable.

The corpus lives in `tests/testing/allocator_corpus.py`, the scheduler's verdicts in
`tests/testing/allocator_verdicts/<minor>.json`, one file per release. The fast suite
holds the harness to the modelled release's recording; here the live scheduler of the
release the run builds (K8S_VERSION) allocates every case again and must do as its own
recording says, so a stale or missing recording fails. Record a release with
`python -m tests.e2e.test_allocator_differential --record` (SIMDRA_E2E_BIN as for e2e).

It allocates 71 cases one after another (a few minutes), so the default run leaves it out
(marker `allocator_live`): `SIMDRA_E2E_ALLOCATOR=1 ./hack/e2e.sh` runs it alone, and
hack/e2e-matrix.sh runs it on each release that has a recording.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Iterator

import pytest

from tests.testing.allocator_corpus import (
    CORPUS,
    Verdict,
    harness_disagreement,
    load_verdicts,
    save_verdicts,
    verdicts_file,
)

from .controlplane import ControlPlane
from .live_allocator import LiveAllocator

pytestmark = pytest.mark.allocator_live


@pytest.fixture(scope="module")
def live(control_plane: ControlPlane) -> Iterator[LiveAllocator]:
    with LiveAllocator(control_plane) as allocator:
        yield allocator


@pytest.fixture(scope="module")
def recorded(control_plane: ControlPlane) -> dict[str, Verdict]:
    """The running release's own recorded verdicts."""
    version = control_plane.version()
    if not verdicts_file(version).exists():
        pytest.fail(f"no allocator verdicts recorded for Kubernetes {version}: run "
                    "python -m tests.e2e.test_allocator_differential --record", pytrace=False)
    return load_verdicts(version)[1]


@pytest.mark.parametrize("name", list(CORPUS))
def test_harness_allocates_as_the_real_scheduler(name: str, live: LiveAllocator,
                                                 recorded: dict[str, Verdict]) -> None:
    theirs = live.verdict(CORPUS[name])
    assert recorded.get(name) == theirs, (
        f"{name}: the real scheduler now allocates {list(theirs)}, recorded "
        f"{recorded.get(name)}; re-record this release's allocator verdicts")
    problem = harness_disagreement(CORPUS[name], load_verdicts()[1][name])
    assert problem is None, f"{name}: {problem}"


def record() -> None:
    """Have a fresh real control plane allocate every case and save the verdicts."""
    with tempfile.TemporaryDirectory() as workdir, ControlPlane(
            os.environ["SIMDRA_E2E_BIN"], workdir) as plane, LiveAllocator(plane) as live:
        verdicts = {}
        for name, case in CORPUS.items():
            verdicts[name] = live.verdict(case)
            print(f"{name}: {list(verdicts[name])}", flush=True)
        save_verdicts(plane.version(), verdicts)
        for where, message in live.messages.items():
            print(f"refused {where}: {message}")
    print(f"recorded {len(verdicts)} verdicts from kube-scheduler {plane.version()}")


if __name__ == "__main__" and sys.argv[1:] == ["--record"]:
    record()
