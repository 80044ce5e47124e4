"""`simdra demo`: one node end to end, printed for a person to read.

Starts the API stand-in with the DeviceClasses of the registered kinds, the plugin with
fake devices of the chosen profiles (a real child process, `--kind` passed on), and the
kubelet emulator; publishes, allocates one claim per kind the profiles simulate (a share
where its devices allow several allocations), prepares them over the kubelet's v1 API,
shows what each container gets from its CDI spec, unprepares and stops.
"""

from __future__ import annotations

import json
import logging
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kubernetes.client.exceptions import ApiException

from simdra._driver.builtins import BUILTIN
from simdra._driver.claims.types import ClaimRef
from simdra._driver.devices.device_classes import class_name
from simdra._driver.devices.kind_registry import KindSet, load_kinds
from simdra._driver.devices.profiles import parse_profiles
from simdra._driver.testing.allocation.builders import exactly
from simdra._driver.testing.cluster import LocalCluster, PluginProcess

JSON = dict[str, Any]
DEFAULT_PROFILE = "gpu,nic"

_step = "start"  # the title of the step running now, for the one-line failure message


def run_demo(keep: bool = False, profile: str = DEFAULT_PROFILE,
             kinds: Sequence[str] = ()) -> int:
    """Run the demo with fake devices of `profile` (profiles of simdra's kinds and of
    those `kinds` names, package.module:Class); returns 0 when every step worked, 1 after
    one line on stderr naming the step that failed (never a traceback, never a hang:
    every wait is bounded). The caller checks `profile` and `kinds` first."""
    global _step
    _step = "start the API stand-in and the kubelet emulator"
    # Short path: unix socket paths must stay under 108 bytes.
    workdir = Path(tempfile.mkdtemp(prefix="simdra-demo-", dir="/tmp"))
    log_file = _log_to_file(workdir / "demo.log")
    cluster = LocalCluster(workdir, node_name="demo-node", kinds=kinds)
    try:
        with cluster:
            _demo(cluster, profile, tuple(kinds))
    except Exception as err:
        sys.stdout.flush()
        cause = (f"API stand-in failed: {cluster.api.internal_errors[0]}"
                 if cluster.api.internal_errors else _one_line(err))
        print(f"simdra demo: step {_step!r} failed: {cause} (logs in {workdir})",
              file=sys.stderr)
        return 1
    finally:
        logging.getLogger().removeHandler(log_file)
        log_file.close()
    if keep:
        print(f"\nfiles kept in {workdir}")
    else:
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


def _log_to_file(path: Path) -> logging.Handler:
    """Send the demo process's own logs (API stand-in, emulator) to a file, so that the
    terminal shows the demo's output and, on failure, one line."""
    handler = logging.FileHandler(path)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.getLogger().addHandler(handler)
    return handler


def _one_line(err: Exception) -> str:
    """The error as one line: an API error's message, else the first line of the text
    (a plugin's log or an HTTP body comes after it)."""
    if isinstance(err, ApiException) and err.body:
        try:
            return f"HTTP {err.status}: {json.loads(err.body)['message']}"
        except (ValueError, KeyError, TypeError):
            pass
    text = str(err).strip().splitlines()
    first = text[0] if text else ""
    return f"{type(err).__name__}: {first}" if first else type(err).__name__


def _demo(cluster: LocalCluster, profile: str, kinds: tuple[str, ...]) -> None:
    _title(f"simdra demo: node {cluster.node_name}, driver {cluster.driver_name}")
    print(f"API stand-in {cluster.api.url}; work directory {cluster.workdir}")
    registered = load_kinds(BUILTIN.kinds, kinds)
    _show_classes(cluster, registered)
    plugin = _start_plugin(cluster, profile, kinds)
    _show_slices(cluster)
    claims = _allocate_claims(cluster, profile_kinds(profile, registered))
    refs = _prepare(cluster, claims)
    _show_container_env(cluster, refs)
    _show_usage(cluster)
    _unprepare(cluster, refs)
    _stop(cluster, plugin)


