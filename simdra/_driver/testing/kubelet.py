"""A kubelet emulator for DRA plugins: registration, prepare/unprepare, health stream.

It plays the kubelet's side of the unix-socket protocols the way a 1.34+ kubelet does
(api-facts 1.3, 1.5, 2.3, 2.5, 3.3), so a plugin can be exercised without a node:

    with KubeletEmulator("/var/lib/kubelet/plugins_registry") as kubelet:
        plugin = kubelet.wait_for_plugin("gpu.example.com")
        result = kubelet.prepare([ClaimRef("default", "claim-1", uid)])

Discovery is by polling (`sync()`), not inotify; everything runs in the caller's thread.
Results come back as plain Python data; gRPC errors and responses a kubelet would reject
raise `KubeletError`.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import ModuleType, TracebackType
from typing import Any

import grpc

from simdra._driver.claims.types import ClaimRef
from simdra._driver.kubelet.gen import (
    dra_health_v1_pb2,
    dra_health_v1_pb2_grpc,
    dra_health_v1alpha1_pb2,
    dra_health_v1alpha1_pb2_grpc,
    dra_v1_pb2,
    dra_v1_pb2_grpc,
    dra_v1beta1_pb2,
    dra_v1beta1_pb2_grpc,
)
from simdra._driver.kubelet.gen import pluginregistration_v1_pb2 as regpb
from simdra._driver.kubelet.gen import pluginregistration_v1_pb2_grpc as regpb_grpc
from simdra._driver.kubelet.services import (
    DRA_PLUGIN_TYPE,
    KUBELET_DRA_SERVICES,
)
from simdra._driver.testing.kubelet_rules import (
    KubeletError,
    PluginInstance,
    check_result_keys,
    claim_message,
    device_dict,
    discover_sockets,
    health_dict,
    pick_dra_version,
    pick_health_version,
    rpc_text,
    unary_call,
)

__all__ = ["KubeletEmulator", "KubeletError", "PluginInstance", "pick_dra_version",
           "pick_health_version"]

log = logging.getLogger(__name__)

# Kubelet limits (api-facts 8).
DIAL_TIMEOUT = 10.0
GET_INFO_TIMEOUT = 1.0
NOTIFY_TIMEOUT = 5.0
DRA_CALL_TIMEOUT = 45.0
RETRY_BACKOFF_START = 0.5
RETRY_BACKOFF_MAX = 120.0

# DRA API version -> (pb module, stub class).
_DRA_APIS: dict[str, tuple[ModuleType, Any]] = {
    "v1": (dra_v1_pb2, dra_v1_pb2_grpc.DRAPluginStub),
    "v1beta1": (dra_v1beta1_pb2, dra_v1beta1_pb2_grpc.DRAPluginStub),
}
_HEALTH_APIS: dict[str, tuple[ModuleType, Any]] = {
    "v1alpha1": (dra_health_v1alpha1_pb2, dra_health_v1alpha1_pb2_grpc.DRAResourceHealthStub),
    "v1": (dra_health_v1_pb2, dra_health_v1_pb2_grpc.DRAResourceHealthStub),
}


@dataclass
class _Attempt:
    identity: tuple[int, int, int]
    failures: int = 0
    next_try: float = 0.0
    error: str = ""


class KubeletEmulator:
    """Registers DRA plugins found in a registry directory and calls them like a kubelet."""

    def __init__(
        self,
        registry_dir: str,
        *,
        dial_timeout: float = DIAL_TIMEOUT,
        poll_interval: float = 0.02,
    ) -> None:
        """registry_dir: where plugins create registration sockets (need not exist yet)."""
        self.registry_dir = registry_dir
        self.dial_timeout = dial_timeout
        self.poll_interval = poll_interval
        self._instances: dict[str, PluginInstance] = {}  # registration socket -> instance
        self._identities: dict[str, tuple[int, int, int]] = {}
        self._attempts: dict[str, _Attempt] = {}
        self._order: list[str] = []  # registration sockets, oldest registration first

    # -- registration -------------------------------------------------------------------

    def sync(self) -> list[PluginInstance]:
        """One pass of the plugin watcher: deregister vanished or re-created sockets,
        try to register new ones (failed ones again after a backoff). Returns the
        instances registered in this pass."""
        found = discover_sockets(self.registry_dir) if os.path.isdir(self.registry_dir) else {}
        for path in list(self._instances):
            if found.get(path) != self._identities[path]:
                self.deregister(path)
        for path in list(self._attempts):
            if found.get(path) != self._attempts[path].identity:
                del self._attempts[path]
        added = []
        now = time.monotonic()
        for path, identity in found.items():
            if path in self._instances:
                continue
            attempt = self._attempts.setdefault(path, _Attempt(identity))
            if now < attempt.next_try:
                continue
            try:
                added.append(self.register(path, identity))
                del self._attempts[path]
            except KubeletError as err:
                attempt.error = str(err)
                attempt.next_try = now + min(
                    RETRY_BACKOFF_START * 2**attempt.failures, RETRY_BACKOFF_MAX
                )
                attempt.failures += 1
                log.warning("registration of %s failed: %s", path, err)
        return added

    def register(
        self, registration_socket: str, identity: tuple[int, int, int] | None = None
    ) -> PluginInstance:
        """Register the plugin behind one registration socket (raises KubeletError)."""
        channel = grpc.insecure_channel(f"unix:{registration_socket}")
        try:
            info = self._get_info(channel, registration_socket)
            instance = self._validate(info, registration_socket)
        except _Rejected as rejected:
            self._notify(channel, registration_socket, False, str(rejected))
            channel.close()
            raise KubeletError(f"{registration_socket}: {rejected}") from None
        except BaseException:
            channel.close()
            raise
        self._notify(channel, registration_socket, True, "")
        channel.close()
        if identity is None:
            identity = discover_sockets(os.path.dirname(registration_socket)).get(
                registration_socket, (0, 0, 0)
            )
        self._instances[registration_socket] = instance
        self._identities[registration_socket] = identity
        self._order.append(registration_socket)
        log.info(
            "registered DRA driver %s at %s (%s)",
            instance.driver_name,
            instance.endpoint,
            instance.dra_version,
        )
        return instance

    def _get_info(self, channel: grpc.Channel, path: str) -> Any:
        try:
            grpc.channel_ready_future(channel).result(timeout=self.dial_timeout)
        except grpc.FutureTimeoutError:
            raise KubeletError(f"{path}: dial timed out after {self.dial_timeout} s") from None
        try:
            return regpb_grpc.RegistrationStub(channel).GetInfo(
                regpb.InfoRequest(), timeout=GET_INFO_TIMEOUT
            )
        except grpc.RpcError as err:
            raise KubeletError(f"{path}: GetInfo failed: {rpc_text(err)}") from None

    def _validate(self, info: Any, registration_socket: str) -> PluginInstance:
        if info.type != DRA_PLUGIN_TYPE:
            raise _Rejected(f"unknown plugin type {info.type!r}")
        if not info.name:
            raise _Rejected("plugin name is empty")
        versions = tuple(info.supported_versions)
        dra_version = pick_dra_version(versions)
        if dra_version is None:
            raise _Rejected(
                f"none of the supported versions {list(versions)} is one of "
                f"{list(KUBELET_DRA_SERVICES)}"
            )
        endpoint = info.endpoint or registration_socket
        for other in self._instances.values():
            if other.driver_name == info.name and other.endpoint == endpoint:
                raise _Rejected(f"endpoint {endpoint} already registered for {info.name}")
        return PluginInstance(
            driver_name=info.name,
            endpoint=endpoint,
            registration_socket=registration_socket,
            supported_versions=versions,
            dra_version=dra_version,
            health_version=pick_health_version(versions),
            channel=grpc.insecure_channel(f"unix:{endpoint}"),
        )

    @staticmethod
    def _notify(channel: grpc.Channel, path: str, registered: bool, error: str) -> None:
        status = regpb.RegistrationStatus(plugin_registered=registered, error=error)
        try:
            regpb_grpc.RegistrationStub(channel).NotifyRegistrationStatus(
                status, timeout=NOTIFY_TIMEOUT
            )
        except grpc.RpcError as err:
            # Like the kubelet: logged, not fatal (plugins answer a rejection with an error).
            log.info("NotifyRegistrationStatus(%s) to %s: %s", registered, path, rpc_text(err))

    def deregister(self, registration_socket: str) -> None:
        """Forget an instance (what the kubelet does when its socket disappears)."""
        instance = self._instances.pop(registration_socket, None)
        self._identities.pop(registration_socket, None)
        if registration_socket in self._order:
            self._order.remove(registration_socket)
        if instance is not None:
            instance.channel.close()
            log.info("deregistered DRA driver %s at %s", instance.driver_name, instance.endpoint)

    def wait_for_plugin(
        self, driver_name: str | None = None, timeout: float = 10.0
    ) -> PluginInstance:
        """Poll until an instance of driver_name (any driver if None) is registered."""
        deadline = time.monotonic() + timeout
        while True:
            self.sync()
            with contextlib.suppress(KubeletError):
                return self.plugin(driver_name)
            if time.monotonic() >= deadline:
                errors = "; ".join(f"{p}: {a.error}" for p, a in self._attempts.items() if a.error)
                raise KubeletError(
                    f"no DRA plugin {driver_name or ''} registered from {self.registry_dir} "
                    f"within {timeout} s" + (f" (attempts: {errors})" if errors else "")
                )
            time.sleep(self.poll_interval)

    @property
    def instances(self) -> list[PluginInstance]:
        """All registered instances, oldest registration first."""
        return [self._instances[p] for p in self._order]

    @property
    def registration_errors(self) -> dict[str, str]:
        """Registration socket -> why its last registration attempt failed."""
        return {p: a.error for p, a in self._attempts.items() if a.error}

    def plugin(self, driver_name: str | None = None) -> PluginInstance:
        """The instance calls go to: the most recently registered one of the driver."""
        candidates = [i for i in self.instances if driver_name in (None, i.driver_name)]
        if driver_name is None and len({i.driver_name for i in candidates}) > 1:
            raise KubeletError("several DRA drivers are registered; name one")
        if not candidates:
            raise KubeletError(f"DRA driver {driver_name or '(any)'} is not registered")
        return candidates[-1]

    # -- DRA calls ----------------------------------------------------------------------

    def prepare(
        self,
        claims: Sequence[ClaimRef],
        *,
        driver_name: str | None = None,
        version: str | None = None,
        timeout: float = DRA_CALL_TIMEOUT,
    ) -> dict[str, dict[str, Any]]:
        """NodePrepareResources for these claims.

        Returns claim UID -> {"devices": [device dicts], "error": str}; a device dict has
        request_names, pool_name, device_name, cdi_device_ids and share_id (None when
        unset; always None over v1beta1). version forces "v1" or "v1beta1".
        """
        instance, pb, stub = self._dra_stub(driver_name, version)
        request = pb.NodePrepareResourcesRequest(claims=[claim_message(pb, c) for c in claims])
        call = f"NodePrepareResources ({instance.driver_name}, {_api(instance, version)})"
        response = unary_call(stub.NodePrepareResources, request, timeout, call)
        check_result_keys(call, (c.uid for c in claims), response.claims.keys())
        return {
            uid: {"devices": [device_dict(d) for d in entry.devices], "error": entry.error}
            for uid, entry in response.claims.items()
        }

    def unprepare(
        self,
        claims: Sequence[ClaimRef],
        *,
        driver_name: str | None = None,
        version: str | None = None,
        timeout: float = DRA_CALL_TIMEOUT,
    ) -> dict[str, dict[str, Any]]:
        """NodeUnprepareResources for these claims; returns claim UID -> {"error": str}."""
        instance, pb, stub = self._dra_stub(driver_name, version)
        request = pb.NodeUnprepareResourcesRequest(claims=[claim_message(pb, c) for c in claims])
        call = f"NodeUnprepareResources ({instance.driver_name}, {_api(instance, version)})"
        response = unary_call(stub.NodeUnprepareResources, request, timeout, call)
        check_result_keys(call, (c.uid for c in claims), response.claims.keys())
        return {uid: {"error": entry.error} for uid, entry in response.claims.items()}

    def _dra_stub(
        self, driver_name: str | None, version: str | None
    ) -> tuple[PluginInstance, ModuleType, Any]:
        instance = self.plugin(driver_name)
        api = _api(instance, version)
        if api not in _DRA_APIS:
            raise KubeletError(f"unknown DRA API version {api!r}; use one of {list(_DRA_APIS)}")
        pb, stub_class = _DRA_APIS[api]
        return instance, pb, stub_class(instance.channel)

    # -- health -------------------------------------------------------------------------

    def watch_health(
        self,
        *,
        driver_name: str | None = None,
        version: str | None = None,
        messages: int = 1,
        timeout: float = 5.0,
        on_message: Callable[[list[dict[str, Any]]], None] | None = None,
    ) -> list[list[dict[str, Any]]]:
        """Open NodeWatchResources, collect `messages` messages, then close the stream.

        Returns one list of device-health dicts per message (health is "Healthy",
        "Unhealthy" or "Unknown"). version: "v1alpha1" or "v1"; default: what the plugin
        advertises (v1 preferred), else v1alpha1 as 1.34-1.36 kubelets do. Fewer messages
        are returned if the plugin ends the stream; KubeletError on gRPC errors.
        on_message is called with each message as it arrives (e.g. to log it live).
        """
        instance = self.plugin(driver_name)
        api = version or instance.health_version or "v1alpha1"
        if api not in _HEALTH_APIS:
            raise KubeletError(f"unknown health API {api!r}; use one of {list(_HEALTH_APIS)}")
        pb, stub_class = _HEALTH_APIS[api]
        stream = stub_class(instance.channel).NodeWatchResources(
            pb.NodeWatchResourcesRequest(), timeout=timeout
        )
        collected: list[list[dict[str, Any]]] = []
        try:
            _collect(stream, pb, messages, on_message, collected)
        except grpc.RpcError as err:
            raise KubeletError(
                f"NodeWatchResources ({instance.driver_name}, {api}) after "
                f"{len(collected)} message(s): {rpc_text(err)}"
            ) from None
        finally:
            stream.cancel()
        return collected

    # -- lifecycle ----------------------------------------------------------------------

    def close(self) -> None:
        """Close all channels; registered instances are forgotten."""
        for path in list(self._instances):
            self.deregister(path)
        self._attempts.clear()

    def __enter__(self) -> KubeletEmulator:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class _Rejected(Exception):
    """Registration refused; the plugin is told with NotifyRegistrationStatus(false)."""


def _collect(stream: Any, pb: ModuleType, messages: int,
             on_message: Callable[[list[dict[str, Any]]], None] | None,
             into: list[list[dict[str, Any]]]) -> None:
    for response in stream:
        into.append([health_dict(pb, d) for d in response.devices])
        if on_message is not None:
            on_message(into[-1])
        if len(into) >= messages:
            return


def _api(instance: PluginInstance, version: str | None) -> str:
    return version or instance.dra_version
