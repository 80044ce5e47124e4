"""The kubectl-free renderer gives what `kubectl apply -k` applies, so CI without kubectl
checks the same objects."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from tests.deploy.kustomize import (
    JSON,
    KustomizeError,
    by_key,
    kubectl_available,
    load_kustomization,
    render,
    render_with_kubectl,
    rewrite_image,
    strategic_merge,
)
from tests.deploy.layout import (
    CLAIM_STATUS_COMPONENT,
    CLAIM_STATUS_ROLE,
    DEPLOY,
    KUSTOMIZATIONS,
    env_of,
    one,
)

needs_kubectl = pytest.mark.skipif(not kubectl_available(), reason="kubectl is not on PATH")


@needs_kubectl
@pytest.mark.parametrize("name", KUSTOMIZATIONS)
def test_fallback_renders_exactly_what_kubectl_renders(name: str):
    expected = by_key(render_with_kubectl(DEPLOY / name))
    actual = by_key(load_kustomization(DEPLOY / name))

    assert sorted(actual) == sorted(expected)
    for key, obj in expected.items():
        assert actual[key] == obj, f"{name}: {key} differs"


def test_without_kubectl_rendering_falls_back_to_the_loader(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))

    assert not kubectl_available()
    assert by_key(render(DEPLOY / "overlays" / "fake")) == by_key(
        load_kustomization(DEPLOY / "overlays" / "fake"))


def relative(path: Path, start: Path) -> str:
    """Kustomize only accepts relative resource paths."""
    return os.path.relpath(path, start)


def user_overlay(tmp_path: Path, images: list[dict[str, str]]) -> Path:
    """A user's own kustomization on top of the fake overlay, as docs/operator.md suggests."""
    (tmp_path / "kustomization.yaml").write_text(yaml.safe_dump({
        "resources": [relative(DEPLOY / "overlays" / "fake", tmp_path)],
        "images": images,
    }))
    return tmp_path


@pytest.mark.parametrize(
    ("rule", "image"),
    [
        ({"name": "simdra", "newName": "registry.example.com/simdra", "newTag": "v0.1.0"},
         "registry.example.com/simdra:v0.1.0"),
        ({"name": "simdra", "digest": "sha256:" + "a" * 64}, "simdra@sha256:" + "a" * 64),
    ],
)
def test_user_overlay_can_point_the_daemonset_at_its_registry(tmp_path, rule, image):
    directory = user_overlay(tmp_path, [rule])

    fallback = load_kustomization(directory)
    daemonset = one(fallback, "DaemonSet")
    assert daemonset["spec"]["template"]["spec"]["containers"][0]["image"] == image
    if kubectl_available():
        assert by_key(fallback) == by_key(render_with_kubectl(directory))


def both_renderings(directory: Path) -> list[JSON]:
    """The fallback loader's objects, checked against kubectl's when kubectl is here."""
    fallback = load_kustomization(directory)
    if kubectl_available():
        assert by_key(fallback) == by_key(render_with_kubectl(directory))
    return fallback


def claim_status_env(objects: list[JSON]) -> str | None:
    (container,) = one(objects, "DaemonSet")["spec"]["template"]["spec"]["containers"]
    entry = env_of(container).get("CLAIM_STATUS")
    return None if entry is None else entry["value"]


def test_claim_status_component_can_be_added_to_any_overlay(tmp_path):
    (tmp_path / "kustomization.yaml").write_text(yaml.safe_dump({
        "resources": [relative(DEPLOY / "overlays" / "sysfs", tmp_path)],
        "components": [relative(DEPLOY / CLAIM_STATUS_COMPONENT, tmp_path)],
    }))

    objects = both_renderings(tmp_path)

    assert claim_status_env(objects) == "true"
    assert one(objects, "ClusterRole", CLAIM_STATUS_ROLE)
    assert one(objects, "ClusterRoleBinding", CLAIM_STATUS_ROLE)


