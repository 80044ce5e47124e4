"""The stand-in validates requests on many threads: the first requests of a fresh process
compile the schemas they need at the same moment, sharing `$ref`s, and each must get a
whole validator (an author's CI saw `IndexError` from a half-compiled one, now and then,
in `LocalCluster.start_plugin`)."""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from simdra._driver.testing.apiserver import schema

SLICE = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "s"},
         "spec": {"driver": "d", "nodeName": "n", "devices": [{"name": "x"}],
                  "pool": {"name": "p", "generation": 1, "resourceSliceCount": 1}}}
CLAIM = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
         "metadata": {"name": "c"}, "spec": {}}


@pytest.fixture
def switching_often() -> Iterator[None]:
    """Threads switch every microsecond: a race that needs a switch mid-compile shows."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        yield
    finally:
        sys.setswitchinterval(before)
        schema.validator_for.cache_clear()


def _first_requests(count: int) -> list[BaseException]:
    schema.validator_for.cache_clear()
    schema._compiler.cache_clear()
    barrier, errors = threading.Barrier(count), []

    def validate(obj: dict[str, Any]) -> None:
        barrier.wait()
        try:
            assert schema.schema_errors(obj) == []
        except BaseException as err:
            errors.append(err)

    threads = [threading.Thread(target=validate, args=((SLICE, CLAIM)[i % 2],))
               for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return errors


def test_validators_compiled_at_once_on_many_threads_are_whole(switching_often: None) -> None:
    # Before the fix, about a third of these rounds failed.
    failed = [errors for _ in range(20) if (errors := _first_requests(8))]

    assert failed == []
