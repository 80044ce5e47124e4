"""CDI rendering: schema-valid specs, name rules, lowest cdiVersion, file names."""

from __future__ import annotations

import pytest

from simdra._driver.claims.plan.cdi import (
    CdiError,
    cdi_kind,
    cdi_vendor,
    check_device_name,
    claim_uid_of_file,
    merge_edits,
    render_spec,
    spec_file_name,
)

from .builders import DRIVER, assert_valid_cdi_spec

KIND = cdi_kind(DRIVER)
ENV = {"env": ["A=1"]}


def test_kind_and_file_name_follow_the_dra_convention():
    assert cdi_kind(DRIVER) == f"k8s.{DRIVER}/device"
    name = spec_file_name(DRIVER, "0a1b-uid")
    assert name == f"k8s.{DRIVER}-device_0a1b-uid.json"
    assert claim_uid_of_file(DRIVER, name) == "0a1b-uid"


@pytest.mark.parametrize(
    "file_name",
    [
        "k8s.other.example.com-device_0a1b.json",
        f"k8s.{DRIVER}-device_0a1b.yaml",
        f"k8s.{DRIVER}-device_.json",
        f"k8s.{DRIVER}-device-x-device_0a1b.json",
        f".k8s.{DRIVER}-device_0a1b.json.abc.tmp",
    ],
)
def test_files_of_others_are_not_taken_for_ours(file_name):
    assert claim_uid_of_file(DRIVER, file_name) is None


@pytest.mark.parametrize("uid", ["../../etc", "a/b", "", "x\x00"])
def test_hostile_claim_uid_cannot_name_a_spec_file(uid):
    with pytest.raises(CdiError, match="cannot name a CDI spec file"):
        spec_file_name(DRIVER, uid)


@pytest.mark.parametrize("driver", ["-bad.example.com", "bad_.", "a/b", "x y"])
def test_driver_names_that_give_invalid_vendors_are_refused(driver):
    with pytest.raises(CdiError, match="driver name"):
        cdi_vendor(driver)


@pytest.mark.parametrize("name", ["gpu-0", "0abc", "a:b.c_d-e", "x"])
def test_valid_device_names(name):
    assert check_device_name(name) == name


@pytest.mark.parametrize("name", ["", "-a", "a-", "a/b", "a=b", "a b", "ü"])
def test_invalid_device_names(name):
    with pytest.raises(CdiError, match="invalid CDI device name"):
        check_device_name(name)


@pytest.mark.parametrize(
    ("name", "edits", "version"),
    [
        ("dev", ENV, "0.3.0"),
        ("dev", {"mounts": [{"hostPath": "/a", "containerPath": "/b", "type": "bind"}]}, "0.4.0"),
        ("dev", {"mounts": [{"hostPath": "/a", "containerPath": "/b"}]}, "0.3.0"),
        ("0dev", ENV, "0.5.0"),
        ("dev", {"deviceNodes": [{"path": "/dev/x", "hostPath": "/dev/y"}]}, "0.5.0"),
        ("dev", {"deviceNodes": [{"path": "/dev/x"}]}, "0.3.0"),
        ("dev", {"additionalGids": [44]}, "0.7.0"),
        ("dev", {"intelRdt": {"closID": "c"}}, "0.7.0"),
        ("dev", {"intelRdt": {"closID": "c", "schemata": ["L3:0=f"]}}, "1.1.0"),
        ("dev", {"netDevices": [{"hostInterfaceName": "eth1", "name": "net1"}]}, "1.1.0"),
        ("1dev", {"additionalGids": [44]}, "0.7.0"),
    ],
)
def test_lowest_cdi_version_that_expresses_the_content(name, edits, version):
    spec = render_spec(KIND, [(name, edits)])
    assert spec["cdiVersion"] == version
    assert_valid_cdi_spec(spec)


def test_empty_device_edits_are_refused():
    with pytest.raises(CdiError, match="empty containerEdits"):
        render_spec(KIND, [("dev", {"env": []})])


def test_duplicate_device_names_are_refused():
    with pytest.raises(CdiError, match="occurs twice"):
        render_spec(KIND, [("dev", ENV), ("dev", ENV)])


@pytest.mark.parametrize("entry", ["NOEQUALS", "=value", 5])
def test_env_entries_must_be_name_equals_value(entry):
    with pytest.raises(CdiError, match="not NAME=VALUE"):
        render_spec(KIND, [("dev", {"env": [entry]})])


def test_merge_concatenates_in_order_and_rejects_unknown_keys():
    merged = merge_edits(
        [{"env": ["A=1"], "deviceNodes": [{"path": "/dev/a"}]}, {"env": ["B=2"], "mounts": []}]
    )
    assert merged == {"env": ["A=1", "B=2"], "deviceNodes": [{"path": "/dev/a"}]}
    with pytest.raises(CdiError, match="unknown containerEdits keys"):
        merge_edits([{"devices": []}])
