"""The DeviceClasses select the devices simdra publishes, and every example workload can
be scheduled on the devices of the overlay its comments name, within the example quota.

Devices come from simdra's own fake backend configured exactly as the overlay's
DaemonSet configures it; claims are placed with simdra's test allocator (the
kube-scheduler stand-in in simdra/_driver/testing).
"""

from __future__ import annotations

import copy
import re
import uuid
from collections import Counter
from pathlib import Path

import pytest

from simdra._driver.builtins import builtin_kinds
from simdra._driver.core.quantity import parse_quantity
from simdra._driver.core.validation import validate_slice
from simdra._driver.devices.backend import FakeBackend
from simdra._driver.devices.model import Inventory
from simdra._driver.devices.standard_attributes import scalar_attributes
from simdra._driver.slices.desired import desired_pools
from simdra._driver.testing.allocation.builders import resource_slice
from simdra._driver.testing.allocation.cel import DeviceView, compile_selector
from simdra._driver.testing.scheduler import AllocationError, allocate
from tests.deploy.kustomize import pod_specs
from tests.deploy.layout import JSON, K8S_VERSIONS, env_of, of_kind, one
from tests.deploy.schemas import schema_errors

NODE = "kind-worker"
_TYPE_SELECTOR = re.compile(r'\.type == "([a-z0-9-]+)"')


def class_types(classes: dict[str, JSON]) -> dict[str, str]:
    """DeviceClass name -> the device `type` its selector asks for."""
    types = {}
    for name, device_class in classes.items():
        (selector,) = device_class["spec"]["selectors"]
        match = _TYPE_SELECTOR.search(selector["cel"]["expression"])
        assert match, f"DeviceClass {name} selects no device type"
        types[name] = match[1]
    return types


def registered_device_types() -> tuple[str, ...]:
    """The names of simdra's registered device kinds (the `type` attribute values)."""
    return builtin_kinds().names()


def plugin_env(objects: list[JSON]) -> dict[str, str]:
    (container,) = one(objects, "DaemonSet")["spec"]["template"]["spec"]["containers"]
    return {name: e["value"] for name, e in env_of(container).items() if "value" in e}


def overlay_inventory(objects: list[JSON], scratch: Path) -> tuple[str, Inventory]:
    """(driver name, devices) of the fake backend configured as the overlay configures it;
    an inventory file named by DEVICE_PROFILE is taken from the overlay's ConfigMap."""
    env = plugin_env(objects)
    profile = env["DEVICE_PROFILE"]
    if profile.startswith("/"):
        data = {k: v for cm in of_kind(objects, "ConfigMap") for k, v in cm["data"].items()}
        file = scratch / Path(profile).name
        file.write_text(data[Path(profile).name])
        profile = str(file)
    driver = env["DRIVER_NAME"]
    backend = FakeBackend(profile, driver, NODE, int(env.get("NUM_DEVICES", "8")),
                          kinds=builtin_kinds())
    # As the plugin publishes it: lists folded to their first item without LIST_ATTRIBUTES.
    if env.get("LIST_ATTRIBUTES", "false") == "true":
        return driver, backend.discover()
    return driver, scalar_attributes(backend.discover())


def published_slices(driver: str, inventory: Inventory) -> list[JSON]:
    """The ResourceSlices the plugin publishes for `inventory` on NODE."""
    slices = []
    for pool_name, pool in desired_pools(inventory).items():
        for index, desired in enumerate(pool.slices):
            content = desired.spec_content()
            slices.append(resource_slice(
                driver, content.get("devices", []), pool=pool_name, node=NODE,
                count=len(pool.slices), name=f"{NODE}-{pool_name}-{index}",
                shared_counters=content.get("sharedCounters"),
            ))
    return slices


