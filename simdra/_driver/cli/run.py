"""`simdra run`: the plugin's flags, each also read from an environment variable with the
name users of the Go DRA drivers already know, checked into a Config before anything
starts. Imports nothing heavy until the flags are good (and nothing of simdra._driver.testing)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from simdra._driver.builtins import BUILTIN
from simdra._driver.claims.reconcile.plan import MIN_GRACE_S, MODES
from simdra._driver.cli.kinds import add_kind_flag, kind_specs
from simdra._driver.cli.parser import (
    SubParsers,
    UsageError,
    boolean,
    check,
    driver_name,
    integer,
    number,
)
from simdra._driver.config import Config
from simdra._driver.devices.kind_registry import KindSet

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
     "device backend: a registered name (fake, sysfs, fpga) or package.module:ClassName"),
    ("--device-profile", "DEVICE_PROFILE", "gpu",
     "fake devices: comma list of the registered kinds' profiles (`simdra kinds` lists "
     "them), at most one per kind; or the path of an inventory file (a value with a / or "
     "a .yaml/.yml/.json suffix)"),
    ("--num-devices", "NUM_DEVICES", "8", "number of fake devices per profile"),
    ("--sysfs-root", "SYSFS_ROOT", "/sys", "sysfs mount the sysfs backend reads"),
    ("--dev-root", "DEV_ROOT", "/dev",
     "where the sysfs backend finds device nodes (the host's /dev as mounted here)"),
    ("--proc-root", "PROC_ROOT", "",
     "procfs where the sysfs backend reads the host's default routes (<root>/1/net/route, "
     "ipv6_route): in a pod, the host's /proc mounted there; unset: /proc if "
     "--sysfs-root is /sys, else no routes"),
    ("--sysfs-allow", "SYSFS_ALLOW", "",
     "sysfs backend: comma list of pci:<address>, vendor:<id>, iface:<name> to publish "
     "even where a default rule leaves them out (BMC displays, the default-route NIC)"),
    ("--sysfs-deny", "SYSFS_DENY", "",
     "sysfs backend: comma list of pci:<address>, vendor:<id>, iface:<name> never to "
     "publish (wins over --sysfs-allow)"),
    ("--sysfs-cpus", "SYSFS_CPUS", "false",
     "sysfs backend: also publish the node's CPUs, one device per NUMA node whose claimed "
     "CPUs count against the node's allocatable cpu (gate DRANodeAllocatableResources)"),
    ("--pod-uid", "POD_UID", None, "pod UID; when set, socket names allow rolling updates"),
    ("--pod-namespace", "POD_NAMESPACE", None,
     "namespace of the plugin's own pod (downward API); with --pod-name, what the "
     "kubelet's PodResources answer must list before --reconcile-mode=free frees a claim"),
    ("--pod-name", "POD_NAME", None,
     "name of the plugin's own pod (downward API); unset: --reconcile-mode=free frees "
     "nothing"),
    ("--healthcheck-port", "HEALTHCHECK_PORT", "-1", "gRPC health port (-1: off)"),
    ("--metrics-port", "METRICS_PORT", "-1", "Prometheus metrics port (-1: off)"),
    ("--rescan-interval", "RESCAN_INTERVAL", "10",
     "seconds between device rescans (an inventory file is also watched for changes)"),
    ("--reconcile-interval", "RECONCILE_INTERVAL", "60",
     "seconds between checks of the prepared claims against the API server, which "
     "find claims the kubelet will never unprepare (0: off)"),
    ("--reconcile-grace", "RECONCILE_GRACE", "300",
     "seconds (at least 30) a claim must look leaked, on every check, before it is "
     "reported or freed"),
    ("--reconcile-mode", "RECONCILE_MODE", "report",
     "report: never unprepare a leaked claim, report it (metric, log line, Event); "
     "free: unprepare it when the kubelet's PodResources API says no pod uses it"),
    ("--pod-resources-socket", "POD_RESOURCES_SOCKET",
     "/var/lib/kubelet/pod-resources/kubelet.sock",
     "the kubelet's PodResources API socket, asked before a leaked claim is freed"),
    ("--claim-status", "CLAIM_STATUS", "false",
     "write status.devices of prepared claims (true/false; needs extra RBAC)"),
    ("--device-metadata", "DEVICE_METADATA", "false",
     "mount a device metadata file per claim request into its containers, as the Go "
     "helper's EnableDeviceMetadata does (true/false)"),
    ("--list-attributes", "LIST_ATTRIBUTES", "false",
     "publish list-valued attributes (a device near two NUMA nodes) as lists; needs the "
     "DRAListTypeAttributes gate on the API server, else each is published as its first "
     "item (true/false)"),
    ("--log-format", "LOG_FORMAT", "text", "log format: text or json"),
    ("--verbosity", "VERBOSITY", "0", "log verbosity: 0 info, 1-3 driver debug, 4+ all debug"),
]


def add_parser(commands: SubParsers) -> None:
    """Register `run` with `simdra`'s sub-commands."""
    run = commands.add_parser("run", help="run the kubelet plugin")
    for flag, env, default, text in _RUN_FLAGS:
        names = [flag, "-v"] if flag == "--verbosity" else [flag]
        run.add_argument(*names, default=os.environ.get(env, default),
                         help=f"{text} [env {env}; default {default}]")
    add_kind_flag(run)
    run.set_defaults(handler=handle, command_parser=run)


