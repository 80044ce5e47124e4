"""Device metadata (KEP-5304): with the feature on, a prepared claim gets one metadata
file per request, mounted read-only at upstream's container path by the claim's CDI
spec and handed to the kubelet with each device of the request; the file is rewritten
(next generation) only when its content changes, restored after a crash, removed on
unprepare; hostile names never become paths. Upstream's decoder judges the files in
the e2e (tests/e2e/cmd/metadata-check)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from simdra._driver.claims.plan.metadata import CONTAINER_DIR, HOST_SUBDIR, POD_CLAIM_ANNOTATION
from simdra._driver.claims.prepare.transaction import Preparer
from simdra._driver.claims.source import StaticClaimSource
from simdra._driver.claims.types import ClaimRef
from tests.claims.builders import RULES

from .builders import DRIVER, SHARE_1, assert_valid_cdi_spec, claim, inventory, result

A = "aaaaaaaa-0000-4000-8000-000000000001"
B = "bbbbbbbb-0000-4000-8000-000000000002"
VERSIONS = ["metadata.resource.k8s.io/v1beta1", "metadata.resource.k8s.io/v1alpha1"]


class Node:
    """A CDI directory, a data directory and the claims the API server holds."""

    def __init__(self, tmp_path: Path) -> None:
        self.cdi, self.data = tmp_path / "cdi", tmp_path / DRIVER
        self.source = StaticClaimSource()

    def add(self, uid: str, *results: dict[str, Any], pod_claim: str | None = None,
            name: str | None = None) -> ClaimRef:
        raw = claim(uid, list(results), name=name)
        if pod_claim is not None:
            raw["metadata"]["annotations"] = {POD_CLAIM_ANNOTATION: pod_claim}
        self.source.put(raw)
        return ClaimRef("default", raw["metadata"]["name"], uid)

    def preparer(self, *, metadata: bool = True) -> Preparer:
        return Preparer(DRIVER, self.source, lambda: inventory(gpus=2, nics=1), self.cdi,
                        self.data, device_metadata=metadata, rules=RULES)

    def file(self, uid: str, request: str) -> Path:
        return self.data.resolve() / HOST_SUBDIR / uid / request / f"{DRIVER}-metadata.json"

    def spec(self, uid: str) -> dict[str, Any]:
        [path] = self.cdi.glob(f"*{uid}*.json")
        return dict(json.loads(path.read_text()))


def _objects(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.fixture
def node(tmp_path: Path) -> Node:
    return Node(tmp_path)


def test_each_request_gets_a_file_mounted_at_upstreams_path(node):
    ref = node.add(A, result("gpus", "gpu-0"), result("gpus", "gpu-1"),
                   result("net", "nic-0", share=SHARE_1, consumed={"bandwidth": "1G"}))
    answer = node.preparer().prepare([ref])[A]

    assert answer.error == ""
    gpus = _objects(node.file(A, "gpus"))
    assert [o["apiVersion"] for o in gpus] == VERSIONS  # newest first
    first = gpus[0]
    assert first["metadata"] == {"name": ref.name, "namespace": "default", "uid": A,
                                 "generation": 1}
    [request] = first["requests"]
    assert request["name"] == "gpus"
    assert [(d["driver"], d["pool"], d["name"]) for d in request["devices"]] == [
        (DRIVER, "node-a", "gpu-0"), (DRIVER, "node-a", "gpu-1")]
    assert request["devices"][0]["attributes"]["type"] == {"string": "gpu"}
    assert "podClaimName" not in first
    spec = node.spec(A)
    assert_valid_cdi_spec(spec)
    mounts = {d["name"]: d["containerEdits"]["mounts"][0] for d in spec["devices"]
              if "_metadata_" in d["name"]}
    # The request's directory is mounted (a rewrite renames a new file into it, which a
    # mounted file would hide from a running container); the file inside has the
    # container's name, so the container's path is upstream's.
    assert mounts[f"{A}_metadata_gpus"] == {
        "hostPath": str(node.file(A, "gpus").parent),
        "containerPath": f"{CONTAINER_DIR}/resourceclaims/{ref.name}/gpus",
        "options": ["ro", "bind"]}
    assert node.file(A, "gpus").name == f"{DRIVER}-metadata.json"
    # Every device of a request carries its request's metadata device, and only that.
    ids = {d.device_name: d.cdi_device_ids for d in answer.devices}
    assert ids["gpu-0"][1] == ids["gpu-1"][1] == f"k8s.{DRIVER}/device={A}_metadata_gpus"
    assert ids["nic-0"][1] == f"k8s.{DRIVER}/device={A}_metadata_net"


def test_a_claim_from_a_template_is_mounted_under_its_pod_claim_name(node):
    ref = node.add(A, result("gpu/fallback", "gpu-1"), pod_claim="my-gpu")
    node.preparer().prepare([ref])

    [first, _] = _objects(node.file(A, "gpu"))  # the base request names the path
    assert first["podClaimName"] == "my-gpu"
    assert first["requests"][0]["name"] == "gpu/fallback"  # the file names it as allocated
    [mount] = [d["containerEdits"]["mounts"][0] for d in node.spec(A)["devices"]
               if "_metadata_" in d["name"]]
    assert mount["containerPath"] == f"{CONTAINER_DIR}/resourceclaimtemplates/my-gpu/gpu"


def test_off_by_default_nothing_is_written_or_mounted(node):
    ref = node.add(A, result("gpus", "gpu-0"))
    answer = node.preparer(metadata=False).prepare([ref])[A]

    assert not (node.data / HOST_SUBDIR).exists()
    assert [d.cdi_device_ids for d in answer.devices] == [(f"k8s.{DRIVER}/device={A}-gpu-0",)]


def test_a_retry_leaves_the_file_alone_and_a_change_bumps_the_generation(node):
    ref = node.add(A, result("gpus", "gpu-0"))
    node.preparer().prepare([ref])
    path = node.file(A, "gpus")
    before = path.stat().st_mtime_ns

    node.preparer().prepare([ref])  # a restart, then the kubelet's retry
    assert path.stat().st_mtime_ns == before
    assert _objects(path)[0]["metadata"]["generation"] == 1

    edited = [{**o, "requests": []} for o in _objects(path)]
    path.write_text("".join(json.dumps(o) + "\n" for o in edited))
    node.preparer()  # start-up restores what the record says, as the next generation
    assert [o["metadata"]["generation"] for o in _objects(path)] == [2, 2]
    assert _objects(path)[0]["requests"][0]["devices"][0]["name"] == "gpu-0"


def test_a_lost_file_is_restored_before_the_spec_and_unprepare_removes_it(node):
    ref = node.add(A, result("gpus", "gpu-0"))
    preparer = node.preparer()
    preparer.prepare([ref])
    node.file(A, "gpus").unlink()

    assert node.preparer().prepare([ref])[A].error == ""  # kubelet restart: same answer
    assert node.file(A, "gpus").exists()
    assert node.preparer().unprepare([ref])[A].error == ""
    assert not (node.data.resolve() / HOST_SUBDIR / A).exists()


def test_metadata_of_a_claim_without_a_record_is_removed_at_start(node):
    orphan = node.file(B, "gpus")
    orphan.parent.mkdir(parents=True)
    orphan.write_text("{}\n")

    node.preparer()

    assert not orphan.parent.parent.exists()


@pytest.mark.parametrize("pod_claim", [
    "../../etc", "a/b", ".", "..", "x" * 253, "gpü", "Upper", "",
])
def test_a_hostile_pod_claim_name_fails_the_prepare_in_one_line(node, pod_claim):
    ref = node.add(A, result("gpus", "gpu-0"), pod_claim=pod_claim)
    answer = node.preparer().prepare([ref])[A]

    assert POD_CLAIM_ANNOTATION in answer.error and "\n" not in answer.error
    assert len(answer.error) < 1024
    assert not (node.data / HOST_SUBDIR).exists() and not list(node.cdi.glob("*.json"))


def test_the_longest_valid_names_stay_inside_their_directories(node):
    # A 253-character claim name (a DNS subdomain: dots included) and a 63-character
    # request name are valid: the file is prepared, each name one path component.
    name = ".".join(["a" * 63] * 3 + ["b" * 61])
    request = "r" * 63
    ref = node.add(A, result(request, "gpu-0"), name=name)

    assert node.preparer().prepare([ref])[A].error == ""
    assert node.file(A, request).is_file()
    [mount] = [d["containerEdits"]["mounts"][0] for d in node.spec(A)["devices"]
               if "_metadata_" in d["name"]]
    inside = Path(mount["containerPath"])
    assert inside.parent == CONTAINER_DIR / "resourceclaims" / name
    assert inside.name == request and ".." not in inside.parts
