"""Socket naming: defaults, rolling-update names and the AF_UNIX path limit."""

from __future__ import annotations

import base64
import hashlib

import pytest

from simdra._driver.kubelet.sockets import (
    KUBELET_PLUGINS_DIR,
    KUBELET_REGISTRY_DIR,
    UNIX_PATH_MAX,
    dra_socket_path,
    is_instance_dra_socket,
    path_bytes,
    plugin_data_dir,
    registration_socket_name,
    registration_socket_path,
)

POD_UID = "f358c92b-e974-4f29-a84f-6c64bec0949d"


def _driver(length: int) -> str:
    return "a" * (length - 12) + ".example.org"


def _unhash(part: str) -> bytes:
    return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))


def test_default_paths_match_the_go_helper() -> None:
    data = plugin_data_dir("gpu.example.com")
    assert data == "/var/lib/kubelet/plugins/gpu.example.com"
    assert dra_socket_path(data) == "/var/lib/kubelet/plugins/gpu.example.com/dra.sock"
    assert registration_socket_path(KUBELET_REGISTRY_DIR, "gpu.example.com") == (
        "/var/lib/kubelet/plugins_registry/gpu.example.com-reg.sock"
    )


def test_rolling_update_dra_socket_carries_pod_uid() -> None:
    assert dra_socket_path("/p/drv", POD_UID) == f"/p/drv/dra-{POD_UID}.sock"


# Helper v0.38 (rollingUpdatePluginSocketFile): `dra-<pod UID>.sock` while the path is
# shorter than 108 bytes, else `dra-<base64url(SHA-256(UID)[:8])>` without the suffix, so
# that a 63-byte driver name under the default plugins directory fits too.
@pytest.mark.parametrize(("driver_length", "want_bytes", "hashed"),
                         [(36, 107, False), (37, 78, True), (63, 104, True)])
def test_rolling_update_dra_socket_is_hashed_where_the_uid_does_not_fit(
    driver_length: int, want_bytes: int, hashed: bool
) -> None:
    path = dra_socket_path(plugin_data_dir(_driver(driver_length)), POD_UID)
    assert path_bytes(path) == want_bytes
    name = path.rsplit("/", 1)[1]
    if hashed:
        assert not name.endswith(".sock")
        assert _unhash(name.removeprefix("dra-")) == hashlib.sha256(POD_UID.encode()).digest()[:8]
    else:
        assert name == f"dra-{POD_UID}.sock"
    assert is_instance_dra_socket(name)  # a dead one is cleaned up after a crash


def test_the_data_directorys_other_entries_are_never_taken_for_sockets() -> None:
    for name in ("dra-device-metadata", "dra.sock.tmp", "dra-abc.sock", "claims"):
        assert not is_instance_dra_socket(name)
    assert KUBELET_PLUGINS_DIR == "/var/lib/kubelet/plugins"


def test_rolling_update_prefers_full_pod_uid_when_it_fits() -> None:
    name = registration_socket_name(KUBELET_REGISTRY_DIR, "example.com", POD_UID)
    assert name == f"example.com-{POD_UID}-reg.sock"


# (driver name length, registry dir, full path bytes with the Go helper's 108-byte limit):
# the boundaries where the helper switches from one name form to the next.
HELPER_CASES = [
    (27, KUBELET_REGISTRY_DIR, 107, "uid"),
    (28, KUBELET_REGISTRY_DIR, 108, "uid"),
    (29, KUBELET_REGISTRY_DIR, 84, "uid-hash"),
    (34, "/" + "r" * 50, 107, "uid-hash"),
    (34, "/" + "r" * 51, 108, "uid-hash"),
    (34, "/" + "r" * 52, 89, "driver-uid-hash"),
    (34, "/" + "r" * 70, 107, "driver-uid-hash"),
    (34, "/" + "r" * 71, 108, "driver-uid-hash"),
    (34, "/" + "r" * 72, 109, "driver-uid-hash"),  # nothing fits: shortest form anyway
    (27, KUBELET_REGISTRY_DIR + "/./", 107, "uid"),  # path is cleaned before counting
]


