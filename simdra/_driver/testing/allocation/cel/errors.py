"""The two ways a selector fails: it cannot be compiled, or its evaluation fails."""

from __future__ import annotations

from simdra._driver.testing.allocation.errors import AllocationError


class UnsupportedExpression(AllocationError, ValueError):
    """A selector does not compile: bad syntax, an unknown function, field or variable."""


class SelectorError(AllocationError):
    """A selector failed at run time (missing attribute, no such overload), as CEL would."""
