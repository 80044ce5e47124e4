"""Device names and attribute values the sysfs backend derives (pure units)."""

from __future__ import annotations

import re

import pytest

from simdra._driver.devices.sysfs.names import label, unique_names
from simdra._driver.devices.sysfs.values import string_attr, to_semver

DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


@pytest.mark.parametrize(("address", "expected"), [
    ("0000:3b:00.0", "gpu-0000-3b-00-0"),
    ("0000:c1:1f.7", "gpu-0000-c1-1f-7"),
    ("10000:e1:00.0", "gpu-10000-e1-00-0"),  # VMD domains are wider than 4 digits
])
def test_gpu_names_follow_the_pci_address(address: str, expected: str) -> None:
    assert label("gpu", address) == expected


@pytest.mark.parametrize("interface", ["eth0", "enp59s0f0np0", "br-4f2a9c1d7e3b"])
def test_label_shaped_interface_names_are_kept(interface: str) -> None:
    assert label("nic", interface) == f"nic-{interface}"


@pytest.mark.parametrize("interface", ["Eth0", "eth0.100", "eth0_1", "-x-", "wlan@0",
                                       "\u0432\u0435th", "a" * 70])
def test_other_interface_names_become_dns_labels(interface: str) -> None:
    name = label("nic", interface)

    assert DNS_LABEL.match(name) and len(name) <= 63
    assert label("nic", interface) == name  # stable


def test_sanitized_names_of_different_interfaces_do_not_meet() -> None:
    interfaces = ["eth0", "Eth0", "ETH0", "eth0.1", "eth0_1", "eth0-1"]

    assert len({label("nic", i) for i in interfaces}) == len(interfaces)


def test_name_collisions_resolve_by_identity_not_scan_order() -> None:
    pairs = [("nic-a", "zeta"), ("nic-a", "alpha"), ("nic-a-2", "other")]

    forward = dict(zip([p[1] for p in pairs], unique_names(pairs), strict=True))
    backward = dict(zip([p[1] for p in pairs[::-1]], unique_names(pairs[::-1]), strict=True))

    assert forward == backward == {"alpha": "nic-a", "other": "nic-a-2", "zeta": "nic-a-3"}


@pytest.mark.parametrize(("vendor", "semver"), [
    ("550.54.15", "550.54.15"),
    ("535.104.05", "535.104.5"),
    ("550.54", "550.54.0"),
    ("470", "470.0.0"),
    ("560.35.03-beta", "560.35.3"),
    ("unknown", None),
])
def test_vendor_versions_become_semver(vendor: str, semver: str | None) -> None:
    assert to_semver(vendor) == semver


def test_string_values_fit_the_api_limit() -> None:
    assert string_attr("x" * 100) == {"string": "x" * 64}
    assert string_attr("short") == {"string": "short"}
