"""Names the kubelet uses for plugin kinds and DRA gRPC services (api-facts 1.2, 1.5, 3.1)."""

from __future__ import annotations

# PluginInfo.type of a DRA driver.
DRA_PLUGIN_TYPE = "DRAPlugin"

# supported_versions strings: "<last proto package component>.<Service>".
V1_DRA_PLUGIN = "v1.DRAPlugin"
V1BETA1_DRA_PLUGIN = "v1beta1.DRAPlugin"
V1ALPHA1_RESOURCE_HEALTH = "v1alpha1.DRAResourceHealth"
V1_RESOURCE_HEALTH = "v1.DRAResourceHealth"

# What a 1.34+ kubelet can use for prepare/unprepare.
KUBELET_DRA_SERVICES = (V1_DRA_PLUGIN, V1BETA1_DRA_PLUGIN)


def advertised_name(service_full_name: str) -> str:
    """The supported_versions string for a gRPC service's full proto name.

    "k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin" -> "v1.DRAPlugin";
    "v1alpha1.DRAResourceHealth" -> "v1alpha1.DRAResourceHealth".
    """
    package, _, service = service_full_name.rpartition(".")
    return f"{package.rpartition('.')[2]}.{service}"
