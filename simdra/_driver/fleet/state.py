"""What each played node publishes now: its planned inventory with churn applied
(thread-safe; the churn thread changes it, the claim thread reads it)."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from simdra._driver.api import Inventory
from simdra._driver.fleet.churn import ChurnEvent, churned_inventory


@dataclass
class NodeState:
    """One node: its plan, and what churn did to it."""

    planned: Inventory
    taints: dict[str, str] = field(default_factory=dict)  # device -> effect
    unplugged: set[str] = field(default_factory=set)
    present: bool = True


class FleetState:
    """Node name -> NodeState; `apply` returns the node's new inventory to publish."""

    def __init__(self, driver: str) -> None:
        self._driver = driver
        self._lock = threading.Lock()
        self._nodes: dict[str, NodeState] = {}
        self._pools: dict[str, str] = {}  # pool -> node

    def add(self, node: str, planned: Inventory) -> None:
        """A node played from now on."""
        with self._lock:
            self._nodes[node] = NodeState(planned)
            self._pools.update({pool.name: node for pool in planned.pools})

    def forget(self, node: str) -> None:
        """`node` is no longer played (a Node not the fleet's took its name)."""
        with self._lock:
            state = self._nodes.pop(node, None)
            for pool in state.planned.pools if state else ():
                self._pools.pop(pool.name, None)

    def plays(self, node: str) -> bool:
        """Whether `node` is played (present or departed)."""
        with self._lock:
            return node in self._nodes

    def names(self) -> list[str]:
        """The played nodes, sorted."""
        with self._lock:
            return sorted(self._nodes)

    def device_names(self) -> dict[str, list[str]]:
        """Each node's planned device names (what churn picks from)."""
        with self._lock:
            return {name: [d.name for _p, d in state.planned.devices()]
                    for name, state in self._nodes.items()}

    def node_of_pool(self, pool: str) -> str | None:
        """The played node whose pool this is, or None."""
        with self._lock:
            return self._pools.get(pool)

    def inventory(self, node: str) -> Inventory | None:
        """What `node` publishes now (None: not played or departed)."""
        with self._lock:
            state = self._nodes.get(node)
            if state is None or not state.present:
                return None
            return churned_inventory(state.planned, self._driver, state.taints,
                                     state.unplugged)

    def apply(self, event: ChurnEvent) -> Inventory | None:
        """Record `event`; the node's inventory after it (None: the node left)."""
        with self._lock:
            state = self._nodes.get(event.node)
            if state is None:
                return None
            if event.action in ("leave", "join"):
                state.present = event.action == "join"
            elif event.action == "taint":
                state.taints[event.device] = event.effect
            elif event.action == "untaint":
                state.taints.pop(event.device, None)
            elif event.action == "unplug":
                state.unplugged.add(event.device)
            elif event.action == "plug":
                state.unplugged.discard(event.device)
        return self.inventory(event.node)
