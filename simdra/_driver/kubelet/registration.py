"""The plugin side of kubelet plugin registration (api-facts 1.1-1.3).

The kubelet finds the registration socket, calls GetInfo to learn the driver name, the
DRA socket and the offered services, and then reports with NotifyRegistrationStatus
whether it accepted the plugin.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass

import grpc

from simdra._driver.kubelet.gen import pluginregistration_v1_pb2 as regpb
from simdra._driver.kubelet.gen import pluginregistration_v1_pb2_grpc as regpb_grpc
from simdra._driver.kubelet.services import DRA_PLUGIN_TYPE

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RegistrationStatus:
    """The latest NotifyRegistrationStatus the kubelet sent (None: none received yet)."""

    registered: bool | None = None
    error: str = ""
    notifications: int = 0


class RegistrationServicer(regpb_grpc.RegistrationServicer):
    """Answers GetInfo for one DRA driver and records what the kubelet reports back."""

    def __init__(self, driver_name: str, endpoint: str, supported_versions: Sequence[str]):
        """endpoint: absolute DRA socket path; supported_versions: in preference order."""
        self.driver_name = driver_name
        self.endpoint = endpoint
        self.supported_versions = tuple(supported_versions)
        self._status = RegistrationStatus()
        self._changed = threading.Condition()

    def GetInfo(
        self, request: regpb.InfoRequest, context: grpc.ServicerContext
    ) -> regpb.PluginInfo:
        """Describe this plugin to the kubelet."""
        log.debug("GetInfo from kubelet for driver %s", self.driver_name)
        return regpb.PluginInfo(
            type=DRA_PLUGIN_TYPE,
            name=self.driver_name,
            endpoint=self.endpoint,
            supported_versions=list(self.supported_versions),
        )

    def NotifyRegistrationStatus(
        self, request: regpb.RegistrationStatus, context: grpc.ServicerContext
    ) -> regpb.RegistrationStatusResponse:
        """Record the kubelet's verdict; a rejection is logged and answered with an error
        (as the Go helper does) so it also shows in the kubelet's log."""
        with self._changed:
            self._status = RegistrationStatus(
                registered=request.plugin_registered,
                error=request.error,
                notifications=self._status.notifications + 1,
            )
            self._changed.notify_all()
        if request.plugin_registered:
            log.info(
                "kubelet registered DRA driver %s (endpoint %s)", self.driver_name, self.endpoint
            )
            return regpb.RegistrationStatusResponse()
        log.error("kubelet rejected DRA driver %s: %s", self.driver_name, request.error)
        context.abort(grpc.StatusCode.UNKNOWN, f"registration failed: {request.error}")
        raise AssertionError("unreachable: context.abort raises")  # pragma: no cover

    @property
    def status(self) -> RegistrationStatus:
        """The latest status received from the kubelet."""
        with self._changed:
            return self._status

    def wait_registered(self, timeout: float | None = None) -> bool:
        """Wait until the kubelet reports a successful registration; False on timeout.

        A rejection does not end the wait (the kubelet retries with backoff); its reason
        is in `status.error`.
        """
        with self._changed:
            return self._changed.wait_for(lambda: bool(self._status.registered), timeout)
