"""The device kinds a plugin knows: simdra's own plus those named with `--kind`.

Kinds are registered all at once or not at all: `load_kinds` imports every spec, checks
each declaration and every pair of kinds (one name, one profile name, one config kind,
one env key per attribute), and only then returns a `KindSet`. What is wrong is one line
naming both sides and the fix; the command line turns it into exit status 2.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

from simdra._driver.core.validation.slice_options import skip_node_operations_errors
from simdra._driver.devices.config_handler import ConfigHandler
from simdra._driver.devices.kind import DeviceKind, FakeProfile
from simdra._driver.devices.loader import BackendSpecError, load_class

# Keys the plugin sets itself for every device (simdra._driver.claims.plan.cdi); an attribute mapped
# to one of them would give the container two values for one name.
RESERVED_ENV_KEYS = frozenset({"NAME", "POOL", "TYPE", "CDI_DEVICE", "CLAIM", "CLAIM_UID",
                               "REQUEST", "SHARE_ID", "ADMIN_ACCESS", "PARTITION"})
_ENV_KEY = re.compile(r"^[A-Z][A-Z0-9_]*$")
_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


class KindRegistrationError(ValueError):
    """A kind cannot be registered; the message names it (and the other side) and the fix."""


def kind_spec(kind: type) -> str:
    """`package.module:ClassName` of a kind class, as `--kind` takes it."""
    return f"{kind.__module__}:{kind.__qualname__}"


@dataclass(frozen=True)
class KindSet:
    """The registered kinds, checked together; what the plugin derives from them. A
    backend finds them in `BackendContext.kinds`.

    Example (in a backend)::

        kinds: KindSet = context.kinds
        if kinds.kind("crypto") is None:
            ...  # the crypto kind is not registered: publish no crypto devices
    """

    kinds: tuple[type[DeviceKind], ...]

    def names(self) -> tuple[str, ...]:
        """The kinds' names (the `type` attribute values), in registration order."""
        return tuple(kind.name for kind in self.kinds)

    def kind(self, name: str) -> type[DeviceKind] | None:
        """The kind called `name`, or None."""
        return next((kind for kind in self.kinds if kind.name == name), None)

    def profiles(self) -> dict[str, tuple[type[DeviceKind], FakeProfile]]:
        """Every fake profile name -> (its kind, the profile)."""
        return {profile.name: (kind, profile)
                for kind in self.kinds for profile in kind.profiles}

    def config_handlers(self) -> tuple[ConfigHandler, ...]:
        """Every kind's opaque config handlers."""
        return tuple(handler for kind in self.kinds for handler in kind.config_handlers)

    def env_attributes(self) -> Mapping[str, str]:
        """Attribute -> env KEY, of all kinds together (checked to agree)."""
        merged = {attr: key for kind in self.kinds for attr, key in kind.env_attributes.items()}
        return MappingProxyType(merged)


def load_kinds(builtin: Sequence[type] = (), specs: Iterable[str] = (),
               extra: Sequence[type] = ()) -> KindSet:
    """The kinds of `builtin` (a catalog's, handed down by the caller), those `specs`
    name (`package.module:Class`) and the classes in `extra`, registered together in that
    order. KindRegistrationError names the first problem; nothing is registered then."""
    named = [(kind_spec(kind), kind) for kind in builtin]
    named += [(spec, _load(spec)) for spec in specs]
    named += [(kind_spec(kind), kind) for kind in extra]
    kinds: list[type[DeviceKind]] = []
    for spec, found in named:
        kind = _checked(spec, found)
        if kind not in kinds:  # the same class named twice registers once
            _check_pairs(kinds, kind)
            kinds.append(kind)
    return KindSet(tuple(kinds))


def plugin_kinds(builtin: Sequence[type], specs: Iterable[str],
                 backend_class: type) -> KindSet:
    """The kinds of a plugin: the catalog's (`builtin`), those `--kind` names and those
    the backend brings (DeviceKind classes in its `kinds`); the kinds it names as text
    must be among them. KindRegistrationError names what is wrong."""
    declared = tuple(getattr(backend_class, "kinds", None) or ())
    brought = [kind for kind in declared if isinstance(kind, type)]
    kinds = load_kinds(builtin, specs, extra=brought)
    for name in declared:
        if isinstance(name, str) and kinds.kind(name) is None:
            raise KindRegistrationError(
                f"backend {kind_spec(backend_class)} publishes devices of kind {name!r}, "
                f"which no registered kind is named ({', '.join(kinds.names())}); register "
                "it with --kind package.module:Class")
    return kinds


def _load(spec: str) -> type:
    try:
        return load_class(spec)
    except BackendSpecError as err:
        raise KindRegistrationError(
            f"kind {spec.strip()!r}: {err}; correct the --kind value, or install the "
            "module and what it imports where the plugin's Python finds them") from None


