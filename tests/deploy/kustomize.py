"""Render the Kustomize trees under deploy/: with `kubectl kustomize` when kubectl is on
PATH, otherwise with a small loader that understands exactly the features deploy/ uses.

The loader follows `resources:` (files and directories, recursively), applies
`components:` (kind Component: their resources join, their patches and images act on
everything accumulated so far), applies `patches:` given as strategic-merge patch files,
and the `images:` transformer, in that order, as Kustomize does. Any other kustomization
field makes it fail loudly, so a manifest change that needs more of Kustomize shows up
here instead of silently rendering something different.
"""

from __future__ import annotations

import copy
import re
import shutil
import subprocess
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import yaml

JSON = dict[str, Any]
ObjectKey = tuple[str, str, str, str]

KUSTOMIZATION_FILE = "kustomization.yaml"
SUPPORTED_FIELDS = frozenset(
    {"apiVersion", "kind", "resources", "components", "patches", "images"}
)
KUSTOMIZATION = "Kustomization"
COMPONENT = "Component"

# Strategic-merge keys of the list fields deploy/ patches (Kubernetes `patchMergeKey`s).
# A list field not named here is replaced by the patch, as for atomic lists.
MERGE_KEYS = {
    "containers": "name",
    "initContainers": "name",
    "env": "name",
    "volumes": "name",
    "volumeMounts": "mountPath",
    "ports": "containerPort",
}
POD_CONTAINER_FIELDS = ("containers", "initContainers")


class KustomizeError(Exception):
    """The kustomization uses something the fallback loader does not support, or a
    patch targets no object; the message names the file and the field."""


def kubectl_available() -> bool:
    """True when `kubectl` (which embeds Kustomize) is on PATH."""
    return shutil.which("kubectl") is not None


def render(directory: Path) -> list[JSON]:
    """The objects `kubectl apply -k directory` would send."""
    if kubectl_available():
        return render_with_kubectl(directory)
    return load_kustomization(directory)


def render_with_kubectl(directory: Path) -> list[JSON]:
    """`kubectl kustomize directory`, parsed."""
    done = subprocess.run(
        ["kubectl", "kustomize", str(directory)],
        capture_output=True, text=True, timeout=60, check=False,
    )
    if done.returncode != 0:
        raise KustomizeError(f"kubectl kustomize {directory} failed: {done.stderr.strip()}")
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


def load_yaml_objects(path: Path) -> list[JSON]:
    """Every non-empty document of a multi-document YAML file."""
    with path.open() as stream:
        return [doc for doc in yaml.safe_load_all(stream) if doc]


def load_kustomization(directory: Path) -> list[JSON]:
    """Render `directory` without kubectl (see the module docstring for what is supported)."""
    return _build(directory, [], expected_kind=None)


def _read_kustomization(directory: Path, expected_kind: str | None) -> JSON:
    """The kustomization file's fields, checked against what the loader supports.

    `expected_kind` is Component for a `components:` entry and Kustomization for a
    `resources:` entry (Kustomize refuses a Component there); None accepts either.
    """
    file = directory / KUSTOMIZATION_FILE
    spec = yaml.safe_load(file.read_text()) or {}
    unknown = sorted(set(spec) - SUPPORTED_FIELDS)
    if unknown:
        raise KustomizeError(f"{file}: fields {unknown} are not supported by the fallback loader")
    kind = spec.get("kind", KUSTOMIZATION)
    if kind not in (KUSTOMIZATION, COMPONENT):
        raise KustomizeError(f"{file}: unknown kind {kind!r}")
    if expected_kind is not None and kind != expected_kind:
        raise KustomizeError(f"{file}: expected kind {expected_kind!r}, found {kind!r}")
    return spec


def _build(directory: Path, accumulated: list[JSON], expected_kind: str | None) -> list[JSON]:
    """The objects of one kustomization (or component) on top of `accumulated`, which a
    component's patches and images also act on (a kustomization starts from [])."""
    file = directory / KUSTOMIZATION_FILE
    spec = _read_kustomization(directory, expected_kind)
    objects = copy.deepcopy(accumulated)
    for entry in spec.get("resources") or []:
        source = _relative_entry(directory, entry, file, "resource")
        objects += (_build(source, [], KUSTOMIZATION) if source.is_dir()
                    else load_yaml_objects(source))
    for entry in spec.get("components") or []:
        component = _relative_entry(directory, entry, file, "component")
        if not component.is_dir():
            raise KustomizeError(f"{file}: component {entry} must be a directory")
        objects = _build(component, objects, COMPONENT)
    for patch in spec.get("patches") or []:
        if set(patch) != {"path"}:
            raise KustomizeError(f"{file}: only `patches: [{{path: file}}]` is supported")
        for document in load_yaml_objects(directory / patch["path"]):
            apply_patch(objects, document, f"{file}: patch {patch['path']}")
    for image in spec.get("images") or []:
        apply_image(objects, image)
    return objects


