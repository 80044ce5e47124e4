"""The `simdra` command line: every flag of `run` can also come from an environment variable,
with the names users of the Go DRA drivers already know."""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Callable, Sequence
from importlib import metadata
from pathlib import Path

from driver.cli_parser import OneLineParser
from driver.config import Config
from driver.fault_cli import add_fault_parser
from driver.usage import usage_main

_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")

# (flag, env var, default, help)
_RUN_FLAGS: list[tuple[str, str, str | None, str]] = [
    ("--node-name", "NODE_NAME", None, "name of the node this plugin runs on (required)"),
    ("--driver-name", "DRIVER_NAME", "dra.example.com", "DRA driver name (a DNS subdomain)"),
    ("--kubeconfig", "KUBECONFIG", None, "kubeconfig file; unset means in-cluster config"),
    ("--kubelet-registrar-directory-path", "KUBELET_REGISTRAR_DIRECTORY_PATH",
     "/var/lib/kubelet/plugins_registry", "kubelet plugin registration directory"),
    ("--kubelet-plugins-directory-path", "KUBELET_PLUGINS_DIRECTORY_PATH",
     "/var/lib/kubelet/plugins", "directory holding the plugin's data directory"),
    ("--cdi-root", "CDI_ROOT", "/var/run/cdi", "directory for generated CDI spec files"),
    ("--device-backend", "DEVICE_BACKEND", "fake",
     "device backend: a registered name (driver/devices/registry.py: fake, sysfs, ...) "
     "or package.module:ClassName"),
    ("--device-profile", "DEVICE_PROFILE", "gpu",
     "fake devices: comma list of gpu | gpu-shared | gpu-partitioned, and nic; "
     "or the path of an inventory file (a value with a / or a .yaml/.yml/.json suffix)"),
    ("--num-devices", "NUM_DEVICES", "8", "number of fake devices per profile"),
    ("--sysfs-root", "SYSFS_ROOT", "/sys", "sysfs mount the sysfs backend reads"),
    ("--dev-root", "DEV_ROOT", "/dev",
     "where the sysfs backend finds device nodes (the host's /dev as mounted here)"),
    ("--pod-uid", "POD_UID", None, "pod UID; when set, socket names allow rolling updates"),
    ("--healthcheck-port", "HEALTHCHECK_PORT", "-1", "gRPC health port (-1: off)"),
    ("--metrics-port", "METRICS_PORT", "-1", "Prometheus metrics port (-1: off)"),
    ("--rescan-interval", "RESCAN_INTERVAL", "10",
     "seconds between device rescans (an inventory file is also watched for changes)"),
    ("--claim-status", "CLAIM_STATUS", "false",
     "write status.devices of prepared claims (true/false; needs extra RBAC)"),
    ("--log-format", "LOG_FORMAT", "text", "log format: text or json"),
    ("--verbosity", "VERBOSITY", "0", "log verbosity: 0 info, 1-3 driver debug, 4+ all debug"),
]
_BOOLEANS = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}


class UsageError(Exception):
    """A flag has a bad value; the message names the flag and the problem."""


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `simdra` console script."""
    words = list(sys.argv[1:] if argv is None else argv)
    if words[:1] == ["usage"]:  # its own parser: every word after `usage` is its own
        return usage_main(words[1:])
    parser = _parser()
    args = parser.parse_args(words)
    if not getattr(args, "command", None):
        parser.print_help()
        return 2
    try:
        return int(args.handler(args) or 0)
    except UsageError as err:
        print(f"simdra {args.command}: {err}", file=sys.stderr)
        return 2


def _parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="simdra", description=__doc__)
    parser.add_argument("--version", action="version", version=f"simdra {_version()}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND",
                                     parser_class=OneLineParser)
    run = commands.add_parser("run", help="run the kubelet plugin")
    for flag, env, default, text in _RUN_FLAGS:
        names = [flag, "-v"] if flag == "--verbosity" else [flag]
        run.add_argument(*names, default=os.environ.get(env, default),
                         help=f"{text} [env {env}; default {default}]")
    run.set_defaults(handler=_run)
    add_fault_parser(commands)
    # Listed for --help only; main() hands `usage` to its own parser.
    commands.add_parser("usage", help="show consumed device capacity from the plugin's state")
    demo = commands.add_parser("demo", help="end-to-end demo with an API stand-in and kubelet")
    demo.add_argument("--keep", action="store_true", help="keep the demo's temporary directory")
    demo.set_defaults(handler=_demo)
    return parser


def _version() -> str:
    """The installed package's version (pyproject.toml is the only place it is written)."""
    try:
        return metadata.version("simdra")
    except metadata.PackageNotFoundError:  # run from a source tree that is not installed
        return "unknown (not installed)"