def config_from_args(args: argparse.Namespace) -> Config:
    """Validate `run` flags into a Config; raises UsageError naming the flag."""
    driver = driver_name(args.driver_name, "--driver-name")
    backend, kinds = _backend(args.device_backend, kind_specs(args.kind))
    pod_namespace, pod_name = _pod_identity(args)
    return Config(
        node_name=_required(args.node_name, "--node-name (env NODE_NAME)"),
        driver_name=driver,
        kubeconfig=args.kubeconfig or None,
        registrar_dir=Path(args.kubelet_registrar_directory_path),
        plugins_dir=Path(args.kubelet_plugins_directory_path),
        cdi_root=Path(args.cdi_root),
        device_backend=backend,
        kinds=kind_specs(args.kind),
        device_profile=_profile(args.device_profile, kinds),
        sysfs_root=Path(args.sysfs_root),
        dev_root=Path(args.dev_root),
        proc_root=Path(args.proc_root) if args.proc_root else None,
        sysfs_allow=_selectors(args.sysfs_allow, "--sysfs-allow"),
        sysfs_deny=_selectors(args.sysfs_deny, "--sysfs-deny"),
        sysfs_cpus=boolean(args.sysfs_cpus, "--sysfs-cpus"),
        num_devices=integer(args.num_devices, "--num-devices", 0, 100_000),
        pod_uid=args.pod_uid or None,
        pod_namespace=pod_namespace,
        pod_name=pod_name,
        healthcheck_port=integer(args.healthcheck_port, "--healthcheck-port", -1, 65535),
        metrics_port=integer(args.metrics_port, "--metrics-port", -1, 65535),
        rescan_interval=number(args.rescan_interval, "--rescan-interval", 0.5, 86400),
        reconcile_interval=_interval(args.reconcile_interval, "--reconcile-interval"),
        reconcile_grace=number(args.reconcile_grace, "--reconcile-grace", MIN_GRACE_S, 86400),
        reconcile_mode=check(args.reconcile_mode, "--reconcile-mode", lambda v: v in MODES,
                             f"must be {' or '.join(MODES)}"),
        pod_resources_socket=Path(args.pod_resources_socket),
        claim_status=boolean(args.claim_status, "--claim-status"),
        device_metadata=boolean(args.device_metadata, "--device-metadata"),
        list_attributes=boolean(args.list_attributes, "--list-attributes"),
        log_format=check(args.log_format, "--log-format", lambda v: v in ("text", "json"),
                          "must be text or json"),
        verbosity=integer(args.verbosity, "--verbosity", 0, 10),
    )