def _form(name: str, driver: str) -> str:
    if POD_UID in name:
        return "uid"
    return "uid-hash" if name.startswith(driver + "-") else "driver-uid-hash"


@pytest.mark.parametrize(("driver_length", "registry", "want_bytes", "form"), HELPER_CASES)
def test_helper_compatible_choice_at_108_bytes(
    driver_length: int, registry: str, want_bytes: int, form: str
) -> None:
    driver = _driver(driver_length)
    path = registration_socket_path(registry, driver, POD_UID, max_path_bytes=UNIX_PATH_MAX)
    assert path_bytes(path) == want_bytes
    assert _form(path.rsplit("/", 1)[1], driver) == form


def test_default_limit_avoids_paths_grpc_cannot_bind() -> None:
    # The Go helper would pick a 108-byte path here; gRPC can bind at most 107 bytes.
    driver = _driver(28)
    path = registration_socket_path(KUBELET_REGISTRY_DIR, driver, POD_UID)
    assert path_bytes(path) == 83
    assert POD_UID not in path


def test_uid_hash_form_is_first_8_bytes_of_sha256_unpadded_base64url() -> None:
    driver = _driver(29)
    name = registration_socket_name(KUBELET_REGISTRY_DIR, driver, POD_UID)
    part = name.removeprefix(driver + "-").removesuffix("-reg.sock")
    assert len(part) == 11 and "=" not in part
    assert _unhash(part) == hashlib.sha256(POD_UID.encode()).digest()[:8]


def test_shortest_form_hashes_driver_nul_uid_to_16_bytes() -> None:
    driver = "b" * 100
    name = registration_socket_name(KUBELET_REGISTRY_DIR, driver, POD_UID)
    assert name.startswith("dra-") and name.endswith("-reg.sock")
    part = name.removeprefix("dra-").removesuffix("-reg.sock")
    assert len(part) == 22 and "=" not in part
    assert _unhash(part) == hashlib.sha256(f"{driver}\0{POD_UID}".encode()).digest()[:16]


def test_names_are_deterministic_and_distinct_per_driver_and_pod() -> None:
    long_driver = "c" * 100  # forces the form that hashes both inputs
    a = registration_socket_name(KUBELET_REGISTRY_DIR, long_driver, POD_UID)
    assert a == registration_socket_name(KUBELET_REGISTRY_DIR, long_driver, POD_UID)
    assert a != registration_socket_name(KUBELET_REGISTRY_DIR, "d" * 100, POD_UID)
    other_uid = "ffffffff-ffff-ffff-ffff-ffffffffffff"
    assert a != registration_socket_name(KUBELET_REGISTRY_DIR, long_driver, other_uid)


def test_url_safe_alphabet_keeps_names_path_safe() -> None:
    # Many UIDs: no hashed name may contain '/' (it would become a subdirectory).
    for i in range(200):
        uid = f"{i:08x}-0000-0000-0000-000000000000"
        assert "/" not in registration_socket_name("/r", "e" * 100, uid)


# Helper v0.38 counts the NUL (a name fits while the path is shorter than 108 bytes), which
# is what gRPC can bind and our default: the 108-byte cases above move to the next form.
@pytest.mark.parametrize(("driver_length", "registry", "want_bytes", "form"), [
    (27, KUBELET_REGISTRY_DIR, 107, "uid"),
    (28, KUBELET_REGISTRY_DIR, 83, "uid-hash"),
    (34, "/" + "r" * 50, 107, "uid-hash"),
    (34, "/" + "r" * 51, 88, "driver-uid-hash"),
    (34, "/" + "r" * 70, 107, "driver-uid-hash"),
])
def test_default_choice_is_the_v038_helpers(
    driver_length: int, registry: str, want_bytes: int, form: str
) -> None:
    driver = _driver(driver_length)
    path = registration_socket_path(registry, driver, POD_UID)
    assert path_bytes(path) == want_bytes
    assert _form(path.rsplit("/", 1)[1], driver) == form
