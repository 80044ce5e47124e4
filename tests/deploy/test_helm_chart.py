"""The Helm chart (deploy/helm/simdra), run through real helm: it lints, its defaults
render exactly the objects of the fake overlay, each values file under
deploy/helm/values renders exactly the objects of its overlay, and each value does what
values.yaml says. (The same deploy checks as the overlays' run on the chart renderings
too: test_daemonset, test_rbac_and_policy and test_manifests_schema take them all.)"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.deploy.helm import HelmError, lint, template
from tests.deploy.kustomize import MERGE_KEYS, ObjectKey, by_key
from tests.deploy.layout import (
    HELM_RENDERINGS,
    HELM_VALUES,
    JSON,
    K8S_VERSIONS,
    REPO,
    env_of,
    of_kind,
    one,
)
from tests.deploy.schemas import schema_errors

# Not an overlay's equivalent: points the defaults at a locally built image.
LOCAL_IMAGE_VALUES = "local-image.yaml"
INVENTORY_KEY = "inventory.yaml"


def _sorted_lists(value: Any, field: str = "") -> Any:
    """`value` with merge-keyed lists (env, volumes, ports, ...) in key order: the API
    server treats them as maps, and Kustomize and helm write them in different orders."""
    if isinstance(value, dict):
        return {name: _sorted_lists(item, name) for name, item in value.items()}
    if isinstance(value, list):
        items = [_sorted_lists(item) for item in value]
        key = MERGE_KEYS.get(field)
        return sorted(items, key=lambda item: str(item[key])) if key else items
    return value


def normalized(objects: list[JSON]) -> dict[ObjectKey, JSON]:
    """Objects by identity, merge-keyed lists sorted (see _sorted_lists)."""
    return {key: _sorted_lists(obj) for key, obj in by_key(objects).items()}


def without_namespace_object(objects: list[JSON]) -> list[JSON]:
    """An overlay's objects but its Namespace: Kustomize creates one, while the chart
    installs into the release namespace, which helm or its user creates."""
    return [obj for obj in objects if obj["kind"] != "Namespace"]


def differences(chart: list[JSON], overlay: list[JSON]) -> list[str]:
    """One line per object that is missing, extra, or different (the overlay's Namespace
    aside: see without_namespace_object)."""
    ours, theirs = normalized(chart), normalized(without_namespace_object(overlay))
    lines = [f"only in the chart: {key}" for key in ours.keys() - theirs.keys()]
    lines += [f"only in the overlay: {key}" for key in theirs.keys() - ours.keys()]
    for key in ours.keys() & theirs.keys():
        if ours[key] != theirs[key]:
            lines.append(f"differs: {key}\n  chart:   {ours[key]}\n  overlay: {theirs[key]}")
    return sorted(lines)


def plugin_pod(objects: list[JSON]) -> JSON:
    return one(objects, "DaemonSet")["spec"]["template"]["spec"]


def plugin_container(objects: list[JSON]) -> JSON:
    (container,) = plugin_pod(objects)["containers"]
    return container


def env_values(objects: list[JSON]) -> dict[str, str]:
    return {n: e["value"] for n, e in env_of(plugin_container(objects)).items() if "value" in e}


# -- lint, and every values file is used ------------------------------------------------


@pytest.mark.parametrize("values_file", [None, *sorted(p.name for p in HELM_VALUES.glob("*"))])
def test_chart_lints_with_every_values_file(values_file):
    done = lint([values_file] if values_file else [])

    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 chart(s) linted, 0 chart(s) failed" in done.stdout


def test_every_values_file_is_rendered_by_the_tests():
    checked = {name for files, _ in HELM_RENDERINGS.values() for name in files}

    assert {p.name for p in HELM_VALUES.glob("*")} == checked | {LOCAL_IMAGE_VALUES}


# -- the chart renders what the overlays render ----------------------------------------


@pytest.mark.parametrize("name", HELM_RENDERINGS)
def test_chart_renders_exactly_the_objects_of_its_overlay(rendered, name):
    overlay = HELM_RENDERINGS[name][1]

    assert differences(rendered[name], rendered[overlay]) == []
    # The chart owns no namespace: the release's is helm's (or its user's) to create.
    assert "Namespace" not in kinds(rendered[name])
    assert "Namespace" in kinds(rendered[overlay])


def test_fake_inventory_values_carry_the_overlays_inventory_file_unchanged(rendered):
    def inventory(objects: list[JSON]) -> str:
        return one(objects, "ConfigMap", "simdra-inventory")["data"][INVENTORY_KEY]

    chart = inventory(rendered["helm/fake-inventory"])
    assert chart == inventory(rendered["overlays/fake-inventory"])
    assert yaml.safe_load(chart)["pools"][0]["name"] == "{node}"


def test_a_changed_value_is_a_difference(rendered):
    chart = template(settings=["devices.count=4"])

    assert [line.splitlines()[0] for line in differences(chart, rendered["overlays/fake"])] == [
        "differs: ('apps/v1', 'DaemonSet', 'simdra', 'simdra-kubelet-plugin')"]


def test_local_image_values_change_only_the_image(rendered):
    objects = template([LOCAL_IMAGE_VALUES])
    container = plugin_container(objects)

    assert (container["image"], container["imagePullPolicy"]) == ("localhost/simdra:dev",
                                                                  "Never")
    expected = copy.deepcopy(rendered["helm/default"])
    plugin_container(expected).update(image="localhost/simdra:dev", imagePullPolicy="Never")
    assert differences(objects, expected) == []


# -- each value does what values.yaml says ------------------------------------------------


def check_namespace(objects: list[JSON]) -> None:
    namespaced = [o for o in objects if "namespace" in o["metadata"]]
    assert {o["metadata"]["namespace"] for o in namespaced} == {"dra-system"}
    assert {o["kind"] for o in namespaced} >= {"DaemonSet", "ServiceAccount"}
    assert "Namespace" not in kinds(objects)
    for binding in of_kind(objects, "ClusterRoleBinding"):
        assert binding["subjects"][0]["namespace"] == "dra-system"
    (condition,) = one(objects, "ValidatingAdmissionPolicy")["spec"]["matchConditions"]
    assert '"system:serviceaccount:dra-system:simdra-kubelet-plugin"' in condition["expression"]


def check_health_port(objects: list[JSON]) -> None:
    container = plugin_container(objects)
    assert env_values(objects)["HEALTHCHECK_PORT"] == "6000"
    assert container["livenessProbe"]["grpc"]["port"] == 6000
    assert container["readinessProbe"]["grpc"]["port"] == 6000
    assert {p["name"]: p["containerPort"] for p in container["ports"]}["healthz"] == 6000


def check_metrics_off(objects: list[JSON]) -> None:
    container = plugin_container(objects)
    assert "METRICS_PORT" not in env_values(objects)  # the plugin's default: off
    assert [p["name"] for p in container["ports"]] == ["healthz"]
    assert "annotations" not in one(objects, "DaemonSet")["spec"]["template"]["metadata"]


def check_metrics_service(objects: list[JSON]) -> None:
    service = one(objects, "Service", "simdra-kubelet-plugin-metrics")
    template_labels = one(objects, "DaemonSet")["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"] == template_labels
    (port,) = service["spec"]["ports"]
    container_ports = {p["name"] for p in plugin_container(objects)["ports"]}
    assert port["targetPort"] in container_ports and port["port"] == 9400


def check_inventory_file(objects: list[JSON], inventory: str) -> None:
    config_map = one(objects, "ConfigMap", "simdra-inventory")
    assert config_map["data"][INVENTORY_KEY] == inventory
    assert env_values(objects)["DEVICE_PROFILE"] == f"/etc/simdra/{INVENTORY_KEY}"


def check_custom_backend(objects: list[JSON]) -> None:
    assert env_values(objects)["DEVICE_BACKEND"] == "mypackage.devices:MyBackend"
    security = plugin_container(objects)["securityContext"]
    assert not security.get("privileged") and security["capabilities"] == {"drop": ["ALL"]}


CUSTOM_AFFINITY = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
    "nodeSelectorTerms": [{"matchExpressions": [
        {"key": "example.com/gpu", "operator": "In", "values": ["true"]}]}]}}}


def kinds(objects: list[JSON]) -> set[str]:
    return {obj["kind"] for obj in objects}


def env_subset(*names: str) -> Callable[[list[JSON]], dict[str, str | None]]:
    return lambda objects: {name: env_values(objects).get(name) for name in names}


Observe = Callable[[list[JSON]], Any]
# case -> (--set values, --set-json values, what to look at, what it must be)
VALUE_CASES: dict[str, tuple[list[str], list[str], Observe, Any]] = {
    "image": (
        ["image.repository=registry.example.com/simdra", "image.tag=0.1.0",
         "image.pullPolicy=Always"], [],
        lambda o: (plugin_container(o)["image"], plugin_container(o)["imagePullPolicy"]),
        ("registry.example.com/simdra:0.1.0", "Always")),
    "built-in profiles": (
        ["devices.profile=gpu-shared", "devices.count=2"], [],
        env_subset("DEVICE_PROFILE", "NUM_DEVICES"),
        {"DEVICE_PROFILE": "gpu-shared", "NUM_DEVICES": "2"}),
    "log": (
        ["log.format=json", "log.verbosity=2"], [], env_subset("LOG_FORMAT", "VERBOSITY"),
        {"LOG_FORMAT": "json", "VERBOSITY": "2"}),
    # Maps merge with the defaults (the memory limit stays); null removes a key.
    "resources": (
        [], ['resources={"requests":{"cpu":"50m","memory":"64Mi"}}'],
        lambda o: plugin_container(o)["resources"],
        {"requests": {"cpu": "50m", "memory": "64Mi"}, "limits": {"memory": "320Mi"}}),
    "no tolerations": (
        [], ["tolerations=[]"], lambda o: plugin_pod(o).get("tolerations"), None),
    "tolerate every taint": (
        [], ['tolerations=[{"operator":"Exists"}]'], lambda o: plugin_pod(o)["tolerations"],
        [{"operator": "Exists"}]),
    # Keys given join the default Linux selector; null removes it.
    "node selector": (
        [], ['nodeSelector={"example.com/gpu":"true"}'],
        lambda o: plugin_pod(o)["nodeSelector"],
        {"kubernetes.io/os": "linux", "example.com/gpu": "true"}),
    "no os selector": (
        [], ['nodeSelector={"kubernetes.io/os":null}'],
        lambda o: plugin_pod(o).get("nodeSelector"), None),
    "affinity": (
        [], [f"affinity={json.dumps(CUSTOM_AFFINITY)}"], lambda o: plugin_pod(o)["affinity"],
        CUSTOM_AFFINITY),
    "priority class": (
        ["priorityClassName=simdra-critical"], [],
        lambda o: plugin_pod(o)["priorityClassName"], "simdra-critical"),
    "no device classes": (
        ["deviceClasses.enabled=false"], [], lambda o: "DeviceClass" in kinds(o), False),
    "no admission policy": (
        ["admissionPolicy.enabled=false"], [],
        lambda o: kinds(o) & {"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"},
        set()),
    "sysfs device selectors": (
        ["devices.backend=sysfs", "devices.sysfsAllow=vendor:0x1a03"],
        ['devices.sysfsDeny="iface:eth1, pci:0000:3b:00.0"'],
        env_subset("SYSFS_ALLOW", "SYSFS_DENY", "PROC_ROOT"),
        {"SYSFS_ALLOW": "vendor:0x1a03", "SYSFS_DENY": "iface:eth1, pci:0000:3b:00.0",
         "PROC_ROOT": "/host/proc"}),
    "extra env": (
        [], ['extraEnv=[{"name":"RESCAN_INTERVAL","value":"30"}]'],
        env_subset("RESCAN_INTERVAL"), {"RESCAN_INTERVAL": "30"}),
}


@pytest.mark.parametrize("case", VALUE_CASES)
def test_each_value_changes_what_it_says(case):
    settings, set_json, observe, expected = VALUE_CASES[case]
    objects = template(settings=settings, set_json=set_json)

    assert observe(objects) == expected
    for version in K8S_VERSIONS:
        assert schema_errors(objects, version) == []


# (--set values, a check of everything that value touches)
CHECKED_CASES: dict[str, tuple[list[str], Callable[[list[JSON]], None]]] = {
    "custom backend": (["devices.backend=mypackage.devices:MyBackend"], check_custom_backend),
    "health port": (["healthcheck.port=6000"], check_health_port),
    "metrics off": (["metrics.enabled=false"], check_metrics_off),
    "metrics service": (["metrics.service.enabled=true"], check_metrics_service),
}


@pytest.mark.parametrize("case", CHECKED_CASES)
def test_each_setting_is_followed_everywhere_it_matters(case):
    settings, check = CHECKED_CASES[case]
    objects = template(settings=settings)

    check(objects)
    for version in K8S_VERSIONS:
        assert schema_errors(objects, version) == []


def test_objects_go_into_the_release_namespace():
    objects = template(namespace="dra-system")

    check_namespace(objects)
    for version in K8S_VERSIONS:
        assert schema_errors(objects, version) == []


# (release namespace, --set values) -> the pod's priorityClassName (None: none)
PRIORITY_CASES = {
    # Clusters commonly admit system-node-critical only in kube-system.
    "elsewhere: none": ("simdra", [], None),
    "kube-system: node-critical": ("kube-system", [], "system-node-critical"),
    "a class given is used anywhere": (
        "simdra", ["priorityClassName=system-node-critical"], "system-node-critical"),
    "a class of your own in kube-system": (
        "kube-system", ["priorityClassName=simdra-critical"], "simdra-critical"),
}


@pytest.mark.parametrize("case", PRIORITY_CASES)
def test_node_critical_priority_only_where_it_is_admitted(case):
    namespace, settings, expected = PRIORITY_CASES[case]

    assert plugin_pod(template(settings=settings, namespace=namespace)).get(
        "priorityClassName") == expected


def test_inventory_from_a_file_with_set_file(tmp_path: Path):
    inventory = "pools:\n  - name: \"{node}-edge\"\n    devices:\n      - name: fpga-0\n"
    file = tmp_path / "my-inventory.yaml"
    file.write_text(inventory)

    objects = template(set_files=[f"devices.inventory={file}"])

    check_inventory_file(objects, inventory)
    assert schema_errors(objects, K8S_VERSIONS[-1]) == []


@pytest.mark.parametrize(("setting", "named"), [
    ("devicess.count=1", "devicess"),  # misspelt key
    ("devices.backend=gpu", "backend"),  # neither fake, sysfs nor module:Class
    ("image.pullPolicy=Sometimes", "pullPolicy"),
    ("healthcheck.port=0", "port"),
    ("devices.sysfsDeny=eth1", "sysfsDeny"),  # a selector needs its pci:/vendor:/iface: key
    # The chart no longer owns a namespace: the release namespace replaced the value.
    ("namespace.name=simdra", "namespace"),
    ("driverName=Crypto_Example", "driverName"),  # not a DNS subdomain
    ("devices.kinds={crypto_driver}", "kinds"),  # a kind is package.module:Class
])
def test_values_schema_rejects_mistakes(setting, named):
    with pytest.raises(HelmError, match=named):
        template(settings=[setting])


# -- a second release: another driver built on simdra next to simdra's own ---------------

SECOND_DRIVER_VALUES = REPO / "docs" / "examples" / "crypto-driver" / "values.yaml"
# Host paths every plugin shares: the kubelet's own directories, where each driver's files
# are named after its driver name (registration socket, CDI spec files).
KUBELET_SHARED_PATHS = {"/var/lib/kubelet/plugins_registry", "/var/run/cdi",
                        "/var/lib/kubelet/pod-resources"}


def host_paths(objects: list[JSON]) -> set[str]:
    return {v["hostPath"]["path"] for v in plugin_pod(objects)["volumes"] if "hostPath" in v}


def names(objects: list[JSON]) -> set[tuple[str, str | None, str]]:
    return {(o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"]) for o in objects}


@pytest.mark.parametrize("namespace", ["simdra", "crypto-driver"])
def test_a_second_drivers_release_collides_with_simdras_in_nothing(rendered, namespace):
    ours = rendered["helm/default"]
    theirs = template([str(SECOND_DRIVER_VALUES)], namespace=namespace)

    assert names(ours).isdisjoint(names(theirs))
    assert host_paths(ours) & host_paths(theirs) == KUBELET_SHARED_PATHS
    assert "/var/lib/kubelet/plugins/crypto.example.com" in host_paths(theirs)
    # Neither DaemonSet's selector takes the other's pods.
    for first, other in ((ours, theirs), (theirs, ours)):
        selector = one(first, "DaemonSet")["spec"]["selector"]["matchLabels"]
        labels = one(other, "DaemonSet")["spec"]["template"]["metadata"]["labels"]
        assert not selector.items() <= labels.items()
    (condition,) = one(theirs, "ValidatingAdmissionPolicy")["spec"]["matchConditions"]
    account = f"system:serviceaccount:{namespace}:crypto-driver-kubelet-plugin"
    assert f'"{account}"' in condition["expression"]
    assert env_subset("DRIVER_NAME", "KINDS", "DEVICE_PROFILE")(theirs) == {
        "DRIVER_NAME": "crypto.example.com", "KINDS": "crypto_driver:CryptoKind",
        "DEVICE_PROFILE": "crypto"}
    assert [c["metadata"]["name"] for c in of_kind(theirs, "DeviceClass")] == [
        "crypto.crypto.example.com"]
    assert lint([str(SECOND_DRIVER_VALUES)]).returncode == 0
    for version in K8S_VERSIONS:
        assert schema_errors(theirs, version) == []


def test_kinds_join_into_one_kinds_variable():
    objects = template(set_json=['devices.kinds=["a.b:C","d:E"]'])

    assert env_values(objects)["KINDS"] == "a.b:C,d:E"
    assert "KINDS" not in env_values(template())
