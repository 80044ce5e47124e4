"""The crypto driver under simdra's harness (simdra.testing.LocalCluster): the real plugin
process with CryptoKind registered publishes the accelerators, two claims share one
accelerator's sessions, each prepared share's CDI spec carries its config and the device's
attributes, and a bad config fails the prepare with one line naming the field.

Run it where simdra (with its `demo` extra) and this package import:
    PYTHONPATH=docs/examples/crypto-driver python -m pytest docs/examples/crypto-driver/tests
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from simdra import ProfileContext, validate_device
from simdra.testing import LocalCluster, exactly

import crypto_driver

DRIVER = "crypto.example.com"
CLASS = f"crypto.{DRIVER}"


@pytest.fixture
def cluster(monkeypatch: pytest.MonkeyPatch) -> Iterator[LocalCluster]:
    """One node whose plugin runs with CryptoKind and one accelerator."""
    # The plugin is a child process that inherits the environment: crypto_driver must
    # import there too, installed or not.
    package_root = str(Path(crypto_driver.__file__).resolve().parents[1])
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        p for p in (package_root, os.environ.get("PYTHONPATH")) if p))
    workdir = tempfile.mkdtemp(dir="/tmp", prefix="crypto-")  # short: socket paths
    try:
        with LocalCluster(workdir, driver_name=DRIVER) as local:
            # Also creates the kind's DeviceClass, CLASS, as the chart would.
            local.start_plugin(profile="crypto", num_devices=1,
                               extra=["--kind", "crypto_driver:CryptoKind"])
            yield local
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def config(**fields: Any) -> list[dict[str, Any]]:
    """A claim's config list with one CryptoConfig entry."""
    parameters = {"apiVersion": crypto_driver.API_VERSION, "kind": "CryptoConfig", **fields}
    return [{"opaque": {"driver": DRIVER, "parameters": parameters}}]


def share(sessions: str) -> dict[str, Any]:
    """An `exactly` request for a share of `sessions` of one accelerator."""
    return exactly("crypto", CLASS, capacity={"requests": {"sessions": sessions}})


def cdi_env(cluster: LocalCluster, uid: str) -> dict[str, str]:
    """The SIMDRA_DEVICE_<ID>_<KEY> env of the claim's one CDI device, by KEY."""
    [env] = cluster.device_env(uid).values()
    return env


def test_accelerators_are_valid_devices_of_shared_sessions() -> None:
    context = ProfileContext(driver_name=DRIVER, node_name="node-1")
    for index in range(3):
        spec = crypto_driver.crypto_device(context, index).spec
        assert validate_device(spec, f"spec.devices[{index}]") == []
        assert spec["allowMultipleAllocations"] is True
    # The same node and driver give the same serial: stable across restarts.
    assert crypto_driver.crypto_device(context, 0) == crypto_driver.crypto_device(context, 0)


def test_plugin_publishes_the_accelerator(cluster: LocalCluster) -> None:
    published = cluster.published_devices()

    assert sorted(published) == ["crypto-0"]
    device = published["crypto-0"]
    assert validate_device(device, "spec.devices[0]") == []
    assert device["attributes"]["type"] == {"string": "crypto"}
    assert device["capacity"]["sessions"]["value"] == "64"


def test_two_claims_share_one_accelerator_each_with_its_config(cluster: LocalCluster) -> None:
    cluster.create_claim("tls", share("8"), config=config(algorithm="aes-gcm", queueDepth=128))
    cluster.create_claim("hash", share("4"), config=config(algorithm="sha256"))
    for name in ("tls", "hash"):
        cluster.allocate(name)
    tls, hashing = cluster.claim_ref("tls"), cluster.claim_ref("hash")

    answer = cluster.prepare("tls", "hash")

    assert [answer[ref.uid]["error"] for ref in (tls, hashing)] == ["", ""]
    devices = [answer[ref.uid]["devices"][0] for ref in (tls, hashing)]
    assert {d["device_name"] for d in devices} == {"crypto-0"}
    assert len({d["share_id"] for d in devices}) == 2
    first, second = cdi_env(cluster, tls.uid), cdi_env(cluster, hashing.uid)
    assert (first["CRYPTO_ALGORITHM"], first["CRYPTO_QUEUE_DEPTH"]) == ("aes-gcm", "128")
    assert (second["CRYPTO_ALGORITHM"], "CRYPTO_QUEUE_DEPTH" in second) == ("sha256", False)
    assert (first["CAPACITY_SESSIONS"], second["CAPACITY_SESSIONS"]) == ("8", "4")
    for env in (first, second):
        assert (env["TYPE"], env["MODEL"], env["GENERATION"]) == ("crypto", crypto_driver.MODEL,
                                                                "3")
        assert env["ALGORITHMS"] == "aes-gcm,chacha20-poly1305,sha256"
        assert env["SERIAL"] == env["SERIAL"].lower() and len(env["SERIAL"]) == 36


@pytest.mark.parametrize(("fields", "named"), [
    ({"algorithm": "rot13"}, "parameters.algorithm: 'rot13' is not one of"),
    ({"queueDepth": 0}, "parameters.queueDepth: 0 is not in 1-1024"),
    ({"queueDepth": "deep"}, "parameters.queueDepth: 'deep' is not an integer"),
    ({"cipher": "aes-gcm"}, "parameters.cipher: unknown field"),
    # 2 sessions keep 32 entries in flight.
    ({"queueDepth": 64}, "parameters.queueDepth: 64 is more than the 32"),
])
def test_a_bad_config_fails_the_prepare_naming_the_field(
        cluster: LocalCluster, fields: dict[str, Any], named: str) -> None:
    cluster.create_claim("bad", share("2"), config=config(**fields))
    cluster.allocate("bad")
    ref = cluster.claim_ref("bad")

    error = cluster.prepare("bad")[ref.uid]["error"]

    assert named in error
    assert "\n" not in error
    assert not list(cluster.cdi_root.glob(f"*_{ref.uid}.json"))
