"""The DaemonSet each overlay renders gives the plugin what `simdra run` needs on a node."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from fractions import Fraction
from pathlib import PurePosixPath

import pytest
import yaml

from simdra._driver.core.quantity import parse_quantity
from simdra._driver.kubelet.healthcheck import READINESS_SERVICE
from tests.deploy.layout import CLAIM_STATUS_OVERLAYS, DEPLOYMENTS, JSON, REPO, env_of, one

# Settings naming host directories the pod mounts whole, at the same path.
HOST_DIRS = {
    "KUBELET_REGISTRAR_DIRECTORY_PATH": "/var/lib/kubelet/plugins_registry",
    "CDI_ROOT": "/var/run/cdi",
}
KUBELET_PLUGINS_DIR = "/var/lib/kubelet/plugins"
# Clusters commonly admit this class only in kube-system; no deployment here is there.
NODE_CRITICAL = "system-node-critical"


def daemonset(objects: list[JSON]) -> JSON:
    return one(objects, "DaemonSet", "simdra-kubelet-plugin")


def plugin_container(objects: list[JSON]) -> JSON:
    (container,) = daemonset(objects)["spec"]["template"]["spec"]["containers"]
    return container


def value(container: JSON, name: str) -> str:
    entry = env_of(container)[name]
    assert "value" in entry, f"{name} is not a literal value"
    return str(entry["value"])


def mounts_by_path(objects: list[JSON]) -> dict[str, tuple[JSON, JSON]]:
    """Container mount path -> (volumeMount, volume)."""
    pod = daemonset(objects)["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    mounts = plugin_container(objects)["volumeMounts"]
    return {m["mountPath"]: (m, volumes[m["name"]]) for m in mounts}


@pytest.fixture(scope="module")
def run_settings() -> dict[str, str]:
    """Every environment variable `simdra run` reads and its default, from its own --help."""
    help_text = subprocess.run(
        [sys.executable, "-m", "simdra", "run", "--help"], cwd=REPO, capture_output=True,
        text=True, check=True, env={**os.environ, "COLUMNS": "200"}, timeout=60,
    ).stdout
    return dict(re.findall(r"\[env\s+(\w+);\s*default\s+([^\]]*)\]", help_text))


def effective(container: JSON, name: str, run_settings: dict[str, str]) -> str:
    """What `simdra run` uses for a setting: the env value, else its default."""
    return value(container, name) if name in env_of(container) else run_settings[name]


@pytest.mark.parametrize("overlay", DEPLOYMENTS)
def test_every_env_var_is_a_simdra_run_setting(rendered, overlay, run_settings):
    names = set(env_of(plugin_container(rendered[overlay])))

    assert names - run_settings.keys() == set()
    assert {"NODE_NAME", "POD_UID", "DEVICE_BACKEND"} <= names


@pytest.mark.parametrize("overlay", DEPLOYMENTS)
def test_node_name_and_pod_uid_come_from_the_downward_api(rendered, overlay):
    env = env_of(plugin_container(rendered[overlay]))

    assert env["NODE_NAME"]["valueFrom"] == {"fieldRef": {"fieldPath": "spec.nodeName"}}
    assert env["POD_UID"]["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.uid"}}


@pytest.mark.parametrize("overlay", DEPLOYMENTS)
def test_kubelet_and_cdi_dirs_are_host_paths_at_the_same_place(rendered, overlay):
    container = plugin_container(rendered[overlay])
    mounts = mounts_by_path(rendered[overlay])

    for name, path in HOST_DIRS.items():
        assert value(container, name) == path
        mount, volume = mounts[path]
        assert volume["hostPath"]["path"] == path, f"{name}: host and container paths differ"
        assert not mount.get("readOnly"), f"{name}: the plugin writes there"


@pytest.mark.parametrize("overlay", DEPLOYMENTS)
def test_only_the_plugins_own_directory_of_the_kubelet_plugins_dir_is_mounted(rendered,
                                                                             overlay):
    container = plugin_container(rendered[overlay])
    mounts = mounts_by_path(rendered[overlay])
    plugins_dir = value(container, "KUBELET_PLUGINS_DIRECTORY_PATH")
    # Where `simdra run` keeps its DRA socket and claim state (Config.data_dir).
    own = str(PurePosixPath(plugins_dir) / value(container, "DRIVER_NAME"))

    assert plugins_dir == KUBELET_PLUGINS_DIR
    mount, volume = mounts[own]
    assert volume["hostPath"] == {"path": own, "type": "DirectoryOrCreate"}
    assert not mount.get("readOnly"), "the plugin writes its socket and state there"
    # Neither the plugins directory (other drivers' sockets and state) nor a parent of it.
    host_paths = {v["hostPath"]["path"] for _, v in mounts.values() if "hostPath" in v}
    assert not [p for p in host_paths
                if PurePosixPath(plugins_dir).is_relative_to(PurePosixPath(p))]


@pytest.mark.parametrize("overlay", DEPLOYMENTS)
def test_rolling_update_overlaps_old_and_new_pod(rendered, overlay):
    spec = daemonset(rendered[overlay])["spec"]
    pod = spec["template"]["spec"]

    assert spec["updateStrategy"] == {
        "type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}
    }
    # Two pods on one node at once need different socket names (POD_UID) and no host
    # ports, or the surge pod could never start.
    assert "POD_UID" in env_of(plugin_container(rendered[overlay]))
    assert not pod.get("hostNetwork")
    assert all("hostPort" not in p for p in plugin_container(rendered[overlay])["ports"])
    assert pod["terminationGracePeriodSeconds"] > 0


@pytest.mark.parametrize("overlay", DEPLOYMENTS)
def test_pod_runs_on_linux_with_its_service_account(rendered, overlay):
    objects = rendered[overlay]
    pod = daemonset(objects)["spec"]["template"]["spec"]
    account = one(objects, "ServiceAccount", pod["serviceAccountName"])

    assert pod["nodeSelector"]["kubernetes.io/os"] == "linux"
    assert account["metadata"]["namespace"] == daemonset(objects)["metadata"]["namespace"]


@pytest.mark.parametrize("overlay", DEPLOYMENTS)
def test_node_critical_priority_only_in_kube_system(rendered, overlay):
    daemon = daemonset(rendered[overlay])
    namespace = daemon["metadata"]["namespace"]

    assert namespace != "kube-system"
    assert daemon["spec"]["template"]["spec"].get("priorityClassName") != NODE_CRITICAL


@pytest.mark.parametrize("overlay", DEPLOYMENTS)
def test_liveness_probe_and_metrics_port_match_the_plugin_settings(rendered, overlay):
    container = plugin_container(rendered[overlay])
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}

    health = int(value(container, "HEALTHCHECK_PORT"))
    assert container["livenessProbe"]["grpc"]["port"] == health == ports["healthz"]
    assert int(value(container, "METRICS_PORT")) == ports["metrics"]
    annotations = daemonset(rendered[overlay])["spec"]["template"]["metadata"]["annotations"]
    assert annotations["prometheus.io/port"] == str(ports["metrics"])


@pytest.mark.parametrize("overlay", DEPLOYMENTS)
def test_readiness_probe_asks_the_readiness_service_on_the_health_port(rendered, overlay):
    container = plugin_container(rendered[overlay])

    readiness = container["readinessProbe"]["grpc"]
    assert readiness == {"port": int(value(container, "HEALTHCHECK_PORT")),
                         "service": READINESS_SERVICE}
    # Liveness asks the overall status (""), which never waits for the API server.
    assert "service" not in container["livenessProbe"]["grpc"]


@pytest.mark.parametrize("overlay", DEPLOYMENTS)
def test_plugin_tolerates_the_usual_gpu_node_taints(rendered, overlay):
    tolerations = daemonset(rendered[overlay])["spec"]["template"]["spec"]["tolerations"]

    for key in ("nvidia.com/gpu", "amd.com/gpu"):
        assert {"key": key, "operator": "Exists", "effect": "NoSchedule"} in tolerations


@pytest.mark.parametrize("overlay", DEPLOYMENTS)
def test_resources_have_requests_and_a_memory_limit(rendered, overlay):
    resources = plugin_container(rendered[overlay])["resources"]
    memory = {k: parse_quantity(resources[k]["memory"]) for k in ("requests", "limits")}

    assert parse_quantity(resources["requests"]["cpu"]) > 0
    assert Fraction(0) < memory["requests"] <= memory["limits"]


@pytest.mark.parametrize("overlay", DEPLOYMENTS)
def test_image_is_simdra_and_never_pulled_when_present(rendered, overlay):
    container = plugin_container(rendered[overlay])

    assert container["image"] == "simdra:latest"
    assert container["imagePullPolicy"] == "IfNotPresent"


@pytest.mark.parametrize("overlay", ["overlays/fake", "overlays/fake-inventory",
                                     "helm/default", "helm/fake-inventory"])
def test_fake_devices_need_no_privileges(rendered, overlay):
    container = plugin_container(rendered[overlay])
    security = container["securityContext"]

    assert value(container, "DEVICE_BACKEND") == "fake"
    assert not security.get("privileged")
    assert security["allowPrivilegeEscalation"] is False
    assert security["capabilities"] == {"drop": ["ALL"]}
    assert security["readOnlyRootFilesystem"] is True
    mounted = set(mounts_by_path(rendered[overlay]))
    assert not {"/sys", "/dev"} & mounted


SYSFS_DEPLOYMENTS = ["overlays/sysfs", "helm/sysfs", "overlays/sysfs-nvidia", "helm/sysfs-nvidia"]


@pytest.mark.parametrize("overlay", SYSFS_DEPLOYMENTS)
def test_sysfs_overlay_reads_the_host_devices(rendered, overlay, run_settings):
    objects = rendered[overlay]
    container = plugin_container(objects)
    mounts = mounts_by_path(objects)

    assert value(container, "DEVICE_BACKEND") == "sysfs"
    sysfs = value(container, "SYSFS_ROOT")
    mount, volume = mounts[sysfs]
    assert volume["hostPath"]["path"] == "/sys" and mount["readOnly"] is True
    # Device nodes are found under DEV_ROOT, which must be the host's /dev, read-only:
    # the plugin only reads it (NVML's read-write opens of device nodes work there too).
    dev_root = effective(container, "DEV_ROOT", run_settings)
    mount, volume = mounts[dev_root]
    assert volume["hostPath"]["path"] == "/dev" and mount["readOnly"] is True
    # The runtime bind-mounts the termination message file at its path: under the
    # read-only /dev it cannot make the mount point, and the container never starts.
    assert not container["terminationMessagePath"].startswith("/dev/")
    mount, volume = mounts[str(PurePosixPath(container["terminationMessagePath"]).parent)]
    assert not mount.get("readOnly")
    # The host's default routes (whose NICs are not published) are read under PROC_ROOT,
    # which must be the host's /proc: the pod's own would show the pod's network.
    mount, volume = mounts[value(container, "PROC_ROOT")]
    assert volume["hostPath"]["path"] == "/proc" and mount["readOnly"] is True


@pytest.mark.parametrize("overlay", DEPLOYMENTS)
def test_claim_status_is_on_only_with_the_component(rendered, overlay, run_settings):
    container = plugin_container(rendered[overlay])

    claim_status = effective(container, "CLAIM_STATUS", run_settings)
    assert claim_status == ("true" if overlay in CLAIM_STATUS_OVERLAYS else "false")


@pytest.mark.parametrize("overlay", ["overlays/fake-inventory", "helm/fake-inventory"])
def test_fake_inventory_overlay_mounts_the_inventory_it_names(rendered, overlay):
    objects = rendered[overlay]
    profile = PurePosixPath(value(plugin_container(objects), "DEVICE_PROFILE"))
    mount, volume = mounts_by_path(objects)[str(profile.parent)]
    config_map = one(objects, "ConfigMap", volume["configMap"]["name"])

    assert mount["readOnly"] is True
    assert config_map["metadata"]["namespace"] == daemonset(objects)["metadata"]["namespace"]
    assert "pools" in yaml.safe_load(config_map["data"][profile.name])


@pytest.mark.parametrize("overlay", ["overlays/sysfs", "helm/sysfs"])
def test_sysfs_without_nvml_runs_unprivileged(rendered, overlay):
    """Real devices on a node with no NVIDIA GPU: no privileged mode, no capabilities."""
    security = plugin_container(rendered[overlay])["securityContext"]

    assert not security.get("privileged")
    assert security["allowPrivilegeEscalation"] is False
    assert security["capabilities"] == {"drop": ["ALL"]}
    assert security["readOnlyRootFilesystem"] is True


@pytest.mark.parametrize("overlay", ["overlays/sysfs-nvidia", "helm/sysfs-nvidia"])
def test_only_the_nvidia_variant_is_privileged(rendered, overlay):
    """NVML opens /dev/nvidia*, which the device cgroup allows only in privileged mode."""
    security = plugin_container(rendered[overlay])["securityContext"]

    assert security["privileged"] is True
    assert security["readOnlyRootFilesystem"] is True
