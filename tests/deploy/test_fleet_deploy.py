"""The fleet's deployment (deploy/fleet, and the chart's `fleet:` values): the chart
renders what the kustomization does, only when asked; the role grants exactly the calls
`simdra fleet` makes; its admission policies hold its ServiceAccount to the Nodes of its
prefix and its driver's slices; the container's flags are ones `simdra fleet` accepts."""

from __future__ import annotations

import pytest

from simdra._driver.cli.fleet import add_parser
from simdra._driver.cli.parser import OneLineParser
from simdra._driver.fleet.options import config_from_args
from tests.deploy.helm import template
from tests.deploy.layout import JSON, of_kind, one
from tests.deploy.test_helm_chart import differences
from tests.deploy.test_rbac_and_policy import Permission

FLEET_NAMESPACE = "simdra-fleet"
# The fleet's calls: its Nodes (list after a restart, create, status where dropped,
# delete by --prune and churn), its nodes' slices, and the claims on them, whose
# status.devices it applies (patch) as a central writer (arbitrary-node, 1.36+).
FLEET_PERMISSIONS: set[Permission] = {
    *(("", "nodes", verb, "") for verb in ("get", "list", "watch", "create", "patch",
                                           "delete")),
    ("", "nodes/status", "patch", ""),
    *(("resource.k8s.io", "resourceslices", verb, "")
      for verb in ("get", "list", "watch", "create", "update", "delete")),
    *(("resource.k8s.io", "resourceclaims", verb, "") for verb in ("get", "list", "watch")),
    ("resource.k8s.io", "resourceclaims/status", "patch", ""),
    ("resource.k8s.io", "resourceclaims/driver", "arbitrary-node:patch", "dra.example.com"),
}


def permissions(role: JSON) -> set[Permission]:
    return {(group, resource, verb, name)
            for rule in role["rules"] for group in rule["apiGroups"]
            for resource in rule["resources"] for verb in rule["verbs"]
            for name in rule.get("resourceNames") or [""]}


def test_the_fleet_role_grants_exactly_what_the_fleet_does(rendered: dict[str, list[JSON]]
                                                          ) -> None:
    role = one(rendered["fleet"], "ClusterRole", "simdra-fleet")
    assert permissions(role) == FLEET_PERMISSIONS
    binding = one(rendered["fleet"], "ClusterRoleBinding", "simdra-fleet")
    (subject,) = binding["subjects"]
    deployment = one(rendered["fleet"], "Deployment", "simdra-fleet")
    pod = deployment["spec"]["template"]["spec"]
    assert (subject["name"], subject["namespace"]) == (pod["serviceAccountName"],
                                                       FLEET_NAMESPACE)


def test_the_chart_renders_the_fleet_only_when_enabled_and_as_deploy_fleet_does(
        rendered: dict[str, list[JSON]]) -> None:
    assert not [o for o in rendered["helm/default"] if "fleet" in o["metadata"]["name"]]
    chart = [o for o in template(settings=["fleet.enabled=true"], namespace=FLEET_NAMESPACE)
             if o["metadata"]["name"].startswith("simdra-fleet")]
    assert differences(chart, rendered["fleet"]) == []


def test_the_fleet_container_flags_are_accepted_by_simdra_fleet(
        rendered: dict[str, list[JSON]]) -> None:
    (container,) = one(rendered["fleet"], "Deployment")["spec"]["template"]["spec"][
        "containers"]
    assert container["command"] == ["simdra", "fleet"]
    parser = OneLineParser(prog="simdra")
    add_parser(parser.add_subparsers(dest="command", parser_class=OneLineParser))
    args = parser.parse_args(["fleet", *container["args"]])
    config = config_from_args(args, args.driver_name)
    assert config.nodes == 100 and str(config.shard) == "0/1"
    assert [p["containerPort"] for p in container["ports"]] == [config.metrics_port]