def example_claims(objects: list[JSON]) -> list[JSON]:
    """The ResourceClaims the examples lead to: named claims once, one claim per pod
    (Deployment replicas included) for each template a pod references, and one per
    PodGroup for each template the group names (its pods share it)."""
    templates = {t["metadata"]["name"]: t for t in of_kind(objects, "ResourceClaimTemplate")}
    claims = [copy.deepcopy(c) for c in of_kind(objects, "ResourceClaim")]
    groups = {g["metadata"]["name"]: g["spec"].get("resourceClaims") or []
              for g in of_kind(objects, "PodGroup")}
    for workload in objects:
        pods = (workload.get("spec") or {}).get("replicas", 1)
        group = groups.get(workload["metadata"]["name"]) if workload["kind"] == "PodGroup" else None
        for spec in [{"resourceClaims": group}] if group else pod_specs(workload):
            shared = groups.get((spec.get("schedulingGroup") or {}).get("podGroupName"), [])
            for ref in spec.get("resourceClaims") or []:
                # A pod's claim that matches its PodGroup's is the group's one claim.
                if "resourceClaimTemplateName" not in ref or (not group and ref in shared):
                    continue
                template = templates[ref["resourceClaimTemplateName"]]
                claims += [{
                    "apiVersion": "resource.k8s.io/v1",
                    "kind": "ResourceClaim",
                    "metadata": {"name": f"{workload['metadata']['name']}-{i}-{ref['name']}",
                                 "namespace": template["metadata"]["namespace"]},
                    "spec": copy.deepcopy(template["spec"]["spec"]),
                } for i in range(pods)]
    for claim in claims:
        claim["metadata"]["uid"] = str(uuid.uuid4())
    return claims


def allocate_all(claims: list[JSON], slices: list[JSON], classes: dict[str, JSON]) -> dict:
    """Claim name -> allocation, each claim seeing the earlier ones' devices as taken."""
    done: list[JSON] = []
    for claim in claims:
        allocation = allocate(claim, slices, classes, done, node_name=NODE)
        done.append({**claim, "status": {"allocation": allocation}})
    return {c["metadata"]["name"]: c["status"]["allocation"] for c in done}


@pytest.fixture(scope="module")
def classes(rendered) -> dict[str, JSON]:
    return {c["metadata"]["name"]: c for c in of_kind(rendered["base"], "DeviceClass")}


def results(allocation: JSON) -> list[JSON]:
    return allocation["devices"]["results"]


# -- DeviceClasses


def test_every_registered_device_type_has_one_device_class(classes):
    types = class_types(classes)

    assert sorted(types.values()) == sorted(registered_device_types())
    for name, device_type in types.items():
        assert name == f"{device_type}.dra.example.com", "classes are named <type>.<driver>"


def test_device_classes_select_our_devices_by_type(rendered, classes, tmp_path):
    # fake-cpu: the fake overlay's profiles and the CPU kind's.
    driver, inventory = overlay_inventory(rendered["overlays/fake-cpu"], tmp_path)
    fake_types = {kind.name for kind in builtin_kinds().kinds if kind.profiles}

    for name, device_type in class_types(classes).items():
        if device_type not in fake_types:  # published by other backends, tested there
            continue
        (selector,) = classes[name]["spec"]["selectors"]
        expression = selector["cel"]["expression"]
        assert f'device.driver == "{driver}"' in expression
        compiled = compile_selector(expression)
        matched = {d.name for _, d in inventory.devices()
                   if compiled.matches(DeviceView.of(driver, d.spec))}
        assert matched == {d.name for _, d in inventory.devices()
                           if d.attribute("type") == device_type}
        assert matched, f"{name} selects none of the fake devices"
        assert not any(compiled.matches(DeviceView.of("other.example.com", d.spec))
                       for _, d in inventory.devices()), "another driver's devices match"


# -- examples on the devices of the overlays


def test_nic_template_asks_for_1g_of_bandwidth(rendered):
    template = one(rendered["examples"], "ResourceClaimTemplate", "nic-1g")
    (request,) = template["spec"]["spec"]["devices"]["requests"]

    assert request["exactly"]["deviceClassName"] == "nic.dra.example.com"
    assert request["exactly"]["capacity"] == {"requests": {"bandwidth": "1G"}}


