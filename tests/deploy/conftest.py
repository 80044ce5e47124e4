"""Fixtures for the deployment tests: each kustomization rendered once per session."""

from __future__ import annotations

import pytest

from tests.deploy.kustomize import render
from tests.deploy.layout import DEPLOY, JSON, KUSTOMIZATIONS


@pytest.fixture(scope="session")
def rendered() -> dict[str, list[JSON]]:
    """Kustomization directory (relative to deploy/) -> the objects it renders."""
    return {name: render(DEPLOY / name) for name in KUSTOMIZATIONS}
