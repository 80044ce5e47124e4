"""Capped exponential backoff with jitter (pure apart from the random source)."""

from __future__ import annotations

import random
from dataclasses import dataclass


@dataclass(frozen=True)
class Backoff:
    """Delay before retry number `attempt` (0-based): initial * factor^attempt, capped.

    Jitter draws the delay from [(1 - jitter) * d, d] so that many nodes failing at once
    (an API server restart) do not retry in lock-step. A server's Retry-After is a
    lower bound, itself capped by `max_retry_after` so a bogus header cannot park the
    publisher for hours.
    """

    initial: float = 0.25
    factor: float = 2.0
    cap: float = 30.0
    jitter: float = 0.5
    max_retry_after: float = 300.0

    def delay(
        self, attempt: int, retry_after: float | None = None, rng: random.Random | None = None
    ) -> float:
        """Seconds to wait before the next try."""
        base = min(self.cap, self.initial * self.factor ** min(attempt, 64))
        draw = (rng or random).uniform(1.0 - self.jitter, 1.0)
        delay = base * draw
        if retry_after is not None:
            delay = max(delay, min(retry_after, self.max_retry_after))
        return delay
