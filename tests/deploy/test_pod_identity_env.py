"""Every deployment gives the plugin its own pod's namespace and name from the downward
API: free-mode reconciliation frees a claim only on a kubelet answer that lists that
pod, so without them `RECONCILE_MODE=free` would free nothing."""

from __future__ import annotations

import pytest

from tests.deploy.layout import DEPLOYMENTS, JSON, env_of, one


def _plugin_container(objects: list[JSON]) -> JSON:
    daemonset = one(objects, "DaemonSet", "simdra-kubelet-plugin")
    (container,) = daemonset["spec"]["template"]["spec"]["containers"]
    return container


@pytest.mark.parametrize("overlay", DEPLOYMENTS)
def test_the_plugins_pod_name_and_namespace_come_from_the_downward_api(rendered, overlay):
    env = env_of(_plugin_container(rendered[overlay]))

    assert env["POD_NAMESPACE"]["valueFrom"] == {
        "fieldRef": {"fieldPath": "metadata.namespace"}}
    assert env["POD_NAME"]["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.name"}}