def profile_kinds(profile: str, kinds: KindSet) -> list[str]:
    """The names of the kinds whose devices the profiles of `profile` simulate, in the
    order the profiles are named."""
    by_profile = kinds.profiles()
    names = [by_profile[p.name][0].name for p in parse_profiles(profile, kinds)]
    return list(dict.fromkeys(names))


def _show_classes(cluster: LocalCluster, kinds: KindSet) -> None:
    _title("1. DeviceClasses of the registered kinds (simdra deviceclasses)")
    for kind in kinds.kinds:
        description = f": {kind.description()}" if kind.description() else ""
        print(f"{class_name(kind.name, cluster.driver_name)}{description}")


def _start_plugin(cluster: LocalCluster, profile: str, kinds: tuple[str, ...]) -> PluginProcess:
    _title(f"2. Plugin started with --device-profile {profile} and registered with the "
           "kubelet")
    extra = ["--kind", ",".join(kinds)] if kinds else []
    plugin = cluster.start_plugin(profile=profile, num_devices=2, extra=extra)
    assert cluster.kubelet is not None
    instance = cluster.kubelet.plugin(cluster.driver_name)
    print(f"pid {plugin.pid}; DRA socket {instance.endpoint}")
    print(
        f"advertised services: {', '.join(instance.supported_versions)}; "
        f"the kubelet uses {instance.dra_version}"
    )
    return plugin


def _show_slices(cluster: LocalCluster) -> None:
    _title("3. Published ResourceSlices")
    for pool, items in cluster.complete_pools().items():
        for item in items:
            spec = item["spec"]
            print(
                f"slice {item['metadata']['name']}: pool {pool}, generation "
                f"{spec['pool']['generation']}, {spec['pool']['resourceSliceCount']} slice(s)"
            )
            print(format_devices(spec.get("devices", [])))


def _allocate_claims(cluster: LocalCluster, kind_names: list[str]) -> list[str]:
    _title("4. One claim per kind, allocated by the scheduler stand-in")
    claims = []
    for kind in kind_names:
        # One device of the kind's class; a device several claims may use gives this
        # claim a share of it, with the capacity its request policy defaults to.
        name = f"{kind}-claim"
        cluster.create_claim(name, exactly(kind, class_name(kind, cluster.driver_name)))
        allocated = cluster.allocate(name)
        for result in allocated["status"]["allocation"]["devices"]["results"]:
            print(f"default/{name}: {format_result(result)}")
        claims.append(name)
    return claims


def _prepare(cluster: LocalCluster, claims: list[str]) -> list[ClaimRef]:
    _title("5. NodePrepareResources (kubelet -> plugin, DRA v1)")
    answer = cluster.prepare(*claims, version="v1")
    refs = [cluster.claim_ref(name) for name in claims]
    for ref in refs:
        entry = answer[ref.uid]
        print(f"claim {ref.name} ({ref.uid}):")
        if entry["error"]:
            raise RuntimeError(f"prepare of {ref.name} failed: {entry['error']}")
        for device in entry["devices"]:
            share = f", share {device['share_id']}" if device["share_id"] else ""
            print(f"  {device['pool_name']}/{device['device_name']} for "
                  f"{','.join(device['request_names'])}{share}")
            for cdi_id in device["cdi_device_ids"]:
                print(f"    CDI device {cdi_id}")
    return refs


def _show_container_env(cluster: LocalCluster, refs: list[ClaimRef]) -> None:
    _title("6. What each container gets (its claim's CDI spec)")
    for ref in refs:
        spec_path = next(cluster.cdi_root.glob(f"*_{ref.uid}.json"))
        spec = json.loads(spec_path.read_text())
        print(f"claim {ref.name}: {spec_path.name} (cdiVersion {spec['cdiVersion']}, "
              f"kind {spec['kind']})")
        for line in container_edits_lines(spec.get("containerEdits") or {}):
            print(f"  {line}")
        for device in spec.get("devices", []):
            print(f"  CDI device {spec['kind']}={device['name']}:")
            for line in container_edits_lines(device.get("containerEdits") or {}):
                print(f"    {line}")


