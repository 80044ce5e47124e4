"""The plugin's ServiceAccount may do exactly what the plugin needs with the features its
overlay turns on (claim status writes only with the claim-status component), and the
admission policy confines its ResourceSlice writes to its own node and driver."""

from __future__ import annotations

import pytest

from tests.deploy.helm import template
from tests.deploy.layout import (
    CLAIM_STATUS_OVERLAYS,
    CLAIM_STATUS_ROLE,
    DEPLOYMENTS,
    JSON,
    K8S_VERSIONS,
    PLUGIN_ROLE,
    env_of,
    of_kind,
    one,
)

Permission = tuple[str, str, str, str]  # (apiGroup, resource, verb, resourceName or "")

# What the node plugin needs with its default settings, and nothing more.
BASE_PERMISSIONS = {
    *(("resource.k8s.io", "resourceslices", verb, "")
      for verb in ("get", "list", "watch", "create", "update", "delete")),
    ("resource.k8s.io", "resourceclaims", "get", ""),
    ("", "nodes", "get", ""),
    # Reconciliation's Event on a claim it keeps although it looks leaked.
    ("events.k8s.io", "events", "create", ""),
}
DRIVER = "dra.example.com"
# The release that checks status.devices writes against resourceclaims/driver too
# (DRAResourceClaimGranularStatusAuthorization, on by default; docs/api-facts.md 5.3).
GRANULAR_STATUS_RELEASE = (1, 36)
CLAIM_RESOURCES = {"resourceclaims/status", "resourceclaims/driver"}


def checks_driver(version: str) -> bool:
    """Whether Kubernetes `version` checks status.devices writes per driver and node."""
    return tuple(int(p) for p in version.split(".")[:2]) >= GRANULAR_STATUS_RELEASE


def status_write_needs(version: str, verb: str, driver: str = DRIVER,
                       node: str = "associated") -> set[Permission]:
    """What the API server checks for a `verb` request (update or patch) that changes
    `driver`'s entries of status.devices, by a plugin on the claim's node ("associated")
    or on another ("arbitrary"), at Kubernetes `version`: all of it must be granted."""
    needs = {("resource.k8s.io", "resourceclaims/status", verb, "")}
    if checks_driver(version):
        needs.add(("resource.k8s.io", "resourceclaims/driver", f"{node}-node:{verb}", driver))
    return needs


def allowed(granted: set[Permission], needs: set[Permission]) -> bool:
    return needs <= granted


# What claim status reporting (CLAIM_STATUS=true) adds: what its writes (merge patches,
# simdra never sends an update) need at some supported release, and nothing else.
CLAIM_STATUS_PERMISSIONS = set().union(*(status_write_needs(v, "patch") for v in K8S_VERSIONS))


def permissions(role: JSON) -> set[Permission]:
    """Every (group, resource, verb, resourceName) a ClusterRole grants."""
    granted = set()
    for rule in role["rules"]:
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                for verb in rule["verbs"]:
                    for name in rule.get("resourceNames") or [""]:
                        granted.add((group, resource, verb, name))
    return granted


def plugin_identity(objects: list[JSON]) -> tuple[str, str]:
    """(namespace, ServiceAccount name) the plugin pods run as."""
    daemonset = one(objects, "DaemonSet")
    return daemonset["metadata"]["namespace"], daemonset["spec"]["template"]["spec"][
        "serviceAccountName"]


def plugin_permissions(objects: list[JSON]) -> set[Permission]:
    """What the plugin's ServiceAccount may do: every ClusterRole bound to it, together."""
    namespace, account = plugin_identity(objects)
    subject = {"kind": "ServiceAccount", "name": account, "namespace": namespace}
    granted: set[Permission] = set()
    for binding in of_kind(objects, "ClusterRoleBinding"):
        if subject in binding["subjects"]:
            granted |= permissions(one(objects, "ClusterRole", binding["roleRef"]["name"]))
    return granted


@pytest.fixture
def base(rendered) -> list[JSON]:
    return rendered["base"]


@pytest.fixture
def with_claim_status(rendered) -> list[JSON]:
    return rendered[CLAIM_STATUS_OVERLAYS[0]]


def test_base_role_grants_exactly_what_the_plugin_uses_by_default(base):
    role = one(base, "ClusterRole", PLUGIN_ROLE)
    granted = permissions(role)

    assert granted == BASE_PERMISSIONS
    assert not {grant[1] for grant in granted} & CLAIM_RESOURCES, "no claim status writes"
    assert not any("*" in part for grant in granted for part in grant)
    assert not any("nonResourceURLs" in rule for rule in role["rules"])


