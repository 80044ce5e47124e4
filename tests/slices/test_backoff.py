"""Backoff: exponential, capped, jittered, and never shorter than Retry-After."""

from __future__ import annotations

import random

from simdra._driver.slices.backoff import Backoff


def test_delays_grow_then_cap_with_jitter_below_the_nominal_value():
    b = Backoff(initial=0.1, factor=2, cap=1.0, jitter=0.5)
    rng = random.Random(1)
    for attempt, nominal in ((0, 0.1), (1, 0.2), (3, 0.8), (10, 1.0), (500, 1.0)):
        d = b.delay(attempt, rng=rng)
        assert nominal * 0.5 <= d <= nominal


def test_retry_after_is_a_lower_bound_but_capped():
    b = Backoff(initial=0.1, cap=1.0, max_retry_after=60)
    assert b.delay(0, retry_after=5) == 5
    assert b.delay(0, retry_after=10_000) == 60
