"""`simdra fleet`: many simulated DRA nodes in one process, for scale tests (the flags;
the fleet itself is `simdra._driver.fleet`, built on the public API, below this command
line and imported when the command runs: the other commands do not pay for it).
"""

from __future__ import annotations

import argparse
import logging
import os

from simdra._driver.cli.parser import SubParsers, UsageError, check, driver_name, integer

# (flag, env var, default, help)
_FLEET_FLAGS: list[tuple[str, str, str | None, str]] = [
    ("--kubeconfig", "KUBECONFIG", None, "kubeconfig file; unset means in-cluster config"),
    ("--driver-name", "DRIVER_NAME", "dra.example.com", "DRA driver name (a DNS subdomain)"),
    ("--nodes", "FLEET_NODES", "0", "number of nodes in the fleet (all shards together)"),
    ("--mix", "FLEET_MIX", "gpu8:100",
     "node shapes with percentages adding up to 100, e.g. gpu8:70,nic2:20,partitioned:10 "
     "(shapes: gpu8, gpu4, gpu8-shared, nic2, partitioned, gpu8-nic2, cpu; or an "
     "inventory file's path)"),
    ("--seed", "FLEET_SEED", "0", "seed of the shapes' and churn's draws"),
    ("--node-prefix", "FLEET_NODE_PREFIX", "simdra-fleet",
     "node names are <prefix>-<index>; also the value of the simdra.dev/fleet label"),
    ("--shard", "FLEET_SHARD", "0/1",
     "i/n: play only the nodes whose name hashes to shard i of n"),
    ("--prepare-latency", "FLEET_PREPARE_LATENCY", "0",
     "seconds between a claim reserved for a pod and its status.devices written"),
    ("--churn", "FLEET_CHURN", "",
     "events per minute: health=R (device taints flap), unplug=R (devices go and come "
     "back), nodes=R (nodes leave and join), e.g. health=6,unplug=1"),
    ("--metrics-port", "METRICS_PORT", "-1", "Prometheus metrics port (-1: off)"),
    ("--attach-selector", "FLEET_ATTACH_SELECTOR", "",
     "play existing nodes matching this label selector instead of creating nodes"),
    ("--log-format", "LOG_FORMAT", "text", "log format: text or json"),
    ("--verbosity", "VERBOSITY", "0", "log verbosity: 0 info, 1-3 driver debug, 4+ all debug"),
]


def add_parser(commands: SubParsers) -> None:
    """Register `fleet` with `simdra`'s sub-commands."""
    fleet = commands.add_parser("fleet", help="simulate many DRA nodes (scale tests)")
    for flag, env, default, text in _FLEET_FLAGS:
        fleet.add_argument(flag, default=os.environ.get(env, default),
                           help=f"{text} [env {env}; default {default}]")
    fleet.add_argument("--prune", action="store_true",
                       help="delete the fleet's nodes (and slices) this shard owns that the "
                       "fleet no longer has, e.g. after lowering --nodes")
    fleet.set_defaults(handler=handle, command_parser=fleet)


def handle(args: argparse.Namespace) -> int:
    """Check the flags, then run the fleet until SIGTERM/SIGINT."""
    from simdra._driver.kube import ClusterConfigError
    from simdra._driver.observability.logs import configure_logging

    log_format = check(args.log_format, "--log-format", lambda v: v in ("text", "json"),
                       "must be text or json")
    verbosity = integer(args.verbosity, "--verbosity", 0, 10)
    configure_logging(log_format, verbosity)
    if verbosity == 0:  # a line per pool and per pooled connection: thousands in a fleet
        logging.getLogger("simdra._driver.slices.publisher").setLevel(logging.WARNING)
        logging.getLogger("urllib3.connectionpool").setLevel(logging.ERROR)
    from simdra._driver.fleet.options import FlagError, config_from_args
    from simdra._driver.fleet.run import run_fleet

    try:
        config = config_from_args(args, driver_name(args.driver_name, "--driver-name"))
    except FlagError as err:
        raise UsageError(str(err)) from None
    try:
        return run_fleet(config)
    except ClusterConfigError as err:  # --kubeconfig, or no in-cluster configuration
        raise UsageError(str(err)) from None