def container_edits_lines(edits: JSON) -> list[str]:
    """CDI containerEdits as a person reads them: env entries, then device nodes, mounts
    and hooks."""
    lines = [f"env {entry}" for entry in edits.get("env", [])]
    lines += [f"device node {node['path']}" for node in edits.get("deviceNodes", [])]
    lines += [f"mount {m['hostPath']} -> {m['containerPath']}" for m in edits.get("mounts", [])]
    lines += [f"hook {hook['hookName']} {hook['path']}" for hook in edits.get("hooks", [])]
    return lines


def _show_usage(cluster: LocalCluster) -> None:
    _title("7. Capacity in use on the node (simdra usage)")
    # The command a user runs (the harness does not import the command line).
    sys.stdout.flush()
    done = subprocess.run([sys.executable, "-m", "simdra", "usage", "--plugin-dir",
                           str(cluster.data_dir)], check=False)
    if done.returncode != 0:
        raise RuntimeError(f"simdra usage failed with exit status {done.returncode}")


def _unprepare(cluster: LocalCluster, refs: list[ClaimRef]) -> None:
    _title("8. NodeUnprepareResources")
    unprepared = cluster.unprepare(*refs, version="v1")
    failed = {uid: e["error"] for uid, e in unprepared.items() if e["error"]}
    if failed:
        raise RuntimeError(f"unprepare failed: {failed}")
    left = sorted(p.name for p in cluster.cdi_root.iterdir())
    print(f"unprepared {len(unprepared)} claims; CDI spec files left: {left or 'none'}")


def _stop(cluster: LocalCluster, plugin: PluginProcess) -> None:
    _title("9. Plugin stopped with SIGTERM")
    code = plugin.stop(signal.SIGTERM)
    # The plugin's sockets only: the kubelet's own (PodResources) stays while it runs.
    sockets = sorted(str(p) for d in (cluster.registrar_dir, cluster.plugins_dir)
                     for p in d.rglob("*.sock"))
    print(f"exit code {code}; sockets left: {sockets or 'none'}")
    if code != 0 or sockets:
        raise RuntimeError("the plugin did not shut down cleanly")


def format_devices(devices: list[JSON]) -> str:
    """A table of devices: name, type, shared, capacities."""
    rows = [("DEVICE", "TYPE", "SHARED", "CAPACITY")]
    for device in devices:
        kind = device.get("attributes", {}).get("type", {}).get("string", "?")
        shared = "yes" if device.get("allowMultipleAllocations") else "no"
        capacity = ", ".join(_capacity(n, c) for n, c in device.get("capacity", {}).items())
        rows.append((device["name"], kind, shared, capacity))
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    return "\n".join(
        "  " + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=False)) + "  " + r[3]
        for r in rows
    )


def _capacity(name: str, entry: JSON) -> str:
    policy = entry.get("requestPolicy")
    if not policy:
        return f"{name}={entry['value']}"
    bounds = policy.get("validRange", {})
    rules = [f"default {policy.get('default')}"] + [f"{k} {v}" for k, v in bounds.items()]
    return f"{name}={entry['value']} ({', '.join(rules)})"


def format_result(result: JSON) -> str:
    """One allocation result as `request -> pool/device [share, consumed]`."""
    text = f"request {result['request']} -> {result['pool']}/{result['device']}"
    if result.get("shareID"):
        consumed = ", ".join(f"{k}={v}" for k, v in result.get("consumedCapacity", {}).items())
        text += f" (share {result['shareID']}, consumes {consumed})"
    return text


def _title(text: str) -> None:
    global _step
    _step = text
    print(f"\n== {text}")
