"""Every file under deploy/examples/ goes through the harness: its claims are created in
the API stand-in, allocated by the scheduler stand-in against the devices the plugin
publishes when configured as each overlay the file names (`# Overlays: ...`), and
prepared by the real plugin process through the kubelet emulator.

tests/e2e/node_scenarios/test_deploy_examples.py runs them on a real kubelet and
containerd (pods running, env checked in the container); this is the part that needs no
cluster.
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from simdra._driver.testing.cluster import LocalCluster
from tests.deploy.layout import DEPLOY, JSON, of_kind
from tests.deploy.test_examples import example_claims, plugin_env

EXAMPLES = DEPLOY / "examples"
OVERLAY_LINE = re.compile(r"^# Overlays: (.+)$", re.MULTILINE)
# Files that hold no workload: the namespace all examples use (checked below) and its
# quota (tests/deploy/test_examples.py: test_example_quota_admits_all_examples).
SETTING_FILES = {"kustomization.yaml", "namespace.yaml", "quota.yaml"}


REQUIRES_LINE = re.compile(r"^# Requires: (.+)$", re.MULTILINE)


@dataclass(frozen=True)
class Requirement:
    """What an example needs beyond a default cluster (`# Requires: 1.37, GateA, GateB`):
    the first Kubernetes minor release that serves its APIs, and feature gates that are
    off by default. Such a file stays out of kustomization.yaml (`kubectl apply -k
    deploy/examples` must work on a default cluster) and runs only where they hold."""

    since: tuple[int, int]
    gates: tuple[str, ...]

    def met_by(self, version: str, gates: Mapping[str, bool]) -> bool:
        """Whether Kubernetes `version` with these gates on can run the example."""
        return (minor_of(version) >= self.since
                and all(gates.get(gate) for gate in self.gates))


def minor_of(version: str) -> tuple[int, int]:
    """(1, 37) for "1.37", "1.37.0" or "v1.37.2"."""
    major, minor = version.lstrip("v").split(".")[:2]
    return int(major), int(minor)


def requirements() -> dict[str, Requirement]:
    """Example file -> its `# Requires:` line, for the files that have one."""
    found = {}
    for path in sorted(EXAMPLES.glob("*.yaml")):
        match = REQUIRES_LINE.search(path.read_text())
        if match:
            since, *gates = (part.strip() for part in match[1].split(","))
            found[path.name] = Requirement(minor_of(since), tuple(gates))
    return found


def workload_files() -> dict[str, list[str]]:
    """Example file -> the overlays it says it runs on."""
    found = {}
    for path in sorted(EXAMPLES.glob("*.yaml")):
        if path.name in SETTING_FILES:
            continue
        match = OVERLAY_LINE.search(path.read_text())
        assert match, f"{path.name} does not name its overlays (# Overlays: a, b)"
        found[path.name] = [o.strip() for o in match[1].split(",")]
    return found


def _load(name: str) -> list[JSON]:
    return [o for o in yaml.safe_load_all((EXAMPLES / name).read_text()) if o]


def test_the_kustomization_lists_every_example_file() -> None:
    kustomization = yaml.safe_load((EXAMPLES / "kustomization.yaml").read_text())
    files = {p.name for p in EXAMPLES.glob("*.yaml")} - {"kustomization.yaml"}

    assert set(kustomization["resources"]) == files - set(requirements())
    assert workload_files(), "no example workloads found"


def test_every_example_uses_the_example_namespace() -> None:
    (namespace,) = _load("namespace.yaml")
    name = namespace["metadata"]["name"]
    for file in [*workload_files(), "quota.yaml"]:
        for obj in _load(file):
            assert obj["metadata"].get("namespace") == name, (file, obj["metadata"]["name"])


def _overlay_cases() -> list[tuple[str, str]]:
    return [(file, overlay) for file, overlays in workload_files().items()
            for overlay in overlays]


@pytest.fixture(scope="module")
def clusters(rendered) -> Iterator[dict[str, LocalCluster]]:
    """One node per overlay the examples name, its plugin configured as that overlay's
    DaemonSet configures it, with the DeviceClasses of deploy/base."""
    started: dict[str, LocalCluster] = {}
    workdirs = []
    try:
        for overlay in sorted({o for _, o in _overlay_cases()}):
            objects = rendered[f"overlays/{overlay}"]
            env = plugin_env(objects)
            workdir = Path(tempfile.mkdtemp(dir="/tmp", prefix="sdx-"))
            workdirs.append(workdir)
            cluster = LocalCluster(workdir, driver_name=env["DRIVER_NAME"]).__enter__()
            started[overlay] = cluster
            for device_class in of_kind(rendered["base"], "DeviceClass"):
                cluster.api.put_object("deviceclasses", device_class)  # replaces the defaults
            cluster.start_plugin(profile=_profile(objects, env, workdir),
                                 num_devices=int(env.get("NUM_DEVICES", "8")))
        yield started
    finally:
        for cluster in started.values():
            cluster.stop()
        for workdir in workdirs:
            shutil.rmtree(workdir, ignore_errors=True)


def _profile(objects: list[JSON], env: dict[str, str], workdir: Path) -> str:
    """DEVICE_PROFILE; an inventory file it names is written from the overlay's ConfigMap."""
    profile = env["DEVICE_PROFILE"]
    if "/" not in profile:
        return profile
    data = {k: v for cm in of_kind(objects, "ConfigMap") for k, v in cm["data"].items()}
    path = workdir / Path(profile).name
    path.write_text(data[Path(profile).name])
    return str(path)


