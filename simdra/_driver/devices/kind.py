"""A device kind, declared in one place: `DeviceKind`, its fake-mode `FakeProfile`s and
what a profile builds.

A kind is everything simdra needs to know about one type of device besides where the
devices come from: its name (the `type` attribute every device of the kind publishes,
and the DeviceClass `<name>.<driver name>` that selects them), the fake profiles that
simulate it, the opaque config kinds its devices take, the attributes that reach the
container environment and an optional extra condition for its DeviceClass. The plugin
derives the rest from the registered kinds (`simdra._driver.devices.kind_registry`): the
`--device-profile` names, the claim rules, the DeviceClasses, `simdra demo`, error texts.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar

from simdra._driver.devices.config_handler import ConfigHandler
from simdra._driver.devices.model import JSON, Device


@dataclass(frozen=True)
class ProfileContext:
    """What a fake profile builds its devices from: names that make them unique.

    Example::

        def crypto_device(context: ProfileContext, index: int) -> Device:
            serial = stable_uuid(context.driver_name, context.node_name, f"crypto-{index}")
            ...
    """

    driver_name: str
    node_name: str


@dataclass(frozen=True)
class ProfileDevices:
    """What one device index of a profile adds to the pool: devices and the counter sets
    (v1 CounterSet JSON) they consume.

    Example (a card and two partitions that share its memory)::

        def card(context: ProfileContext, index: int) -> ProfileDevices:
            memory = {"name": f"card-{index}", "counters": {"memory": {"value": "16Gi"}}}
            return ProfileDevices(devices=(whole(index), half(index, 0), half(index, 1)),
                                  shared_counters=(memory,))
    """

    devices: tuple[Device, ...]
    shared_counters: tuple[JSON, ...] = ()
    # The pool's partition type attribute (`Pool.partition_type_attribute`), fully
    # qualified, when these devices are partitions labelled by one.
    partition_type_attribute: str | None = None


# What a fake profile calls for each device index (`simdra.ProfileBuild`): a function of
# the ProfileContext and the index that returns one Device, or ProfileDevices for
# several devices (partitions) and the counter sets they consume.
ProfileBuild = Callable[[ProfileContext, int], "Device | ProfileDevices"]


@dataclass(frozen=True)
class FakeProfile:
    """A `--device-profile` name of fake-device mode and how it builds device `index`.

    Example::

        FakeProfile("crypto", build=lambda context, index: Device(spec={...}))
    """

    name: str
    build: ProfileBuild
    description: str = ""

    def devices(self, context: ProfileContext, index: int) -> ProfileDevices:
        """What device `index` of this profile adds, as ProfileDevices."""
        made = self.build(context, index)
        return made if isinstance(made, ProfileDevices) else ProfileDevices((made,))


class DeviceKind:
    """One type of device: subclass it and set the class attributes.

    Example::

        class CryptoKind(DeviceKind):
            \"\"\"Simulated crypto accelerators.\"\"\"

            name = "crypto"
            env_attributes = {"model": "MODEL"}
            config_handlers = (CryptoConfigHandler(),)
            profiles = (FakeProfile("crypto", build=crypto_device),)

    Registered with `simdra run --kind package.module:CryptoKind` (or
    `simdra.main(kinds=(CryptoKind,))`); the first paragraph of its docstring describes
    it in `simdra kinds` and above its DeviceClass.

    The class attributes: `name`, the devices' `type` attribute (a DNS label; the
    DeviceClass is `<name>.<driver name>`, and each config handler's `device_type` is
    `name`); `env_attributes`, attribute -> env KEY; `config_handlers`; `profiles` for
    fake-device mode; `device_class_condition`, an extra CEL condition of the class;
    `skip_node_operations`, the kubelet calls its devices need none of: ("*",) or
    ("NodePrepareResources", "NodeUnprepareResources"), for a kind with nothing to set
    up on the node (Kubernetes 1.37, gate DRAOptionalNodeOperations).
    """

    # The `type` attribute of its devices (a DNS label); its DeviceClass is
    # `<name>.<driver name>`.
    name: ClassVar[str] = ""
    # Attribute name (as published) -> env KEY: those attributes reach the container as
    # SIMDRA_DEVICE_<ID>_<KEY>.
    env_attributes: ClassVar[Mapping[str, str]] = {}
    # The opaque config kinds its devices take; each handler's device_type is `name`.
    config_handlers: ClassVar[Sequence[ConfigHandler]] = ()
    # Fake-device mode: the `--device-profile` names that simulate it. All profiles of
    # one kind name their devices alike, so an inventory takes at most one of them.
    profiles: ClassVar[Sequence[FakeProfile]] = ()
    # An extra CEL condition for its DeviceClass ("DRIVER" stands for the driver name),
    # e.g. '!device.attributes["DRIVER"].state.endsWith("error")'.
    device_class_condition: ClassVar[str | None] = None
    # The node operations its devices need none of (ResourceSlice `skipNodeOperations`:
    # ("*",) or ("NodePrepareResources", "NodeUnprepareResources")), for a kind with
    # nothing to set up on the node: with Kubernetes 1.37's DRAOptionalNodeOperations the
    # kubelet then never calls the plugin for claims of these devices alone. Fake
    # profiles give it to the devices they build; a backend sets
    # `Device.skip_node_operations` itself.
    skip_node_operations: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def description(cls) -> str:
        """The first paragraph of the kind's own docstring, on one line ("" without one)."""
        doc = vars(cls).get("__doc__") or ""
        return " ".join(doc.strip().split("\n\n", 1)[0].split())
