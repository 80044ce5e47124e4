"""Context fields for log records: what a claim's prepare, a pool's publish or a device's
rescan is about, set once around the work and carried by every record inside it.

`log_context(claim="ns/name", claim_uid=..., pool=..., device=...)` adds its fields to
every record emitted inside it, in the same thread or task (contextvars: other threads
never see them; nested contexts add to and override the outer ones). How records are
formatted is `simdra._driver.observability.logs`'s business; any layer may set context.
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from types import MappingProxyType

_context: contextvars.ContextVar[Mapping[str, str]] = contextvars.ContextVar(
    "simdra_log_context", default=MappingProxyType({})
)


@contextmanager
def log_context(**fields: object) -> Iterator[None]:
    """Add `fields` to every log record emitted inside the block (None values are left
    out, so callers can pass what they know without checking)."""
    added = {name: str(value) for name, value in fields.items() if value is not None}
    token = _context.set({**_context.get(), **added})
    try:
        yield
    finally:
        _context.reset(token)


def current_context() -> dict[str, str]:
    """The fields `log_context` blocks around the caller have set."""
    return dict(_context.get())
