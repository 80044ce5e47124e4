"""Every manifest (each kustomization and each chart rendering) is accepted by the API
schemas of Kubernetes 1.34 to 1.37 (strict: no unknown fields), every example file
stands on its own, and no YAML file under deploy/ is forgotten by the kustomizations."""

from __future__ import annotations

import copy

import pytest
import yaml

from tests.deploy.kustomize import by_key, load_yaml_objects, pod_specs
from tests.deploy.layout import (
    DEPLOY,
    HELM_RENDERINGS,
    K8S_VERSIONS,
    KUSTOMIZATIONS,
    OPENSHIFT_ONLY,
)
from tests.deploy.schemas import cluster_resource_quota_errors, schema_errors
from tests.deploy.test_examples_prepare import minor_of, requirements

EXAMPLE_FILES = sorted(
    p.name for p in (DEPLOY / "examples").glob("*.yaml") if p.name != "kustomization.yaml"
)


@pytest.mark.parametrize("version", K8S_VERSIONS)
@pytest.mark.parametrize("name", [*KUSTOMIZATIONS, *HELM_RENDERINGS])
def test_rendered_objects_pass_the_strict_api_schema(rendered, name, version):
    assert rendered[name], f"{name} renders nothing"
    assert schema_errors(rendered[name], version) == []


def test_schema_check_catches_a_misspelt_field(rendered):
    daemonset = copy.deepcopy(by_key(rendered["overlays/fake"])[
        ("apps/v1", "DaemonSet", "simdra", "simdra-kubelet-plugin")])
    daemonset["spec"]["template"]["spec"]["priorityClass"] = "system-node-critical"

    assert schema_errors([daemonset], K8S_VERSIONS[0]) != []


@pytest.mark.parametrize("file", EXAMPLE_FILES)
def test_each_example_file_is_a_complete_set_of_objects(file):
    objects = load_yaml_objects(DEPLOY / "examples" / file)

    requirement = requirements().get(file)
    for version in K8S_VERSIONS:
        if requirement is None or minor_of(version) >= requirement.since:
            assert schema_errors(objects, version) == []
    present = {(o["kind"], o["metadata"]["name"]) for o in objects}
    for obj in objects:
        for spec in pod_specs(obj):
            for ref in spec.get("resourceClaims") or []:
                if "resourceClaimTemplateName" in ref:
                    wanted = ("ResourceClaimTemplate", ref["resourceClaimTemplateName"])
                else:
                    wanted = ("ResourceClaim", ref["resourceClaimName"])
                assert wanted in present, f"{file}: {obj['metadata']['name']} needs {wanted}"


def test_every_yaml_file_under_deploy_is_used():
    # The chart (rendered with every values file, tests/deploy/test_helm_chart.py) and the
    # kind cluster config (tests/deploy/test_kind_config.py) are checked on their own.
    used = {DEPLOY / path for path in OPENSHIFT_ONLY}
    used |= {*(DEPLOY / "helm").rglob("*.yaml"), *(DEPLOY / "kind").rglob("*.yaml")}
    for kustomization in DEPLOY.rglob("kustomization.yaml"):
        spec = yaml.safe_load(kustomization.read_text())
        used.add(kustomization)
        entries = [*spec.get("resources", []), *(p["path"] for p in spec.get("patches", []))]
        used.update((kustomization.parent / entry).resolve() for entry in entries)
    # Examples that need more than a default cluster are applied on their own.
    used.update(DEPLOY / "examples" / name for name in requirements())

    orphans = sorted(str(p.relative_to(DEPLOY)) for p in DEPLOY.rglob("*.yaml") if p not in used)
    assert orphans == []


@pytest.mark.parametrize("file", OPENSHIFT_ONLY)
def test_openshift_cluster_resource_quota_is_well_formed(file):
    (crq,) = load_yaml_objects(DEPLOY / file)

    assert cluster_resource_quota_errors(crq) == []
    assert crq["spec"]["selector"]["labels"]["matchLabels"], "must select a set of projects"


@pytest.mark.parametrize(
    ("path", "value"),
    [
        (("spec", "selector"), None),  # required: which projects share the quota
        (("spec", "quota", "hard"), ["not", "a", "map"]),
        (("spec", "quota", "hardd"), {"pods": "1"}),
    ],
)
def test_cluster_resource_quota_check_rejects_broken_objects(path, value):
    (crq,) = load_yaml_objects(DEPLOY / OPENSHIFT_ONLY[0])
    parent = crq
    for key in path[:-1]:
        parent = parent[key]
    if value is None:
        del parent[path[-1]]
    else:
        parent[path[-1]] = value

    assert cluster_resource_quota_errors(crq) != []
