"""Custom device backends named on the command line: `--device-backend package.module:Class`.

The contract a custom backend fulfils (see `docs/driver-authors.md` for a walk-through):

- It is a class importable as `package.module:ClassName` from the plugin's Python path
  (install it into the plugin's environment, or put its directory on PYTHONPATH).
- The plugin constructs it once, at start, as `ClassName(context)` with a
  `simdra._driver.devices.backend.BackendContext`: `node_name`, `driver_name`,
  `device_profile`, `num_devices`, `sysfs_root`, `dev_root` (a class may instead offer
  `from_context(context)`). An exception there stops the plugin with exit code 1 and
  the error on one log line.
- It implements `DeviceBackend`: `discover() -> Inventory`. The plugin calls it at start
  (an exception stops the plugin) and again every `--rescan-interval` seconds (an
  exception keeps the last good inventory published; an optional `change_stamp()`
  lets it skip unchanged rescans, see `simdra._driver.devices.backend`). It must give the
  same hardware the same device names on every call and in every process, because claims, checkpoint
  records and CDI specs refer to devices by name.
- An optional class attribute `kinds` names the device kinds it publishes (each a
  registered `simdra._driver.devices.kind.DeviceKind`, which shapes the claim side).
- Everything else (publishing ResourceSlices, prepare/unprepare, CDI specs, checkpoint,
  health stream, metrics) is the plugin's.
- A catalog (`simdra._driver.devices.catalog`) can give it a short name (simdra's own:
  `--device-backend sysfs`, `fpga`).

The spec is checked when the flags are parsed, so a typo fails at once with exit code 2
and one line naming `--device-backend`, rather than after the plugin has connected.
"""

from __future__ import annotations

import importlib
import inspect
import re

# Dotted module path, a colon, one class name: `simdra._driver.kinds.fpga:FpgaBackend`.
_SPEC = re.compile(r"^(?P<module>[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*):(?P<name>[A-Za-z_]\w*)$")


class BackendSpecError(ValueError):
    """`--device-backend` names no usable backend class; the message says why."""


def load_backend_class(spec: str) -> type:
    """Import and return the class `spec` (`package.module:ClassName`) names.

    Raises BackendSpecError for a malformed spec, a module that cannot be imported (or
    fails while importing), a missing attribute, an attribute that is not a class, or a
    class without a `discover` method.
    """
    found = load_class(spec)
    if not callable(getattr(found, "discover", None)):
        raise BackendSpecError(
            f"{spec.strip()} has no discover() method, so it is not a DeviceBackend")
    return found


def load_class(spec: str) -> type:
    """Import and return the class `spec` (`package.module:ClassName`) names; used for
    backends and device kinds alike. BackendSpecError says what is wrong."""
    match = _SPEC.match(spec.strip())
    if match is None:
        raise BackendSpecError(f"{spec!r} is not of the form package.module:ClassName")
    module_name, class_name = match["module"], match["name"]
    module = _import(module_name)
    found = getattr(module, class_name, None)
    if found is None:
        raise BackendSpecError(f"module {module_name} has no attribute {class_name!r}")
    if not inspect.isclass(found):
        raise BackendSpecError(
            f"{module_name}:{class_name} is a {type(found).__name__}, not a class")
    return found


def _import(module_name: str) -> object:
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as err:
        if err.name is not None and _is_prefix(err.name, module_name):
            raise BackendSpecError(
                f"no module named {err.name!r} on the plugin's Python path") from None
        # The module exists but imports something that does not: say what is missing.
        raise BackendSpecError(f"importing module {module_name} failed: {err}") from None
    except Exception as err:  # anything the module's own code raises on import
        raise BackendSpecError(
            f"importing module {module_name} failed: {type(err).__name__}: {err}") from None


def _is_prefix(missing: str, module_name: str) -> bool:
    """True when `missing` is `module_name` or one of its parent packages."""
    return module_name == missing or module_name.startswith(f"{missing}.")
