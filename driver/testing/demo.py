"""`simdra demo`: one node end to end, printed for a person to read.

Starts the API stand-in, the plugin with fake GPUs and NICs (a real child process), and
the kubelet emulator; publishes, allocates a GPU claim and two claims sharing one NIC,
prepares them over the kubelet's v1 API, shows the CDI spec, unprepares and stops.
"""

from __future__ import annotations

import json
import logging
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from kubernetes.client.exceptions import ApiException

from driver.claims.types import ClaimRef
from driver.testing.allocation.builders import exactly
from driver.testing.cluster import LocalCluster, PluginProcess

JSON = dict[str, Any]


_step = "start"  # the title of the step running now, for the one-line failure message


def run_demo(keep: bool = False) -> int:
    """Run the demo; returns 0 when every step worked, 1 after one line on stderr naming
    the step that failed (never a traceback, never a hang: every wait is bounded)."""
    global _step
    _step = "start the API stand-in and the kubelet emulator"
    # Short path: unix socket paths must stay under 108 bytes.
    workdir = Path(tempfile.mkdtemp(prefix="simdra-demo-", dir="/tmp"))
    log_file = _log_to_file(workdir / "demo.log")
    cluster = LocalCluster(workdir, node_name="demo-node")
    try:
        with cluster:
            _demo(cluster)
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


def _demo(cluster: LocalCluster) -> None:
    _title(f"simdra demo: node {cluster.node_name}, driver {cluster.driver_name}")
    print(f"API stand-in {cluster.api.url}; work directory {cluster.workdir}")
    plugin = _start_plugin(cluster)
    _show_slices(cluster)
    claims = _allocate_claims(cluster)
    refs = _prepare(cluster, claims)
    _show_spec(cluster, "web-a")
    _show_usage(cluster)
    _unprepare(cluster, refs)
    _stop(cluster, plugin)


def _start_plugin(cluster: LocalCluster) -> PluginProcess:
    _title("1. Plugin started and registered with the kubelet")
    plugin = cluster.start_plugin(profile="gpu,nic", num_devices=2)
    assert cluster.kubelet is not None
    instance = cluster.kubelet.plugin(cluster.driver_name)
    print(f"pid {plugin.pid}; DRA socket {instance.endpoint}")
    print(
        f"advertised services: {', '.join(instance.supported_versions)}; "
        f"the kubelet uses {instance.dra_version}"
    )
    return plugin


def _show_slices(cluster: LocalCluster) -> None:
    _title("2. Published ResourceSlices")
    for pool, items in cluster.complete_pools().items():
        for item in items:
            spec = item["spec"]
            print(
                f"slice {item['metadata']['name']}: pool {pool}, generation "
                f"{spec['pool']['generation']}, {spec['pool']['resourceSliceCount']} slice(s)"
            )
            print(format_devices(spec.get("devices", [])))


def _allocate_claims(cluster: LocalCluster) -> list[str]:
    _title("3. Claims allocated by the scheduler stand-in")
    nic_request = {"capacity": {"requests": {"bandwidth": "1G"}}}
    claims = {
        "gpu-claim": exactly("gpu", f"gpu.{cluster.driver_name}"),
        "web-a": exactly("net", f"nic.{cluster.driver_name}", **nic_request),
        "web-b": exactly("net", f"nic.{cluster.driver_name}", **nic_request),
    }
    for name, request in claims.items():
        cluster.create_claim(name, request)
        allocated = cluster.allocate(name)
        for result in allocated["status"]["allocation"]["devices"]["results"]:
            print(f"default/{name}: {format_result(result)}")
    return list(claims)


def _prepare(cluster: LocalCluster, claims: list[str]) -> list[ClaimRef]:
    _title("4. NodePrepareResources (kubelet -> plugin, DRA v1)")
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


def _show_spec(cluster: LocalCluster, claim: str) -> None:
    _title(f"5. CDI spec written for claim {claim}")
    ref = cluster.claim_ref(claim)
    spec_path = next(cluster.cdi_root.glob(f"*_{ref.uid}.json"))
    print(spec_path)
    print(json.dumps(json.loads(spec_path.read_text()), indent=2))


def _show_usage(cluster: LocalCluster) -> None:
    _title("6. Capacity in use on the node (simdra usage)")
    # The command a user runs (the harness does not import the command line).
    sys.stdout.flush()
    done = subprocess.run([sys.executable, "-m", "driver", "usage", "--plugin-dir",
                           str(cluster.data_dir)], check=False)
    if done.returncode != 0:
        raise RuntimeError(f"simdra usage failed with exit status {done.returncode}")


def _unprepare(cluster: LocalCluster, refs: list[ClaimRef]) -> None:
    _title("7. NodeUnprepareResources")
    unprepared = cluster.unprepare(*refs, version="v1")
    failed = {uid: e["error"] for uid, e in unprepared.items() if e["error"]}
    if failed:
        raise RuntimeError(f"unprepare failed: {failed}")
    left = sorted(p.name for p in cluster.cdi_root.iterdir())
    print(f"unprepared {len(unprepared)} claims; CDI spec files left: {left or 'none'}")


def _stop(cluster: LocalCluster, plugin: PluginProcess) -> None:
    _title("8. Plugin stopped with SIGTERM")
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
