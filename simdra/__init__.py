"""simdra: a library for Kubernetes DRA kubelet plugins in Python, and the plugin built on it.

A driver author declares a device kind and runs the plugin with it::

    import simdra

    class CryptoKind(simdra.DeviceKind):
        \"\"\"Simulated crypto accelerators.\"\"\"

        name = "crypto"
        profiles = (simdra.FakeProfile("crypto", build=crypto_device),)

    def main() -> None:
        simdra.main(kinds=(CryptoKind,))  # the `simdra` command, CryptoKind registered

The plugin does the rest: registration with the kubelet, the DRA and health services,
ResourceSlice publishing, prepare and unprepare with durable records, CDI specs, the
shared-capacity ledger, metrics. Those parts are importable one by one from
`simdra.runtime`; the test harness is `simdra.testing`; tolerant sysfs readers for
discovering real hardware are in `simdra.sysfs`.

This module and those three are the public API: the names in their `__all__` keep
working across minor releases (tests/test_public_api.py fails when one disappears or
changes its signature). Everything under `simdra._driver` is private.
"""

from __future__ import annotations

from collections.abc import Sequence

from simdra._driver.api import *  # noqa: F403  (the names are listed in api.__all__)
from simdra._driver.api import DeviceKind
from simdra._driver.api import __all__ as _api_names

__all__ = [*_api_names, "main"]


def main(argv: Sequence[str] | None = None, kinds: Sequence[type[DeviceKind]] = ()) -> int:
    """The `simdra` command line (`run`, `demo`, `deviceclasses`, ...) with `kinds`
    registered next to simdra's own; returns the exit status.

    Example (a driver's console script)::

        def plugin_main() -> None:
            raise SystemExit(simdra.main(kinds=(CryptoKind,)))

    The kinds must be importable by module and name (defined at module level), because
    `simdra demo` and the test harness start the plugin as a separate process.
    """
    from simdra._driver.cli import main as cli_main
    from simdra._driver.cli.kinds import with_kinds

    return cli_main(with_kinds(argv, kinds))