def _checked(spec: str, found: type) -> type[DeviceKind]:
    if not issubclass(found, DeviceKind):
        raise KindRegistrationError(
            f"kind {spec}: {found.__name__} is not a DeviceKind; subclass simdra.DeviceKind")
    problems = _declaration_problems(found)
    if problems:
        raise KindRegistrationError(f"kind {spec}: {problems[0]}")
    return found


def _declaration_problems(kind: type[DeviceKind]) -> list[str]:
    problems = []
    if not _LABEL.match(kind.name):
        problems.append(f"name {kind.name!r} is not a DNS label (lower-case letters, digits "
                        "and -, at most 63); set `name` to one")
    for attribute, key in kind.env_attributes.items():
        if not _ENV_KEY.match(key) or key in RESERVED_ENV_KEYS or key.startswith("CAPACITY_"):
            problems.append(
                f"env_attributes[{attribute!r}] = {key!r}: env keys are upper-case letters, "
                f"digits and _, and not one the plugin sets itself "
                f"({', '.join(sorted(RESERVED_ENV_KEYS))}, CAPACITY_*)")
    condition = kind.device_class_condition
    if condition is not None and (not condition.strip() or "\n" in condition):
        problems.append(f"device_class_condition {condition!r} is not one line of CEL; "
                        "write the condition on one line (or set it to None)")
    keys = list(kind.env_attributes.values())
    for key in sorted({key for key in keys if keys.count(key) > 1}):
        attributes = [a for a, k in kind.env_attributes.items() if k == key]
        problems.append(f"env_attributes {' and '.join(map(repr, attributes))} are both "
                        f"mapped to {key!r}; give each attribute its own key")
    skip = kind.skip_node_operations
    if skip_node_operations_errors(list(skip) if isinstance(skip, tuple) else skip, "skip"):
        problems.append(f"skip_node_operations {skip!r} is not a tuple of ResourceSlice "
                        f"skipNodeOperations; use ('*',) or ('NodePrepareResources', "
                        f"'NodeUnprepareResources')")
    for handler in kind.config_handlers:
        problems += _handler_problems(handler)
        if getattr(handler, "device_type", None) != kind.name:
            problems.append(f"config kind {handler.kind} configures devices of type "
                            f"{handler.device_type!r}, not {kind.name!r}; set its device_type "
                            f"to {kind.name!r}")
    return problems


# What every ConfigHandler implements (a Protocol: nothing checks it until a prepare calls
# the missing one, which would then fail every claim that uses the config).
_HANDLER_METHODS = ("decode", "problems", "device_problems", "env")


def _handler_problems(handler: ConfigHandler) -> list[str]:
    name = type(handler).__name__
    missing = [m for m in _HANDLER_METHODS if not callable(getattr(handler, m, None))]
    if missing:
        return [f"config handler {name} has no {', '.join(f'{m}()' for m in missing)}; a "
                f"ConfigHandler implements {', '.join(_HANDLER_METHODS)} (return [] where "
                "there is nothing to check)"]
    return []


def _check_pairs(registered: Sequence[type[DeviceKind]], new: type[DeviceKind]) -> None:
    for old in registered:
        problem = _clash(old, new)
        if problem:
            raise KindRegistrationError(
                f"kinds {kind_spec(old)} and {kind_spec(new)}: {problem}")


def _clash(old: type[DeviceKind], new: type[DeviceKind]) -> str | None:
    if old.name == new.name:
        return f"both are named {new.name!r}; rename one (its `name`) or register only one"
    profiles = {p.name for p in old.profiles} & {p.name for p in new.profiles}
    if profiles:
        return (f"both declare the fake profile {min(profiles)!r}; rename one of the "
                "profiles")
    configs = ({(h.api_version, h.kind) for h in old.config_handlers}
               & {(h.api_version, h.kind) for h in new.config_handlers})
    if configs:
        api_version, config_kind = min(configs)
        return (f"both declare the config kind {api_version} {config_kind}; give one its "
                "own apiVersion or kind")
    for attribute, key in new.env_attributes.items():
        other = old.env_attributes.get(attribute)
        if other is not None and other != key:
            return (f"env_attributes[{attribute!r}] is {other!r} in the first and {key!r} "
                    "in the second; map the attribute to one key in both")
    # Every device gets the env keys of all kinds' attributes it has: two attributes
    # under one key would give a device that has both two values for it.
    for attribute, key in new.env_attributes.items():
        taken = _attribute_of(old.env_attributes, key)
        if taken is not None and taken != attribute:
            return (f"env key {key!r} is env_attributes[{taken!r}] in the first and "
                    f"env_attributes[{attribute!r}] in the second; give one attribute "
                    "another key")
    return None


def _attribute_of(env_attributes: Mapping[str, str], key: str) -> str | None:
    return next((attribute for attribute, k in env_attributes.items() if k == key), None)
