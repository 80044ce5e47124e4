"""Registration handshake between the plugin and the kubelet emulator."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable

import grpc
import pytest

from simdra._driver.claims.types import ClaimRef
from simdra._driver.kubelet.endpoints import KubeletPlugin
from simdra._driver.kubelet.gen import dra_v1_pb2, dra_v1_pb2_grpc
from simdra._driver.kubelet.gen import pluginregistration_v1_pb2_grpc as regpb_grpc
from simdra._driver.kubelet.health import HealthBoard
from simdra._driver.kubelet.registration import RegistrationServicer
from simdra._driver.kubelet.server import SocketPathError, start_unix_server
from simdra._driver.testing.kubelet import (
    KubeletEmulator,
    KubeletError,
    pick_dra_version,
    pick_health_version,
)

from .fakes import DRIVER, Dirs, FakePreparer

StartPlugin = Callable[..., KubeletPlugin]


def test_kubelet_registers_plugin_and_plugin_learns_it(
    start_plugin: StartPlugin, kubelet: KubeletEmulator, dirs: Dirs
) -> None:
    plugin = start_plugin()
    instance = kubelet.wait_for_plugin(DRIVER, timeout=5)
    assert instance.driver_name == DRIVER
    assert instance.endpoint == dirs.dra_socket
    assert instance.dra_version == "v1"
    assert plugin.wait_registered(timeout=5)
    assert plugin.registration_status.registered is True
    assert plugin.registration_status.error == ""


def test_supported_versions_follow_registered_services(start_plugin: StartPlugin) -> None:
    plain = start_plugin()
    assert plain.supported_versions == ("v1.DRAPlugin", "v1beta1.DRAPlugin")
    plain.stop(grace=0)
    with_health = start_plugin(health=HealthBoard())
    assert with_health.supported_versions == (
        "v1.DRAPlugin",
        "v1beta1.DRAPlugin",
        "v1alpha1.DRAResourceHealth",
        "v1.DRAResourceHealth",
    )


def test_health_service_choice_follows_advertisement(
    start_plugin: StartPlugin, kubelet: KubeletEmulator
) -> None:
    start_plugin(health=HealthBoard())
    assert kubelet.wait_for_plugin(timeout=5).health_version == "v1"


@pytest.mark.parametrize(
    ("advertised", "chosen"),
    [
        (["v1.DRAPlugin", "v1beta1.DRAPlugin"], "v1"),
        (["v1beta1.DRAPlugin", "v1.DRAPlugin"], "v1beta1"),  # the plugin's order wins
        (["v1alpha3.NodeService", "v1beta1.DRAPlugin"], "v1beta1"),
        (["v1alpha1.DRAResourceHealth", "v1.DRAPlugin"], "v1"),
        (["v1alpha3.NodeService"], None),
        ([], None),
    ],
)
def test_kubelet_picks_first_supported_entry_of_plugin_list(
    advertised: list[str], chosen: str | None
) -> None:
    assert pick_dra_version(advertised) == chosen


def test_health_pick_prefers_v1() -> None:
    assert pick_health_version(["v1alpha1.DRAResourceHealth", "v1.DRAResourceHealth"]) == "v1"
    assert pick_health_version(["v1alpha1.DRAResourceHealth"]) == "v1alpha1"
    assert pick_health_version(["v1.DRAPlugin"]) is None


def test_rejected_plugin_is_told_why(dirs: Dirs, kubelet: KubeletEmulator) -> None:
    servicer = RegistrationServicer(DRIVER, dirs.dra_socket, ["v1alpha3.NodeService"])
    server = start_unix_server(
        dirs.registration_socket,
        lambda s: regpb_grpc.add_RegistrationServicer_to_server(servicer, s),
    )
    try:
        with pytest.raises(KubeletError, match=r"v1alpha3\.NodeService"):
            kubelet.wait_for_plugin(DRIVER, timeout=0.3)
        assert servicer.status.registered is False
        assert "v1alpha3.NodeService" in servicer.status.error
        assert kubelet.instances == []
    finally:
        server.stop(grace=0)


def test_discovery_walks_subdirs_and_skips_hidden_and_non_sockets(
    start_plugin: StartPlugin, dirs: Dirs, kubelet: KubeletEmulator
) -> None:
    os.makedirs(dirs.registry)
    with open(f"{dirs.registry}/not-a-socket.sock", "w"):
        pass
    start_plugin(registration_socket=f"{dirs.registry}/.hidden-reg.sock")
    assert kubelet.sync() == []
    start_plugin(
        driver_name="net.example.com",
        dra_socket=f"{dirs.root}/net/dra.sock",
        registration_socket=f"{dirs.registry}/sub/net.example.com-reg.sock",
    )
    assert [i.driver_name for i in kubelet.sync()] == ["net.example.com"]
    assert kubelet.registration_errors == {}


def test_removed_socket_deregisters_and_recreated_socket_registers_again(
    start_plugin: StartPlugin, kubelet: KubeletEmulator
) -> None:
    first = start_plugin()
    kubelet.wait_for_plugin(DRIVER, timeout=5)
    first.stop(grace=0)
    kubelet.sync()
    assert kubelet.instances == []
    second = start_plugin()
    kubelet.wait_for_plugin(DRIVER, timeout=5)
    assert second.wait_registered(timeout=5)


def test_second_instance_with_same_endpoint_is_rejected(
    start_plugin: StartPlugin, kubelet: KubeletEmulator, dirs: Dirs
) -> None:
    start_plugin()
    kubelet.wait_for_plugin(DRIVER, timeout=5)
    rogue = RegistrationServicer(DRIVER, dirs.dra_socket, ["v1.DRAPlugin"])
    server = start_unix_server(
        f"{dirs.registry}/{DRIVER}-2-reg.sock",
        lambda s: regpb_grpc.add_RegistrationServicer_to_server(rogue, s),
    )
    try:
        assert kubelet.sync() == []
        assert "already registered" in rogue.status.error
    finally:
        server.stop(grace=0)


def test_dra_socket_answers_before_registration_socket_appears(
    dirs: Dirs, preparer: FakePreparer
) -> None:
    """The kubelet may call the DRA socket the moment it sees the registration socket."""
    seen: list[str] = []
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            if os.path.exists(dirs.registration_socket):
                with grpc.insecure_channel(f"unix:{dirs.dra_socket}") as channel:
                    try:
                        dra_v1_pb2_grpc.DRAPluginStub(channel).NodeUnprepareResources(
                            dra_v1_pb2.NodeUnprepareResourcesRequest(), timeout=5
                        )
                        seen.append("answered")
                    except grpc.RpcError as err:
                        seen.append(f"failed: {err.code()}")
                return

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        with KubeletPlugin(DRIVER, dirs.dra_socket, dirs.registration_socket, preparer):
            watcher.join(timeout=10)
    finally:
        stop.set()
        watcher.join()
    assert seen == ["answered"]


def test_failed_registration_socket_stops_dra_socket(dirs: Dirs, preparer: FakePreparer) -> None:
    os.makedirs(dirs.registry)
    with open(dirs.registration_socket, "w"):
        pass
    with pytest.raises(SocketPathError):
        KubeletPlugin(DRIVER, dirs.dra_socket, dirs.registration_socket, preparer)
    assert not os.path.exists(dirs.dra_socket)


def test_stop_removes_both_sockets(start_plugin: StartPlugin, dirs: Dirs) -> None:
    plugin = start_plugin()
    assert os.path.exists(dirs.dra_socket) and os.path.exists(dirs.registration_socket)
    plugin.stop(grace=0)
    assert not os.path.exists(dirs.dra_socket)
    assert not os.path.exists(dirs.registration_socket)


def test_unknown_driver_is_reported_by_emulator(kubelet: KubeletEmulator) -> None:
    with pytest.raises(KubeletError, match="not registered"):
        kubelet.prepare([ClaimRef("default", "c", "uid-1")], driver_name=DRIVER)