def test_all_examples_fit_together_on_the_fake_inventory_overlay(rendered, classes, tmp_path):
    driver, inventory = overlay_inventory(rendered["overlays/fake-inventory"], tmp_path)
    # CPU devices are fake-cpu's alone (test_examples_prepare runs cpu-numa.yaml there).
    claims = [c for c in example_claims(rendered["examples"])
              if "cpu.dra.example.com" not in str(c["spec"]["devices"]["requests"])]
    allocations = allocate_all(claims, published_slices(driver, inventory), classes)
    device = {name: [inventory.device(r["pool"], r["device"]) for r in results(a)]
              for name, a in allocations.items()}

    (nic,) = results(allocations["nic-1g-0-nic"])
    assert parse_quantity(nic["consumedCapacity"]["bandwidth"]) == parse_quantity("1G")
    shared = [results(allocations[f"gpu-20gi-{i}-gpu"])[0] for i in range(2)]
    assert {r["device"] for r in shared} <= {"gpu-shared-0", "gpu-shared-1"}
    assert all(parse_quantity(r["consumedCapacity"]["memory"]) == 20 * 2**30 for r in shared)
    assert [d.attribute("profile") for d in device["gpu-partition-2g"]] == ["2g.20gb"]
    (config,) = allocations["gpu-time-sliced"]["devices"]["config"]
    assert config["source"] == "FromClaim"
    assert config["opaque"]["driver"] == driver
    assert config["opaque"]["parameters"]["kind"] == "GpuConfig"


def test_nic_and_config_examples_run_on_the_built_in_profiles(rendered, classes, tmp_path):
    driver, inventory = overlay_inventory(rendered["overlays/fake"], tmp_path)
    slices = published_slices(driver, inventory)
    claims = {c["metadata"]["name"]: c for c in example_claims(rendered["examples"])}

    fits = allocate_all([claims["nic-1g-0-nic"], claims["gpu-time-sliced"]], slices, classes)
    assert set(fits) == {"nic-1g-0-nic", "gpu-time-sliced"}
    # The built-in GPUs are exclusive and whole: sharing and partitions need the
    # inventory overlay, as the examples' kustomization says.
    for name in ("gpu-20gi-0-gpu", "gpu-partition-2g"):
        with pytest.raises(AllocationError):
            allocate(claims[name], slices, classes, node_name=NODE)


def test_fake_inventory_publishes_valid_resource_slices(rendered, tmp_path):
    driver, inventory = overlay_inventory(rendered["overlays/fake-inventory"], tmp_path)
    slices = published_slices(driver, inventory)

    assert {d.attribute("type") for _, d in inventory.devices()} == {"gpu", "nic", "license"}
    for resource_slice_obj in slices:
        assert validate_slice(resource_slice_obj) == []
        for version in K8S_VERSIONS:
            assert schema_errors([_as_release_keeps(resource_slice_obj, version)], version) == []


def _as_release_keeps(slice_obj: dict, version: str) -> dict:
    """The slice as a release before 1.37 stores it: the plugin's writes are not strict,
    so such a server drops the 1.37 fields (the publisher reports them as dropped)."""
    if version >= "1.37":
        return slice_obj
    obj = copy.deepcopy(slice_obj)
    obj["spec"].pop("partitionTypeAttribute", None)
    obj["spec"].pop("skipNodeOperations", None)
    for device in obj["spec"].get("devices") or []:
        for consumption in device.get("consumesCounters") or []:
            consumption.pop("compatibilityGroups", None)
    return obj


def test_example_quota_admits_all_examples(rendered, classes):
    objects = rendered["examples"]
    hard = one(objects, "ResourceQuota")["spec"]["hard"]
    claims = example_claims(objects)
    devices: Counter[str] = Counter()
    for claim in claims:
        for request in claim["spec"]["devices"]["requests"]:
            devices[request["exactly"]["deviceClassName"]] += request["exactly"].get("count", 1)

    assert len(claims) <= int(hard["count/resourceclaims.resource.k8s.io"])
    for device_class, count in devices.items():
        key = f"{device_class}.deviceclass.resource.k8s.io/devices"
        assert count <= int(hard[key]), f"{key}: examples need {count}"
    assert set(devices) <= set(classes), "quota keys must name our DeviceClasses"
