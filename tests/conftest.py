"""Suite-wide collection order."""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """On parallel workers, tests marked `slow` start first: one that starts last
    stretches the whole run by its own length while the other workers sit idle. The
    workers' own collection order is the one xdist hands out, so they sort too."""
    if config.getoption("numprocesses", default=None) or hasattr(config, "workerinput"):
        items.sort(key=lambda item: item.get_closest_marker("slow") is None)
