"""Churn on demand, reproducible by seed (pure): `--churn health=6,unplug=2,nodes=1`.

Rates are events per minute, per kind, over the whole fleet:

- `health`: a device's health flaps. A healthy device gets the taint
  `<driver>/unhealthy=true` with effect NoSchedule or NoExecute (the plugin's unhealthy
  taint; NoExecute evicts the pods using it); a tainted one is healthy again.
- `unplug`: a device disappears from its node's slices, or comes back.
- `nodes`: a node leaves (its Node and slices deleted), or joins again.

`churn_events` is a pure function of the seed, the rates and the fleet: the same seed
gives the same events at the same offsets, whatever the API server does; each kind's
events are a Poisson process. `churned_inventory` applies the current state to a node's
planned inventory.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

from simdra._driver.api import Device, Inventory

KINDS = ("health", "unplug", "nodes")
EFFECTS = ("NoSchedule", "NoExecute")
MAX_RATE = 6000.0  # events per minute per kind: 100 a second
T = TypeVar("T")


class ChurnError(ValueError):
    """A `--churn` that cannot be used."""


@dataclass(frozen=True)
class ChurnRates:
    """Events per minute of each kind (0: none)."""

    health: float = 0.0
    unplug: float = 0.0
    nodes: float = 0.0

    def any(self) -> bool:
        """True when some kind of churn is asked for."""
        return any(getattr(self, kind) > 0 for kind in KINDS)


def parse_churn(text: str) -> ChurnRates:
    """`kind=rate,...` (kinds: health, unplug, nodes; rates per minute); "" is none."""
    rates: dict[str, float] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        kind, sep, value = item.partition("=")
        if not sep or kind not in KINDS:
            raise ChurnError(f"{item!r} is not kind=rate with kind one of {', '.join(KINDS)}")
        if kind in rates:
            raise ChurnError(f"{kind} appears twice")
        try:
            rate = float(value)
        except ValueError:
            raise ChurnError(f"{item!r}: the rate is not a number") from None
        if not 0 <= rate <= MAX_RATE:
            raise ChurnError(f"{item!r}: the rate must be between 0 and {MAX_RATE:g} a minute")
        rates[kind] = rate
    return ChurnRates(**rates)


@dataclass(frozen=True)
class ChurnEvent:
    """One event, `at` seconds after churn started."""

    at: float
    kind: str  # health | unplug | nodes
    action: str  # taint | untaint | unplug | plug | leave | join
    node: str
    device: str = ""
    effect: str = ""  # of a taint

    def line(self) -> str:
        """The event as one log line."""
        target = f"{self.node}/{self.device}" if self.device else self.node
        effect = f" {self.effect}" if self.effect else ""
        return f"churn {self.kind}: {self.action} {target}{effect} at +{self.at:.1f}s"


def churn_events(rates: ChurnRates, seed: int, nodes: Sequence[str],
                 devices: Mapping[str, Sequence[str]]) -> Iterator[ChurnEvent]:
    """The endless event sequence for this fleet (nodes, each node's device names)."""
    rng = random.Random(seed)
    state = _State()
    due = {kind: rng.expovariate(getattr(rates, kind) / 60.0)
           for kind in KINDS if getattr(rates, kind) > 0}
    while due and nodes:
        kind = min(due, key=lambda k: (due[k], k))
        at = due[kind]
        due[kind] = at + rng.expovariate(getattr(rates, kind) / 60.0)
        event = state.next(kind, at, rng, nodes, devices)
        if event is not None:
            yield event


class _State:
    """What churn changed so far: the toggles' current sides."""

    def __init__(self) -> None:
        self.tainted: set[tuple[str, str]] = set()
        self.unplugged: set[tuple[str, str]] = set()
        self.gone: set[str] = set()

    def next(self, kind: str, at: float, rng: random.Random, nodes: Sequence[str],
             devices: Mapping[str, Sequence[str]]) -> ChurnEvent | None:
        node = nodes[rng.randrange(len(nodes))]
        if kind == "nodes":
            action = "join" if node in self.gone else "leave"
            _toggle(self.gone, node)
            return ChurnEvent(at, kind, action, node)
        names = devices.get(node) or ()
        if node in self.gone or not names:
            return None  # a departed or empty node: nothing to flap this time
        key = (node, names[rng.randrange(len(names))])
        effect = rng.choice(EFFECTS)
        if kind == "health":
            tainted = _toggle(self.tainted, key)
            return ChurnEvent(at, kind, "taint" if tainted else "untaint", node, key[1],
                              effect if tainted else "")
        unplugged = _toggle(self.unplugged, key)
        return ChurnEvent(at, kind, "unplug" if unplugged else "plug", node, key[1])


def _toggle(items: set[T], item: T) -> bool:
    """Flip membership; True when `item` is now in."""
    if item in items:
        items.discard(item)
        return False
    items.add(item)
    return True


def unhealthy_taint(driver: str, effect: str) -> dict[str, str]:
    """The taint a flapping device carries (the plugin's, with the event's effect)."""
    return {"key": f"{driver}/unhealthy", "value": "true", "effect": effect}


def churned_inventory(planned: Inventory, driver: str, taints: Mapping[str, str],
                      unplugged: frozenset[str] | set[str]) -> Inventory:
    """`planned` without the unplugged devices and with the tainted ones' taints
    (device name -> effect)."""
    if not taints and not unplugged:
        return planned
    return Inventory(pools=tuple(
        dataclasses.replace(pool, devices=tuple(
            _tainted(device, driver, taints.get(device.name))
            for device in pool.devices if device.name not in unplugged))
        for pool in planned.pools))


def _tainted(device: Device, driver: str, effect: str | None) -> Device:
    if effect is None:
        return device
    taint = unhealthy_taint(driver, effect)
    spec = dict(device.spec)
    others = [t for t in spec.get("taints", []) if t.get("key") != taint["key"]]
    spec["taints"] = [*others, taint]
    return dataclasses.replace(device, spec=spec)
