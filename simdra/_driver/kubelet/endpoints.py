"""The kubelet-facing side of the plugin: DRA socket plus registration socket.

`start_kubelet_plugin` serves the DRA services (and health, when given a source) on the
DRA socket first, and only then creates the registration socket: the kubelet may call
the DRA socket as soon as it sees the registration socket (api-facts 8). Each socket
has its own gRPC server and serves only its own services.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from types import TracebackType

import grpc

from simdra._driver.claims.types import ClaimPreparer
from simdra._driver.kubelet.dra_service import add_dra_services
from simdra._driver.kubelet.gen import pluginregistration_v1_pb2_grpc as regpb_grpc
from simdra._driver.kubelet.health import HealthSource, ResourceHealthServicer, add_health_services
from simdra._driver.kubelet.registration import RegistrationServicer, RegistrationStatus
from simdra._driver.kubelet.server import start_unix_server
from simdra._driver.kubelet.services import advertised_name
from simdra._driver.kubelet.stale_sockets import remove_stale_instance_sockets

log = logging.getLogger(__name__)

# Calls the DRA socket serves at once. A prepare spends most of its time waiting (on the
# API server, then for the group commit it joins), so the more that wait together, the
# more share one batch's fsyncs; 8 capped a batch at 8 claims. Threads start on demand:
# a node that prepares one claim at a time has one.
DRA_WORKERS = 64
# Threads of the registration socket's own server: the kubelet's registration calls
# never wait behind a burst of prepares.
REGISTRATION_WORKERS = 2
# The largest message either socket takes. The kubelet's largest is a prepare of one
# pod's claims: at the cap (MAX_CLAIMS_PER_CALL) and with the longest names the API
# allows that is about 100 KiB. gRPC's default, 4 MiB, would let 64 calls in flight
# hold 256 MiB of requests; anything past 1 MiB is not the kubelet's.
MAX_REQUEST_BYTES = 1 << 20
_SERVER_OPTIONS = (("grpc.max_receive_message_length", MAX_REQUEST_BYTES),)


class KubeletPlugin:
    """A running kubelet plugin: both sockets served until `stop()`.

    One server per socket, as the Go kubelet-plugin helper: the registration socket lives
    in a directory other node agents mount (node-driver-registrars, other DRA drivers),
    so it serves Registration only; the DRA socket serves DRA and health, never
    Registration. A gRPC server answers every service it has on every socket it
    listens on, hence two servers.
    """

    def __init__(
        self,
        driver_name: str,
        dra_socket: str,
        registration_socket: str,
        preparer: ClaimPreparer,
        health: HealthSource | None = None,
        *,
        max_workers: int = DRA_WORKERS,
        interceptors: Sequence[grpc.ServerInterceptor] = (),
    ) -> None:
        """Start serving; see `start_kubelet_plugin`."""
        self.driver_name = driver_name
        _remove_killed_instances(driver_name, dra_socket, registration_socket)
        self._health_servicers: list[ResourceHealthServicer] = []
        def register_dra(server: grpc.Server) -> None:
            self._register_dra(server, preparer, health)

        # The DRA socket answers before the registration socket shows (module docstring).
        self._dra_server = start_unix_server(
            dra_socket, register_dra, max_workers=max_workers, name="dra",
            interceptors=interceptors, options=_SERVER_OPTIONS)
        self.dra_socket = self._dra_server.path
        self._start_registration(registration_socket, interceptors)
        log.info(
            "kubelet plugin for %s: DRA socket %s, registration socket %s, services %s",
            driver_name, self.dra_socket, self.registration_socket,
            ", ".join(self.supported_versions),
        )

    def _start_registration(self, registration_socket: str,
                            interceptors: Sequence[grpc.ServerInterceptor]) -> None:
        """The registration socket's own server, Registration only; started once the DRA
        socket serves, and the DRA server stopped again when it cannot start."""
        self.registration = RegistrationServicer(
            self.driver_name, self.dra_socket, self.supported_versions)
        try:
            self._registration_server = start_unix_server(
                registration_socket,
                lambda s: regpb_grpc.add_RegistrationServicer_to_server(self.registration, s),
                max_workers=REGISTRATION_WORKERS, name="registration",
                interceptors=interceptors, options=_SERVER_OPTIONS)
        except BaseException:
            self._stop_dra(grace=None)
            raise
        self.registration_socket = self._registration_server.path

    def _register_dra(self, server: grpc.Server, preparer: ClaimPreparer,
                      health: HealthSource | None) -> None:
        """The DRA socket's services: DRA, and health when there is a source."""
        services = add_dra_services(server, preparer)
        if health is not None:
            names, self._health_servicers = add_health_services(server, health)
            services += names
        # Computed from what is actually served, in preference order (v1 first).
        self.supported_versions = tuple(advertised_name(s) for s in services)

    @property
    def registration_status(self) -> RegistrationStatus:
        """What the kubelet last reported about the registration."""
        return self.registration.status

    def wait_registered(self, timeout: float | None = None) -> bool:
        """Wait until the kubelet accepted the plugin (see RegistrationServicer)."""
        return self.registration.wait_registered(timeout)

    def stop(self, grace: float | None = 1.0) -> None:
        """Remove the registration socket first (the kubelet deregisters this instance),
        then stop serving the DRA socket. Only this instance's own sockets are removed."""
        self._registration_server.remove_socket()
        self._registration_server.stop(grace)
        self._stop_dra(grace)

    def _stop_dra(self, grace: float | None) -> None:
        for servicer in self._health_servicers:
            servicer.close()
        self._dra_server.stop(grace)

    def __enter__(self) -> KubeletPlugin:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def _remove_killed_instances(driver_name: str, dra_socket: str, registration_socket: str) -> None:
    """A killed instance's sockets stay (with --pod-uid, each has its own names), and the
    kubelet keeps trying them: removed before ours appear."""
    remove_stale_instance_sockets(
        driver_name, os.path.dirname(dra_socket), os.path.dirname(registration_socket),
        keep=(dra_socket, registration_socket),
    )


def start_kubelet_plugin(
    driver_name: str,
    dra_socket: str,
    registration_socket: str,
    preparer: ClaimPreparer,
    health: HealthSource | None = None,
    *,
    max_workers: int = DRA_WORKERS,
    interceptors: Sequence[grpc.ServerInterceptor] = (),
) -> KubeletPlugin:
    """Serve DRAPlugin v1 + v1beta1 (and DRAResourceHealth v1alpha1 + v1 when `health`
    is given) on `dra_socket`, then the registration service, alone, on
    `registration_socket`: each socket has its own server (see KubeletPlugin).

    The preparer serializes its own calls (one prepare/unprepare at a time, as the Go
    helper does by default, and across instances during a rolling update).
    interceptors: see every call on both sockets (`simdra._driver.kubelet.call_counts`).
    Raises SocketPathError when a path is unusable; nothing is left running then.
    """
    return KubeletPlugin(
        driver_name,
        dra_socket,
        registration_socket,
        preparer,
        health,
        max_workers=max_workers,
        interceptors=interceptors,
    )