def _required(value: str | None, flag: str) -> str:
    """A flag that has no default: its value, or UsageError naming it."""
    if not value:
        raise UsageError(f"{flag} is required")
    return value


def _pod_identity(args: argparse.Namespace) -> tuple[str | None, str | None]:
    """--pod-namespace and --pod-name: both, or neither (a half identity matches no pod)."""
    namespace, name = args.pod_namespace or None, args.pod_name or None
    if (namespace is None) != (name is None):
        raise UsageError("--pod-namespace (env POD_NAMESPACE) and --pod-name (env POD_NAME) "
                         "go together: set both, or neither")
    return namespace, name


def _interval(value: str, flag: str) -> float:
    """0 (off), or seconds between 0.5 and a day: a shorter period would only load the
    API server."""
    seconds = number(value, flag, 0, 86400)
    if 0 < seconds < 0.5:
        raise UsageError(f"{flag}={seconds:g}: must be 0 (off) or between 0.5 and 86400")
    return seconds


def _backend(value: str, kind_specs: tuple[str, ...]) -> tuple[str, KindSet]:
    """A registered backend name, or a `module:Class` that imports and has `discover()`;
    a registered backend is imported too, so a broken one fails here, not later. With it,
    the kinds it is registered with (--kind's and its own), all importable and agreeing."""
    from simdra._driver.devices.kind_registry import KindRegistrationError, plugin_kinds
    from simdra._driver.devices.loader import BackendSpecError

    try:
        backend_class = BUILTIN.backend_class(value)
    except BackendSpecError as err:
        rule = (f"must be one of {', '.join(BUILTIN.backend_names())} "
                "or package.module:ClassName")
        raise UsageError(f"--device-backend={value!r}: {rule}; {err}") from None
    try:
        return value, plugin_kinds(BUILTIN.kinds, kind_specs, backend_class)
    except KindRegistrationError as err:
        raise UsageError(f"--kind: {err}") from None


def _selectors(value: str, flag: str) -> tuple[str, ...]:
    """A comma list of device selectors, normalised (`pci:3B:00.0` -> `pci:0000:3b:00.0`)."""
    from simdra._driver.devices.sysfs.selectors import parse_selectors

    try:
        return tuple(str(selector) for selector in parse_selectors(value))
    except ValueError as err:
        raise UsageError(f"{flag}={value!r}: {err}") from None


def _profile(value: str, kinds: KindSet) -> str:
    """Profile names of the registered kinds (a comma list), or the path of a readable
    inventory file.

    A value is a path only if it looks like one (has a `/` or a .yaml/.yml/.json
    suffix), so a mistyped profile name is reported as one, not as a missing file.
    """
    from simdra._driver.devices.profiles import looks_like_path, parse_profiles

    if looks_like_path(value):
        try:
            with open(value, "rb"):
                pass
        except OSError as err:
            raise UsageError(f"--device-profile={value!r}: cannot read the inventory "
                             f"file: {err.strerror or err}") from None
        return value
    try:
        parse_profiles(value, kinds)
    except ValueError as err:
        raise UsageError(f"--device-profile={value!r}: {err}; or give the path of an "
                         "inventory file (with a / or a .yaml, .yml or .json suffix)") from None
    return value


def handle(args: argparse.Namespace) -> int:
    """Run the plugin until it is told to stop; returns the exit status."""
    from simdra._driver.kube import ClusterConfigError
    from simdra._driver.startup import run_plugin  # imported late: `simdra --help` stays fast

    config = config_from_args(args)
    try:
        return run_plugin(config, BUILTIN)
    except ClusterConfigError as err:  # --kubeconfig, or no in-cluster configuration
        raise UsageError(str(err)) from None