def test_own_patches_apply_after_components(tmp_path):
    """An overlay's own patch overrides what a component set, as in Kustomize."""
    (tmp_path / "off.yaml").write_text(yaml.safe_dump({
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": "simdra-kubelet-plugin", "namespace": "simdra"},
        "spec": {"template": {"spec": {"containers": [
            {"name": "plugin", "env": [{"name": "CLAIM_STATUS", "value": "false"}]}]}}},
    }))
    (tmp_path / "kustomization.yaml").write_text(yaml.safe_dump({
        "resources": [relative(DEPLOY / "overlays" / "fake", tmp_path)],
        "components": [relative(DEPLOY / CLAIM_STATUS_COMPONENT, tmp_path)],
        "patches": [{"path": "off.yaml"}],
    }))

    assert claim_status_env(both_renderings(tmp_path)) == "false"


@pytest.mark.parametrize(
    ("field", "entry", "message"),
    [
        ("resources", CLAIM_STATUS_COMPONENT, "expected kind 'Kustomization'"),
        ("components", "base", "expected kind 'Component'"),
    ],
)
def test_components_and_kustomizations_are_not_interchangeable(tmp_path, field, entry,
                                                               message):
    spec = {"resources": [relative(DEPLOY / "base", tmp_path)]}
    spec[field] = [relative(DEPLOY / entry, tmp_path)]  # replaces resources for "resources"
    (tmp_path / "kustomization.yaml").write_text(yaml.safe_dump(spec))

    with pytest.raises(KustomizeError, match=message):
        load_kustomization(tmp_path)
    if kubectl_available():
        with pytest.raises(KustomizeError, match="Component"):
            render_with_kubectl(tmp_path)


def test_strategic_merge_merges_keyed_lists_and_replaces_the_rest():
    base = {
        "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
        "volumeMounts": [{"name": "x", "mountPath": "/x"}],
        "args": ["--one"],
        "securityContext": {"privileged": False, "capabilities": {"drop": ["ALL"]}},
    }
    patch = {
        "env": [{"name": "C", "value": "3"}, {"name": "B", "value": "20"}],
        "volumeMounts": [{"name": "y", "mountPath": "/y", "readOnly": True}],
        "args": ["--two"],
        "securityContext": {"privileged": True, "capabilities": None},
    }

    merged = strategic_merge(base, patch)

    assert merged["env"] == [
        {"name": "C", "value": "3"}, {"name": "B", "value": "20"}, {"name": "A", "value": "1"}
    ]
    assert [m["mountPath"] for m in merged["volumeMounts"]] == ["/y", "/x"]
    assert merged["args"] == ["--two"]
    assert merged["securityContext"] == {"privileged": True}
    assert base["env"][1]["value"] == "2", "the base must not change"


@pytest.mark.parametrize(
    ("image", "rule", "expected"),
    [
        ("simdra:latest", {"name": "simdra", "newTag": "v1"}, "simdra:v1"),
        ("simdra", {"name": "simdra", "newName": "r.example.com/simdra"}, "r.example.com/simdra"),
        ("localhost:5000/simdra:1", {"name": "localhost:5000/simdra", "newTag": "2"},
         "localhost:5000/simdra:2"),
        ("busybox:1.36", {"name": "simdra", "newTag": "v1"}, "busybox:1.36"),
    ],
)
def test_rewrite_image_follows_kustomize_images_rules(image, rule, expected):
    assert rewrite_image(image, rule) == expected


def test_fallback_refuses_kustomize_features_it_does_not_implement(tmp_path):
    (tmp_path / "kustomization.yaml").write_text(
        f"resources: [{relative(DEPLOY / 'base', tmp_path)}]\nnamePrefix: team-\n"
    )

    with pytest.raises(KustomizeError, match="namePrefix"):
        load_kustomization(tmp_path)


def test_fallback_fails_on_a_patch_that_matches_no_object(tmp_path):
    (tmp_path / "patch.yaml").write_text(
        "apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: typo, namespace: simdra}\n"
    )
    (tmp_path / "kustomization.yaml").write_text(
        f"resources: [{relative(DEPLOY / 'base', tmp_path)}]\npatches: [{{path: patch.yaml}}]\n"
    )

    with pytest.raises(KustomizeError, match="no object"):
        load_kustomization(tmp_path)
