"""The DeviceClasses a test node has: those of the registered kinds, generated as the
deployment's are (`simdra._driver.devices.device_classes`), for simdra's kinds and for those a
plugin is started with (`--kind` in its arguments)."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from kubernetes import client

from simdra._driver.builtins import BUILTIN
from simdra._driver.devices.device_classes import device_classes
from simdra._driver.devices.kind_registry import load_kinds
from simdra._driver.testing.apiserver import APIServer


def create_device_classes(api: APIServer, resource: client.ResourceV1Api, driver_name: str,
                          kinds: Sequence[str] = ()) -> list[str]:
    """Create the DeviceClasses of simdra's kinds and those `kinds` names
    (package.module:Class) that `api` does not hold yet; their names.
    KindRegistrationError when the kinds cannot be registered together."""
    created = []
    for body in device_classes(load_kinds(BUILTIN.kinds, kinds), driver_name):
        name = body["metadata"]["name"]
        if api.get_object("deviceclasses", name) is None:
            # A plain dict: the client turns it into its model (see LocalCluster.start).
            resource.create_device_class(body)  # type: ignore[arg-type]
            created.append(name)
    return created


def kind_values(args: Sequence[str]) -> tuple[str, ...]:
    """The `package.module:Class` specs that `--kind` (repeated, comma lists) names in
    `simdra run` arguments."""
    values = [value for flag, value in itertools.pairwise(args) if flag == "--kind"]
    values += [arg.split("=", 1)[1] for arg in args if arg.startswith("--kind=")]
    specs = (spec.strip() for value in values for spec in value.split(","))
    return tuple(dict.fromkeys(spec for spec in specs if spec))