def config_from_args(args: argparse.Namespace) -> Config:
    """Validate `run` flags into a Config; raises UsageError naming the flag."""
    if not args.node_name:
        raise UsageError("--node-name (env NODE_NAME) is required")
    driver = _check(args.driver_name, "--driver-name", _valid_driver_name,
                    "must be a lower-case DNS subdomain of at most 63 characters")
    backend = _backend(args.device_backend)
    return Config(
        node_name=args.node_name,
        driver_name=driver,
        kubeconfig=args.kubeconfig or None,
        registrar_dir=Path(args.kubelet_registrar_directory_path),
        plugins_dir=Path(args.kubelet_plugins_directory_path),
        cdi_root=Path(args.cdi_root),
        device_backend=backend,
        device_profile=_profile(args.device_profile),
        sysfs_root=Path(args.sysfs_root),
        dev_root=Path(args.dev_root),
        num_devices=_int(args.num_devices, "--num-devices", 0, 100_000),
        pod_uid=args.pod_uid or None,
        healthcheck_port=_int(args.healthcheck_port, "--healthcheck-port", -1, 65535),
        metrics_port=_int(args.metrics_port, "--metrics-port", -1, 65535),
        rescan_interval=_float(args.rescan_interval, "--rescan-interval", 0.5, 86400),
        claim_status=_bool(args.claim_status, "--claim-status"),
        log_format=_check(args.log_format, "--log-format", lambda v: v in ("text", "json"),
                          "must be text or json"),
        verbosity=_int(args.verbosity, "--verbosity", 0, 10),
    )


def _backend(value: str) -> str:
    """A registered backend name, or a `module:Class` that imports and has `discover()`;
    a registered backend is imported too, so a broken one fails here, not later."""
    from driver.devices.loader import BackendSpecError, load_backend_class
    from driver.devices.registry import BACKENDS, backend_spec

    try:
        load_backend_class(backend_spec(value))
    except BackendSpecError as err:
        rule = f"must be one of {', '.join(BACKENDS)} or package.module:ClassName"
        raise UsageError(f"--device-backend={value!r}: {rule}; {err}") from None
    return value


def _profile(value: str) -> str:
    """Built-in profile names (a comma list), or the path of a readable inventory file.

    A value is a path only if it looks like one (has a `/` or a .yaml/.yml/.json
    suffix), so a mistyped profile name is reported as one, not as a missing file.
    """
    from driver.devices.profiles import looks_like_path, parse_profiles

    if looks_like_path(value):
        try:
            with open(value, "rb"):
                pass
        except OSError as err:
            raise UsageError(f"--device-profile={value!r}: cannot read the inventory "
                             f"file: {err.strerror or err}") from None
        return value
    try:
        parse_profiles(value)
    except ValueError as err:
        raise UsageError(f"--device-profile={value!r}: {err}; or give the path of an "
                         "inventory file (with a / or a .yaml, .yml or .json suffix)") from None
    return value


def _valid_driver_name(value: str) -> bool:
    return len(value) <= 63 and bool(_DNS_SUBDOMAIN.match(value))


def _check(value: str, flag: str, ok: Callable[[str], bool], rule: str) -> str:
    if not ok(value):
        raise UsageError(f"{flag}={value!r}: {rule}")
    return value


def _int(value: str, flag: str, low: int, high: int) -> int:
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise UsageError(f"{flag}={value!r}: not an integer") from None
    if not low <= number <= high:
        raise UsageError(f"{flag}={number}: must be between {low} and {high}")
    return number


def _float(value: str, flag: str, low: float, high: float) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise UsageError(f"{flag}={value!r}: not a number") from None
    if not low <= number <= high:
        raise UsageError(f"{flag}={number:g}: must be between {low:g} and {high:g}")
    return number


def _bool(value: str, flag: str) -> bool:
    try:
        return _BOOLEANS[str(value).strip().lower()]
    except KeyError:
        raise UsageError(f"{flag}={value!r}: must be true or false") from None


def _run(args: argparse.Namespace) -> int:
    from driver.kube import ClusterConfigError
    from driver.plugin import run_plugin  # imported late: `simdra --help` stays fast

    config = config_from_args(args)
    try:
        return run_plugin(config)
    except ClusterConfigError as err:  # --kubeconfig, or no in-cluster configuration
        raise UsageError(str(err)) from None


def _demo(args: argparse.Namespace) -> int:
    from driver.testing.demo import run_demo

    return run_demo(keep=args.keep)
