"""What a plugin can be built from besides its command line: the device kinds always
registered and the backends `--device-backend NAME` knows by name.

The command line hands simdra's own catalog down (`simdra._driver.kinds.BUILTIN`); a
driver that assembles its plugin from `simdra.runtime` passes its own. Nothing below the
command line knows which kinds or backends exist.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from simdra._driver.devices.backend import FakeBackend
from simdra._driver.devices.kind import DeviceKind
from simdra._driver.devices.loader import BackendSpecError, load_backend_class

# A backend class, imported when asked for: a backend's own dependencies (sysfs
# discovery, NVML) cost nothing to a plugin that runs another.
BackendLoader = Callable[[], type]


def _fake() -> type:
    return FakeBackend


@dataclass(frozen=True)
class Catalog:
    """The kinds registered with every plugin built from it, in order, and the backends
    it knows by name (`fake` always)."""

    kinds: tuple[type[DeviceKind], ...] = ()
    backends: Mapping[str, BackendLoader] = field(
        default_factory=lambda: MappingProxyType({}))

    def backend_names(self) -> tuple[str, ...]:
        """The names `--device-backend` takes, `fake` first."""
        return ("fake", *(name for name in self.backends if name != "fake"))

    def backend_class(self, value: str) -> type:
        """The backend a name or a `package.module:ClassName` gives; BackendSpecError
        says what is wrong with either."""
        loader = {"fake": _fake, **self.backends}.get(value)
        if loader is None:
            return load_backend_class(value)
        found = loader()
        if not callable(getattr(found, "discover", None)):
            raise BackendSpecError(f"backend {value!r} has no discover() method")
        return found
