"""Fixtures for the deployment tests: each kustomization and each chart rendering
(real helm, see tests/deploy/helm.py) rendered once per session."""

from __future__ import annotations

import pytest

from tests.deploy.helm import template
from tests.deploy.kustomize import render
from tests.deploy.layout import DEPLOY, HELM_RENDERINGS, JSON, KUSTOMIZATIONS


@pytest.fixture(scope="session")
def rendered() -> dict[str, list[JSON]]:
    """Kustomization directory (relative to deploy/) or chart rendering (HELM_RENDERINGS)
    -> the objects it renders."""
    objects = {name: render(DEPLOY / name) for name in KUSTOMIZATIONS}
    for name, (values_files, _) in HELM_RENDERINGS.items():
        objects[name] = template(values_files)
    return objects
