"""`simdra fleet`'s settings: one frozen value checked from the flags before anything
starts (each shape of the mix is planned once, so a bad inventory file is a bad flag).
A bad flag is a FlagError whose message names it."""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from simdra._driver.core.flag_values import FlagValueError, bounded_int, bounded_number
from simdra._driver.fleet.churn import ChurnRates, parse_churn
from simdra._driver.fleet.mix import Mix, parse_mix
from simdra._driver.fleet.pool_plan import PlanError, plan_inventory
from simdra._driver.fleet.shard import Shard, parse_shard

# A node name prefix leaves room for `-<index>` in a DNS subdomain label.
_PREFIX = re.compile(r"^[a-z0-9]([-a-z0-9]{0,46}[a-z0-9])?$")
MAX_NODES = 100_000
T = TypeVar("T")


class FlagError(ValueError):
    """A flag with a bad value: `--flag=value: why`."""


@dataclass(frozen=True)
class FleetConfig:
    """Everything `simdra fleet` needs."""

    driver_name: str
    mix: Mix
    nodes: int = 0
    seed: int = 0
    kubeconfig: str | None = None
    node_prefix: str = "simdra-fleet"
    shard: Shard = field(default_factory=Shard)
    prepare_latency: float = 0.0
    churn: ChurnRates = field(default_factory=ChurnRates)
    metrics_port: int = -1
    attach_selector: str | None = None
    prune: bool = False


def config_from_args(args: argparse.Namespace, driver_name: str) -> FleetConfig:
    """Check the parsed flags (`driver_name` already checked by the caller)."""
    attach = args.attach_selector or None
    nodes = _integer(args.nodes, "--nodes", 0 if attach else 1, MAX_NODES)
    prefix = args.node_prefix
    if not _PREFIX.match(prefix):
        raise FlagError(f"--node-prefix={prefix!r}: must be lower-case letters, digits and "
                        "'-', starting and ending with a letter or digit, at most 48")
    if args.prune and attach:
        raise FlagError("--prune: not with --attach-selector (attached nodes are not ours)")
    mix = _parsed(parse_mix, args.mix, "--mix")
    for shape, _percent in mix.parts:
        try:
            plan_inventory(f"{prefix}-check", driver_name, shape)
        except PlanError as err:
            raise FlagError(f"--mix={args.mix!r}: {err}") from None
    return FleetConfig(
        driver_name=driver_name,
        mix=mix,
        nodes=nodes,
        seed=_integer(args.seed, "--seed", 0, 2**63 - 1),
        kubeconfig=args.kubeconfig or None,
        node_prefix=prefix,
        shard=_parsed(parse_shard, args.shard, "--shard"),
        prepare_latency=_number(args.prepare_latency, "--prepare-latency", 0, 3600),
        churn=_parsed(parse_churn, args.churn, "--churn"),
        metrics_port=_integer(args.metrics_port, "--metrics-port", -1, 65535),
        attach_selector=attach,
        prune=bool(args.prune),
    )


def _parsed(parse: Callable[[str], T], value: str, flag: str) -> T:
    """`parse(value)`; its ValueError (MixError, ShardError, ChurnError) as a FlagError."""
    try:
        return parse(value)
    except ValueError as err:
        raise FlagError(f"{flag}={value!r}: {err}") from None


def _integer(value: str, flag: str, low: int, high: int) -> int:
    try:
        return bounded_int(value, flag, low, high)
    except FlagValueError as err:
        raise FlagError(str(err)) from None


def _number(value: str, flag: str, low: float, high: float) -> float:
    try:
        return bounded_number(value, flag, low, high)
    except FlagValueError as err:
        raise FlagError(str(err)) from None