def _relative_entry(directory: Path, entry: str, file: Path, what: str) -> Path:
    if Path(entry).is_absolute():
        raise KustomizeError(f"{file}: {what} {entry}: Kustomize rejects absolute paths")
    return (directory / entry).resolve()


def object_key(obj: Mapping[str, Any]) -> ObjectKey:
    """(apiVersion, kind, namespace, name): what identifies an object in the cluster."""
    meta = obj.get("metadata") or {}
    return (obj["apiVersion"], obj["kind"], meta.get("namespace", ""), meta["name"])


def by_key(objects: Iterable[JSON]) -> dict[ObjectKey, JSON]:
    """Objects by identity; a duplicate identity is an error (kubectl would reject it)."""
    found: dict[ObjectKey, JSON] = {}
    for obj in objects:
        key = object_key(obj)
        if key in found:
            raise KustomizeError(f"duplicate object {key}")
        found[key] = obj
    return found


def apply_patch(objects: list[JSON], patch: JSON, where: str) -> None:
    """Strategic-merge `patch` into the object with the same identity, in place."""
    key = object_key(patch)
    for index, obj in enumerate(objects):
        if object_key(obj) == key:
            objects[index] = strategic_merge(obj, patch)
            return
    raise KustomizeError(f"{where}: no object {key} to patch")


def strategic_merge(base: Any, patch: Any, field: str = "") -> Any:
    """Kubernetes strategic-merge patch for maps and merge-keyed lists (pure).

    Maps merge key by key and a null deletes the key. Lists named in MERGE_KEYS merge
    item by item on their key; like Kustomize, the items the patch names come first, in
    patch order, followed by the other existing items. Other lists and scalars are
    replaced.
    """
    if isinstance(base, dict) and isinstance(patch, dict):
        merged = copy.deepcopy(base)
        for name, value in patch.items():
            if value is None:
                merged.pop(name, None)
            elif name in merged:
                merged[name] = strategic_merge(merged[name], value, name)
            else:
                merged[name] = copy.deepcopy(value)
        return merged
    merge_key = MERGE_KEYS.get(field)
    if merge_key and isinstance(base, list) and isinstance(patch, list):
        return _merge_list(base, patch, merge_key)
    return copy.deepcopy(patch)


def _merge_list(base: list[JSON], patch: list[JSON], merge_key: str) -> list[JSON]:
    existing = {item[merge_key]: item for item in base}
    mentioned = [
        strategic_merge(existing[item[merge_key]], item) if item[merge_key] in existing
        else copy.deepcopy(item)
        for item in patch
    ]
    named = {item[merge_key] for item in patch}
    return mentioned + [copy.deepcopy(item) for item in base if item[merge_key] not in named]


_IMAGE = re.compile(r"^(?P<name>[^@]+?)(?::(?P<tag>[\w][\w.-]{0,127}))?(?:@(?P<digest>.+))?$")


def apply_image(objects: list[JSON], rule: Mapping[str, str]) -> None:
    """Kustomize's `images:` transformer: rewrite every container image named `rule.name`."""
    for container in _containers(objects):
        container["image"] = rewrite_image(container["image"], rule)


def rewrite_image(image: str, rule: Mapping[str, str]) -> str:
    """One image reference after an `images:` entry (pure): newName replaces the name,
    digest wins over newTag, and an image with another name is left alone."""
    parts = _IMAGE.match(image)
    if parts is None or parts["name"] != rule["name"]:
        return image
    name = rule.get("newName", parts["name"])
    if "digest" in rule:
        return f"{name}@{rule['digest']}"
    tag = rule.get("newTag", parts["tag"])
    if tag:
        return f"{name}:{tag}"
    return f"{name}@{parts['digest']}" if parts["digest"] else name


def _containers(objects: Iterable[JSON]) -> Iterator[JSON]:
    for obj in objects:
        for pod_spec in pod_specs(obj):
            for field in POD_CONTAINER_FIELDS:
                yield from pod_spec.get(field) or []


def pod_specs(obj: Mapping[str, Any]) -> list[JSON]:
    """The pod spec(s) inside a Pod or a workload with a pod template."""
    if obj.get("kind") == "Pod":
        return [obj["spec"]]
    template = (obj.get("spec") or {}).get("template")
    return [template["spec"]] if isinstance(template, dict) else []
