"""The plugin's ServiceAccount may do exactly what the plugin needs, and the admission
policy confines its ResourceSlice writes to its own node."""

from __future__ import annotations

import pytest

from tests.deploy.layout import JSON, env_of, one

# (apiGroup, resource, verb, resourceName or "") the node plugin needs, and nothing more.
EXPECTED_PERMISSIONS = {
    *(("resource.k8s.io", "resourceslices", verb, "")
      for verb in ("get", "list", "watch", "create", "update", "delete")),
    ("resource.k8s.io", "resourceclaims", "get", ""),
    ("resource.k8s.io", "resourceclaims/status", "update", ""),
    ("resource.k8s.io", "resourceclaims/status", "patch", ""),
    ("resource.k8s.io", "resourceclaims/driver", "associated-node:update", "dra.example.com"),
    ("resource.k8s.io", "resourceclaims/driver", "associated-node:patch", "dra.example.com"),
    ("", "nodes", "get", ""),
}


def permissions(role: JSON) -> set[tuple[str, str, str, str]]:
    """Every (group, resource, verb, resourceName) a ClusterRole grants."""
    granted = set()
    for rule in role["rules"]:
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                for verb in rule["verbs"]:
                    for name in rule.get("resourceNames") or [""]:
                        granted.add((group, resource, verb, name))
    return granted


@pytest.fixture
def base(rendered) -> list[JSON]:
    return rendered["base"]


def plugin_identity(objects: list[JSON]) -> tuple[str, str]:
    """(namespace, ServiceAccount name) the plugin pods run as."""
    daemonset = one(objects, "DaemonSet")
    return daemonset["metadata"]["namespace"], daemonset["spec"]["template"]["spec"][
        "serviceAccountName"]


def test_cluster_role_grants_exactly_what_the_plugin_uses(base):
    role = one(base, "ClusterRole")
    granted = permissions(role)

    assert granted == EXPECTED_PERMISSIONS
    assert not any("*" in part for grant in granted for part in grant)
    assert not any("nonResourceURLs" in rule for rule in role["rules"])


def test_driver_subresource_is_limited_to_our_driver_name(base):
    (container,) = one(base, "DaemonSet")["spec"]["template"]["spec"]["containers"]
    driver = env_of(container)["DRIVER_NAME"]["value"]

    names = {g[3] for g in permissions(one(base, "ClusterRole")) if g[1] == "resourceclaims/driver"}
    assert names == {driver}


def test_binding_gives_the_role_to_the_plugin_service_account(base):
    binding = one(base, "ClusterRoleBinding")
    namespace, account = plugin_identity(base)

    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": one(base, "ClusterRole")["metadata"]["name"],
    }
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": account,
                                    "namespace": namespace}]


def test_admission_policy_applies_to_the_plugin_writing_slices(base):
    policy = one(base, "ValidatingAdmissionPolicy")["spec"]
    namespace, account = plugin_identity(base)

    (rule,) = policy["matchConstraints"]["resourceRules"]
    assert rule["apiGroups"] == ["resource.k8s.io"]
    assert rule["resources"] == ["resourceslices"]
    assert set(rule["operations"]) == {"CREATE", "UPDATE", "DELETE"}
    (condition,) = policy["matchConditions"]
    assert f'"system:serviceaccount:{namespace}:{account}"' in condition["expression"]
    assert policy["failurePolicy"] == "Fail"


def test_admission_policy_compares_the_token_node_with_the_slice_node(base):
    policy = one(base, "ValidatingAdmissionPolicy")["spec"]
    variables = {v["name"]: v["expression"] for v in policy["variables"]}

    assert "authentication.kubernetes.io/node-name" in variables["userNodeName"]
    assert "oldObject" in variables["objectNodeName"], "DELETE has only the old object"
    assert "spec.?nodeName" in variables["objectNodeName"]
    checks = [v["expression"] for v in policy["validations"]]
    assert "variables.userNodeName == variables.objectNodeName" in checks
    assert 'variables.userNodeName != ""' in checks


def test_admission_policy_is_bound_to_deny(base):
    binding = one(base, "ValidatingAdmissionPolicyBinding")["spec"]

    assert binding["policyName"] == one(base, "ValidatingAdmissionPolicy")["metadata"]["name"]
    assert binding["validationActions"] == ["Deny"]
