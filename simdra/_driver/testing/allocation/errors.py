"""Errors raised by the test allocator."""

from __future__ import annotations


class AllocationError(Exception):
    """A claim cannot be allocated; the message names the claim, the request and why."""
