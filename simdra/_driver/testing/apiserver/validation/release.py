"""The Kubernetes release the stand-in answers as, read from its version string."""

from __future__ import annotations


def minor_of(release: str) -> int:
    """37 for "1.37", "v1.37.2" or "1.38.0-beta.0"."""
    return int(release.lstrip("v").split(".")[1])
