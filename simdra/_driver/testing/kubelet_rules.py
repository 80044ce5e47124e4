"""What a 1.34+ kubelet checks and how it reads a DRA plugin's answers, apart from the
emulator that drives the calls: socket discovery, API version choice, the result-map
checks (api-facts 2.3) and protobuf messages turned into plain data."""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import grpc

from simdra._driver.claims.types import ClaimRef
from simdra._driver.kubelet.services import (
    KUBELET_DRA_SERVICES,
    V1_RESOURCE_HEALTH,
    V1ALPHA1_RESOURCE_HEALTH,
)


class KubeletError(Exception):
    """A call failed, or the plugin answered something a kubelet would reject."""


def discover_sockets(registry_dir: str) -> dict[str, tuple[int, int, int]]:
    """Registration sockets under registry_dir (subdirectories included), like the
    kubelet's plugin watcher: names starting with "." and non-sockets are ignored.

    Returns path -> (device, inode, mtime in ns); a re-created socket has a new identity.
    """
    found: dict[str, tuple[int, int, int]] = {}
    for dirpath, dirnames, filenames in os.walk(registry_dir):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for name in sorted(filenames):
            if name.startswith("."):
                continue
            path = os.path.join(dirpath, name)
            with contextlib.suppress(FileNotFoundError):
                st = os.lstat(path)
                if stat.S_ISSOCK(st.st_mode):
                    found[path] = (st.st_dev, st.st_ino, st.st_mtime_ns)
    return found


def pick_dra_version(supported_versions: Sequence[str]) -> str | None:
    """1.34+ rule: the first entry of the PLUGIN's list that the kubelet supports."""
    for entry in supported_versions:
        if entry in KUBELET_DRA_SERVICES:
            return entry.partition(".")[0]
    return None


def pick_health_version(supported_versions: Sequence[str]) -> str | None:
    """1.37 rule: v1 health preferred over v1alpha1; None when neither is advertised."""
    if V1_RESOURCE_HEALTH in supported_versions:
        return "v1"
    if V1ALPHA1_RESOURCE_HEALTH in supported_versions:
        return "v1alpha1"
    return None


@dataclass
class PluginInstance:
    """One registered instance of a DRA driver."""

    driver_name: str
    endpoint: str
    registration_socket: str
    supported_versions: tuple[str, ...]
    dra_version: str
    health_version: str | None
    channel: grpc.Channel = field(repr=False)


def device_dict(device: Any) -> dict[str, Any]:
    has_share = "share_id" in type(device).DESCRIPTOR.fields_by_name
    return {
        "request_names": list(device.request_names),
        "pool_name": device.pool_name,
        "device_name": device.device_name,
        "cdi_device_ids": list(device.cdi_device_ids),
        "share_id": device.share_id if has_share and device.HasField("share_id") else None,
    }


def health_dict(pb: ModuleType, entry: Any) -> dict[str, Any]:
    return {
        "pool_name": entry.device.pool_name,
        "device_name": entry.device.device_name,
        "health": pb.HealthStatus.Name(entry.health).capitalize(),
        "last_updated_time": entry.last_updated_time,
        "health_check_timeout_seconds": entry.health_check_timeout_seconds,
        "message": entry.message,
    }


def check_result_keys(call: str, requested: Iterable[str], returned: Iterable[str]) -> None:
    """The kubelet's checks on a prepare/unprepare map (api-facts 2.3)."""
    wanted = set(requested)
    got = set(returned)
    unknown = sorted(got - wanted)
    if unknown:
        raise KubeletError(f"{call}: result for unknown claim UID(s) {', '.join(unknown)}")
    missing = sorted(wanted - got)
    if missing:
        raise KubeletError(
            f"{call}: skipped {len(missing)} ResourceClaims (no entry for {', '.join(missing)})"
        )


def rpc_text(err: grpc.RpcError) -> str:
    code = err.code() if isinstance(err, grpc.Call) else None
    details = err.details() if isinstance(err, grpc.Call) else str(err)
    return f"{code.name if code else 'error'}: {details}"


def claim_message(pb: ModuleType, claim: ClaimRef) -> Any:
    """The protobuf Claim of a ClaimRef, in the API version of `pb`."""
    return pb.Claim(namespace=claim.namespace, name=claim.name, uid=claim.uid)


def unary_call(method: Any, request: Any, timeout: float, call: str) -> Any:
    """Call a unary RPC; KubeletError `<call>: <code>: <details>` when it fails."""
    try:
        return method(request, timeout=timeout)
    except grpc.RpcError as err:
        raise KubeletError(f"{call}: {rpc_text(err)}") from None
