"""The exceptions of fault injection: bad requests or files, a stuck lock, injected failures."""

from __future__ import annotations


class FaultError(ValueError):
    """A fault request or the control file is invalid; the message says which and why."""


class FaultLockTimeout(TimeoutError):
    """Another process held the fault lock for too long."""


class InjectedFault(RuntimeError):
    """A prepare failed because `simdra fault ... fail-prepare` asked for it."""