def test_claim_status_role_grants_exactly_the_status_writes(with_claim_status):
    role = one(with_claim_status, "ClusterRole", CLAIM_STATUS_ROLE)

    assert permissions(role) == {
        ("resource.k8s.io", "resourceclaims/status", "patch", ""),
        ("resource.k8s.io", "resourceclaims/driver", "associated-node:patch", DRIVER),
    }
    assert permissions(role) == CLAIM_STATUS_PERMISSIONS
    assert not any("nonResourceURLs" in rule for rule in role["rules"])


@pytest.mark.parametrize("version", K8S_VERSIONS)
@pytest.mark.parametrize("overlay", CLAIM_STATUS_OVERLAYS)
def test_status_writes_are_patches_of_our_entries_on_our_node_at_every_release(
        rendered, overlay, version):
    granted = plugin_permissions(rendered[overlay])

    assert allowed(granted, status_write_needs(version, "patch"))
    # Not a whole-status update, which could also rewrite the allocation.
    assert not allowed(granted, status_write_needs(version, "update"))
    if checks_driver(version):
        # Nor, where the release can tell, another driver's entries or another node's claims.
        assert not allowed(granted, status_write_needs(version, "patch", "other.example.com"))
        assert not allowed(granted, status_write_needs(version, "patch", node="arbitrary"))


@pytest.mark.parametrize("overlay", DEPLOYMENTS)
def test_without_the_component_no_status_write_is_allowed_at_any_release(rendered, overlay):
    granted = plugin_permissions(rendered[overlay])
    expected = overlay in CLAIM_STATUS_OVERLAYS

    assert [allowed(granted, status_write_needs(v, "patch")) for v in K8S_VERSIONS] == [
        expected] * len(K8S_VERSIONS)


@pytest.mark.parametrize("overlay", DEPLOYMENTS)
def test_claim_status_permissions_come_only_with_the_component(rendered, overlay):
    extra = CLAIM_STATUS_PERMISSIONS if overlay in CLAIM_STATUS_OVERLAYS else set()

    assert plugin_permissions(rendered[overlay]) == BASE_PERMISSIONS | extra
    # The base role stays the same either way: the component adds a role of its own.
    assert permissions(one(rendered[overlay], "ClusterRole", PLUGIN_ROLE)) == BASE_PERMISSIONS


def test_driver_subresource_is_limited_to_our_driver_name(with_claim_status):
    (container,) = one(with_claim_status, "DaemonSet")["spec"]["template"]["spec"][
        "containers"]
    driver = env_of(container)["DRIVER_NAME"]["value"]

    names = {g[3] for g in plugin_permissions(with_claim_status)
             if g[1] == "resourceclaims/driver"}
    assert names == {driver}


@pytest.mark.parametrize("role", [PLUGIN_ROLE, CLAIM_STATUS_ROLE])
def test_binding_gives_the_role_to_the_plugin_service_account(with_claim_status, role):
    binding = one(with_claim_status, "ClusterRoleBinding", role)
    namespace, account = plugin_identity(with_claim_status)

    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": one(with_claim_status, "ClusterRole", role)["metadata"]["name"],
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


def policy_driver(objects: list[JSON]) -> str:
    """The driver name the plugin's admission policy holds its slice writes to."""
    policy = one(objects, "ValidatingAdmissionPolicy")["spec"]
    (expression,) = [v["expression"] for v in policy["variables"] if v["name"] == "driver"]
    assert expression.startswith('"') and expression.endswith('"'), expression
    return str(expression[1:-1])


def plugin_driver(objects: list[JSON]) -> str:
    (container,) = one(objects, "DaemonSet")["spec"]["template"]["spec"]["containers"]
    return str(env_of(container)["DRIVER_NAME"]["value"])


@pytest.mark.parametrize("overlay", DEPLOYMENTS)
def test_admission_policy_holds_the_plugin_to_the_driver_it_runs_as(rendered, overlay):
    objects = rendered[overlay]

    assert policy_driver(objects) == plugin_driver(objects) == DRIVER


def test_a_chart_release_of_another_driver_polices_that_driver():
    objects = template(settings=["driverName=crypto.example.com"])

    assert policy_driver(objects) == plugin_driver(objects) == "crypto.example.com"


def test_admission_policy_checks_the_driver_of_the_new_and_the_old_slice(base):
    policy = one(base, "ValidatingAdmissionPolicy")["spec"]
    variables = {v["name"]: " ".join(v["expression"].split()) for v in policy["variables"]}

    # CREATE has only the new object, DELETE only the old, UPDATE both: both checked.
    assert variables["objectDrivers"] == (
        '(request.operation == "DELETE" ? [] : [object.spec.driver]) + '
        '(request.operation == "CREATE" ? [] : [oldObject.spec.driver])')
    (check,) = [v for v in policy["validations"] if "objectDrivers" in v["expression"]]
    assert check["expression"] == "variables.objectDrivers.all(d, d == variables.driver)"
    assert "may only write ResourceSlices of that driver" in check["messageExpression"]
