"""The semantic rules of a DeviceClass spec: selectors, config, extendedResourceName."""

from __future__ import annotations

from typing import Any

from simdra._driver.testing.apiserver.validation.claims import MAX_CONFIGS, opaque_config_errors
from simdra._driver.testing.apiserver.validation.field import FieldError, invalid, too_many
from simdra._driver.testing.apiserver.validation.formats import is_extended_resource_name
from simdra._driver.testing.apiserver.validation.selectors import selector_list_errors


def class_spec_errors(spec: Any, old_spec: Any = None, path: str = "spec") -> list[FieldError]:
    """Every rule the API server checks in a DeviceClassSpec at `path`.

    On update (`old_spec` given) selectors exactly as before are not compiled again, so a
    class stored under older CEL rules stays writable.
    """
    spec = spec if isinstance(spec, dict) else {}
    old = old_spec if isinstance(old_spec, dict) else None
    selectors = spec.get("selectors") or []
    stored = old is not None and (old.get("selectors") or []) == selectors
    errors = selector_list_errors(selectors, f"{path}.selectors", stored)
    configs = spec.get("config") or []
    if len(configs) > MAX_CONFIGS:
        errors.append(too_many(f"{path}.config", len(configs), MAX_CONFIGS))
    else:
        for i, config in enumerate(configs):
            errors += opaque_config_errors(
                config if isinstance(config, dict) else {}, f"{path}.config[{i}]"
            )
    name = spec.get("extendedResourceName")
    if name is not None and not is_extended_resource_name(str(name)):
        errors.append(
            invalid(f"{path}.extendedResourceName", name, "must be a valid extended resource name")
        )
    return errors