@pytest.mark.parametrize(("file", "overlay"), _overlay_cases())
def test_example_is_created_allocated_and_prepared(clusters, file, overlay) -> None:
    cluster = clusters[overlay]
    assert cluster.kubelet is not None
    objects = _load(file)
    refs = []
    for claim in example_claims(objects):
        namespace, name = claim["metadata"]["namespace"], claim["metadata"]["name"]
        body = {k: v for k, v in claim.items() if k != "metadata"}
        body["metadata"] = {"name": f"{overlay}-{name}", "namespace": namespace}
        cluster.resource.create_namespaced_resource_claim(namespace, body)
        cluster.allocate(body["metadata"]["name"], namespace)
        refs.append(cluster.claim_ref(body["metadata"]["name"], namespace))
    assert refs, f"{file} leads to no claims"

    answer = cluster.kubelet.prepare(refs, driver_name=cluster.driver_name)
    for ref in refs:
        assert answer[ref.uid]["error"] == "", (file, overlay, answer[ref.uid]["error"])
        assert answer[ref.uid]["devices"], (file, overlay)
    env = _container_env(cluster, refs)
    assert any(e.endswith(f"_CLAIM={refs[0].namespace}/{refs[0].name}") for e in env)
    if file == "gpu-opaque-config.yaml":  # its parameters reach the container
        assert any(e.endswith("_GPU_SHARING_STRATEGY=TimeSlicing") for e in env), env
        assert any(e.endswith("_GPU_TIME_SLICE_INTERVAL=Default") for e in env), env

    unprepared = cluster.kubelet.unprepare(refs, driver_name=cluster.driver_name)
    assert all(entry["error"] == "" for entry in unprepared.values())


def _container_env(cluster: LocalCluster, refs) -> list[str]:
    env = []
    for ref in refs:
        (spec,) = cluster.cdi_root.glob(f"*_{ref.uid}.json")
        for device in json.loads(spec.read_text())["devices"]:
            env += device["containerEdits"].get("env", [])
    return env


def test_examples_name_overlays_that_exist() -> None:
    for file, overlays in workload_files().items():
        for overlay in overlays:
            assert (DEPLOY / "overlays" / overlay / "kustomization.yaml").exists(), (file, overlay)


def test_examples_that_need_more_than_a_default_cluster_say_what() -> None:
    needs = requirements()
    assert needs["workload-claim.yaml"] == Requirement(
        (1, 37), ("GenericWorkload", "DRAWorkloadResourceClaims"))
    for file in workload_files():  # an API off by default is named by its gates
        kinds = {o["kind"] for o in _load(file)}
        assert "PodGroup" not in kinds or file in needs, file
    need = needs["workload-claim.yaml"]
    both = {"GenericWorkload": True, "DRAWorkloadResourceClaims": True}
    assert need.met_by("v1.37.2", both) and need.met_by("1.38.0", both)
    assert not need.met_by("v1.36.3", both)
    assert not need.met_by("v1.37.2", {**both, "DRAWorkloadResourceClaims": False})


def test_a_pod_group_example_leads_to_one_claim_its_pods_share() -> None:
    objects = _load("workload-claim.yaml")
    [group] = [o for o in objects if o["kind"] == "PodGroup"]
    pods = [o for o in objects if o["kind"] == "Pod"]
    assert len(pods) == 2
    for pod in pods:
        assert pod["spec"]["schedulingGroup"]["podGroupName"] == group["metadata"]["name"]
        assert pod["spec"]["resourceClaims"] == group["spec"]["resourceClaims"]
    assert [c["metadata"]["name"] for c in example_claims(objects)] == ["trainers-0-gpu"]
