"""Schema checks: the Kubernetes API schemas (kubernetes-validate, strict) and our own
schema for OpenShift's ClusterResourceQuota, which those schemas do not cover."""

from __future__ import annotations

import jsonschema
import kubernetes_validate

from tests.deploy.layout import JSON, K8S_VERSIONS


def schema_errors(objects: list[JSON], version: str) -> list[str]:
    """One line per object the strict schema of `version` rejects."""
    errors = []
    for obj in objects:
        try:
            kubernetes_validate.validate(obj, version, strict=True)
        except kubernetes_validate.ValidationError as err:
            where = "/".join(str(p) for p in err.path)
            errors.append(f"{obj['kind']} {obj['metadata']['name']}: {where}: {err.message}")
    return errors


# OpenShift's ClusterResourceQuota is not in the Kubernetes schemas: its shape (from the
# quota.openshift.io/v1 API reference) is checked here, and its `quota` part, which is a
# core ResourceQuotaSpec, against the Kubernetes schema.
DNS_SUBDOMAIN = "^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"
CLUSTER_RESOURCE_QUOTA_SCHEMA = {
    "type": "object",
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "additionalProperties": False,
    "properties": {
        "apiVersion": {"const": "quota.openshift.io/v1"},
        "kind": {"const": "ClusterResourceQuota"},
        "metadata": {
            "type": "object",
            "required": ["name"],
            "properties": {"name": {"type": "string", "pattern": DNS_SUBDOMAIN}},
            "not": {"required": ["namespace"]},  # cluster-scoped
        },
        "spec": {
            "type": "object",
            "required": ["quota", "selector"],
            "additionalProperties": False,
            "properties": {
                "quota": {"type": "object"},
                "selector": {
                    "type": "object",
                    "minProperties": 1,
                    "additionalProperties": False,
                    "properties": {
                        "labels": {
                            "type": "object",
                            "additionalProperties": False,
                            "properties": {
                                "matchLabels": {
                                    "type": "object",
                                    "additionalProperties": {"type": "string"},
                                },
                                "matchExpressions": {"type": "array"},
                            },
                        },
                        "annotations": {
                            "type": "object",
                            "additionalProperties": {"type": "string"},
                        },
                    },
                },
            },
        },
    },
}


def cluster_resource_quota_errors(obj: JSON) -> list[str]:
    """Problems with a ClusterResourceQuota: our schema, then the embedded quota spec."""
    validator = jsonschema.Draft202012Validator(CLUSTER_RESOURCE_QUOTA_SCHEMA)
    errors = [f"{'/'.join(map(str, e.path))}: {e.message}" for e in validator.iter_errors(obj)]
    if errors:
        return errors
    as_resource_quota = {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": obj["metadata"]["name"], "namespace": "any"},
        "spec": obj["spec"]["quota"],
    }
    return [e for v in K8S_VERSIONS for e in schema_errors([as_resource_quota], v)]
