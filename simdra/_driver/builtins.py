"""simdra's own catalog: the kinds and backends that the command line, `simdra.runtime`'s
`run_plugin` and the harness hand down to the plugin as objects (nothing below this
module names a kind or a backend)."""

from __future__ import annotations

from functools import cache

from simdra._driver.devices.catalog import Catalog
from simdra._driver.devices.kind_registry import KindSet, load_kinds
from simdra._driver.kinds import BUILTIN_BACKENDS, BUILTIN_KINDS

BUILTIN = Catalog(kinds=BUILTIN_KINDS, backends=BUILTIN_BACKENDS)


@cache
def builtin_kinds() -> KindSet:
    """simdra's own kinds, registered together (what `simdra run` registers without
    `--kind`)."""
    return load_kinds(BUILTIN.kinds)
