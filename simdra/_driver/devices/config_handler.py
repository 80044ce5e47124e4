"""What a kind of opaque configuration provides: the `ConfigHandler` protocol, and the
strict field reader handlers decode with.

A device kind that takes per-claim parameters declares one handler per config kind (its
`config_handlers`, see `simdra._driver.devices.kind` and docs/driver-authors.md). The
plugin does the rest:
picks the handler by `kind`, checks `apiVersion`, rejects unknown fields, applies class
entries before claim entries (the claim wins, field by field), filters by `requests`
and device type, and puts the handler's env entries into the container's environment.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Protocol

from simdra._driver.core.quantity import QuantityError, format_quantity, parse_quantity
from simdra._driver.core.textlimits import one_line

SHOWN_CHARS = 100  # of a field name or value from the parameters, in a problem


class ConfigError(ValueError):
    """One or more problems of one opaque config entry, each naming its field.

    Example::

        error = ConfigError([f"{path}.algorithm: 'des' is not one of aes-gcm, sha256"])
        str(error)       # the problems joined by "; ": one line for the prepare's answer
        error.problems   # the list, as given
    """

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


@dataclass(frozen=True)
class ConfigTarget:
    """A prepared device as config sees it.

    Example (what `ConfigHandler.device_problems` is given)::

        ConfigTarget(requests=("crypto",), device_type="crypto",
                     label="device node-1/crypto-0 share 5f0c...",
                     granted={"sessions": Fraction(4)})
    """

    requests: tuple[str, ...]  # as allocated
    device_type: str
    label: str  # how messages name it, e.g. "device node-a/nic-0 share <id>"
    granted: Mapping[str, Fraction]  # what it holds of each capacity


class ConfigHandler(Protocol):
    """One kind of opaque parameters (e.g. `GpuConfig`) for devices of one type.

    The decoded config must be a frozen dataclass whose fields are all optional (None:
    not set), so that a claim entry can override a class entry field by field, with a
    `to_json()` giving its canonical JSON (recorded with the prepared claim).

    Example::

        class CryptoConfigHandler:  # a ConfigHandler: a structural protocol, no base class
            api_version = "crypto.example.com/v1alpha1"
            kind = "CryptoConfig"
            device_type = "crypto"

            def decode(self, fields: FieldReader) -> CryptoConfig:
                return CryptoConfig(algorithm=fields.string("algorithm"))

            def problems(self, config: CryptoConfig, path: str) -> list[str]: ...
            def device_problems(self, config, target, origin) -> list[str]: ...
            def env(self, config: CryptoConfig) -> list[tuple[str, str]]: ...

        class CryptoKind(DeviceKind):
            config_handlers = (CryptoConfigHandler(),)
    """

    api_version: str  # its group and version, e.g. "simdra.dra.example.com/v1alpha1"
    kind: str  # e.g. "GpuConfig"
    device_type: str  # the `type` attribute of the devices it configures

    def decode(self, fields: FieldReader) -> Any:
        """The typed config from the parameters' fields (apiVersion and kind are read
        already; fields not read are reported as unknown). Wrong JSON types are reported
        by the reader; return a config even then."""
        ...

    def problems(self, config: Any, path: str) -> list[str]:
        """Value rules that need no device: `<path>.<field>: <reason>` for each broken one."""
        ...

    def device_problems(self, config: Any, target: ConfigTarget,
                        origin: Mapping[str, str]) -> list[str]:
        """Rules that need the device (limits within what it holds); `origin` maps each
        field to the path of the entry that set it last."""
        ...

    def env(self, config: Any) -> Sequence[tuple[str, str]]:
        """(KEY, value) env entries that tell the workload its configuration; KEY goes
        after the device's `SIMDRA_DEVICE_<ID>_` prefix."""
        ...


class FieldReader:
    """Reads the fields of one JSON object strictly, each problem with its field path,
    remembering which fields were read so that the rest can be reported as unknown.

    Example::

        problems: list[str] = []
        fields = FieldReader({"queueDepth": "8", "colour": 1}, "parameters", problems)
        fields.integer("queueDepth")  # None
        fields.finish()
        problems  # ["parameters.queueDepth: '8' is not an integer",
                  #  "parameters.colour: unknown field"]
    """

    def __init__(self, raw: Mapping[str, Any], path: str, problems: list[str]) -> None:
        self.raw = raw
        self.path = path
        self.problems = problems
        self._known: set[str] = set()

    def field(self, name: str) -> tuple[str, Any]:
        """(path, raw value or None) of field `name`, which counts as known from now on."""
        self._known.add(name)
        return f"{self.path}.{name}", self.raw.get(name)

    def string(self, name: str) -> str | None:
        """A string field (None when absent)."""
        path, value = self.field(name)
        if value is None or isinstance(value, str):
            return value
        self._wrong(path, value, "a string")
        return None

    def integer(self, name: str) -> int | None:
        """An integer field (None when absent; booleans are not integers)."""
        path, value = self.field(name)
        if value is None or (isinstance(value, int) and not isinstance(value, bool)):
            return value
        self._wrong(path, value, "an integer")
        return None

    def boolean(self, name: str) -> bool | None:
        """A boolean field (None when absent)."""
        path, value = self.field(name)
        if value is None or isinstance(value, bool):
            return value
        self._wrong(path, value, "true or false")
        return None

    def quantity(self, name: str) -> Fraction | None:
        """A Kubernetes quantity such as "4Gi" (None when absent)."""
        path, value = self.field(name)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, str | int):
            self._wrong(path, value, 'a quantity such as "4Gi" or "500M"')
            return None
        try:
            amount = parse_quantity(value)
            format_quantity(amount)  # finer than milli-units cannot be written back
        except QuantityError as exc:
            self.problems.append(f"{path}: {exc}")
            return None
        return amount

    def obj(self, name: str) -> FieldReader | None:
        """A reader for a nested object (None when absent); call its `finish()`."""
        path, value = self.field(name)
        if value is None:
            return None
        if not isinstance(value, dict):
            self._wrong(path, value, "an object")
            return None
        return FieldReader(value, path, self.problems)

    def finish(self) -> None:
        """Report every field that was not read as unknown."""
        for name in sorted(set(self.raw) - self._known):
            self.problems.append(f"{self.path}.{one_line(name, SHOWN_CHARS)}: unknown field")

    def _wrong(self, path: str, value: Any, expected: str) -> None:
        self.problems.append(f"{path}: {show(value)} is not {expected}")


def show(value: Any) -> str:
    """A JSON value as messages name it: on one line, at most SHOWN_CHARS characters
    of it (the parameters are anyone's)."""
    if value is None:
        return "null"
    if isinstance(value, dict | list):
        return type(value).__name__
    return one_line(repr(value), SHOWN_CHARS)
