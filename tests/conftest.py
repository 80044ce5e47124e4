"""Suite-wide collection order."""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """On parallel workers (`-n`), tests marked `slow` start first: one that starts last
    stretches the whole run by its own length while the other workers sit idle."""
    if config.getoption("numprocesses", default=None):
        items.sort(key=lambda item: item.get_closest_marker("slow") is None)