def test_churn_and_latency_reach_the_chart_rendering() -> None:
    objects = template(settings=["fleet.enabled=true", "fleet.churn=health=6",
                                 "fleet.prepareLatency=0.5"])
    (deployment,) = of_kind(objects, "Deployment")
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--churn=health=6" in args and "--prepare-latency=0.5" in args


def fleet_args(objects: list[JSON]) -> dict[str, str]:
    """The fleet container's `--flag=value` arguments."""
    (container,) = one(objects, "Deployment")["spec"]["template"]["spec"]["containers"]
    return dict(arg.removeprefix("--").split("=", 1) for arg in container["args"])


def variable(policy: JSON, name: str) -> str:
    (expression,) = [v["expression"] for v in policy["spec"]["variables"]
                     if v["name"] == name]
    return str(expression)


def check_fleet_policies(objects: list[JSON], namespace: str) -> None:
    """Both policies apply to the fleet's ServiceAccount, follow its flags, and deny."""
    args = fleet_args(objects)
    pod = one(objects, "Deployment")["spec"]["template"]["spec"]
    user = f'"system:serviceaccount:{namespace}:{pod["serviceAccountName"]}"'
    nodes = one(objects, "ValidatingAdmissionPolicy", f"{pod['serviceAccountName']}-own-nodes")
    slices = one(objects, "ValidatingAdmissionPolicy",
                 f"{pod['serviceAccountName']}-own-slices")
    for policy, resources in ((nodes, ["nodes", "nodes/status"]),
                              (slices, ["resourceslices"])):
        (rule,) = policy["spec"]["matchConstraints"]["resourceRules"]
        assert rule["resources"] == resources
        assert set(rule["operations"]) == {"CREATE", "UPDATE", "DELETE"}
        (condition,) = policy["spec"]["matchConditions"]
        assert user in condition["expression"]
        assert policy["spec"]["failurePolicy"] == "Fail"
        assert variable(policy, "prefix") == f'"{args["node-prefix"]}"'
        binding = one(objects, "ValidatingAdmissionPolicyBinding", policy["metadata"]["name"])
        assert binding["spec"] == {"policyName": policy["metadata"]["name"],
                                   "validationActions": ["Deny"]}
    assert variable(slices, "driver") == f'"{args["driver-name"]}"'


def test_the_fleet_policies_follow_its_service_account_prefix_and_driver(
        rendered: dict[str, list[JSON]]) -> None:
    check_fleet_policies(rendered["fleet"], FLEET_NAMESPACE)


def test_the_node_policy_checks_the_label_on_create_before_and_after_a_patch(
        rendered: dict[str, list[JSON]]) -> None:
    policy = one(rendered["fleet"], "ValidatingAdmissionPolicy", "simdra-fleet-own-nodes")
    label = '.metadata.?labels[?"simdra.dev/fleet"].orValue("")'
    assert f"object{label}" in variable(policy, "newLabel")
    assert f"oldObject{label}" in variable(policy, "oldLabel")
    checks = [v["expression"] for v in policy["spec"]["validations"]]
    assert checks == [
        'request.operation != "CREATE" || variables.newLabel == variables.prefix',
        'request.operation == "CREATE" || variables.oldLabel == variables.prefix',
        'request.operation != "UPDATE" || variables.newLabel == variables.prefix']


@pytest.mark.parametrize("settings", [
    ["fleet.enabled=true"],
    ["fleet.enabled=true", "fleet.nodePrefix=scale", "driverName=crypto.example.com",
     "name=crypto"],
])
def test_the_chart_renders_the_fleet_policies_for_its_values(settings: list[str]) -> None:
    check_fleet_policies(template(settings=settings, namespace="dra-system"), "dra-system")


def test_no_fleet_policies_without_admission_policies() -> None:
    objects = template(settings=["fleet.enabled=true", "admissionPolicy.enabled=false"])
    assert of_kind(objects, "ValidatingAdmissionPolicy") == []
