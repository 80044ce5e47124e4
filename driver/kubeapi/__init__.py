"""Our own small client for the Kubernetes API: configuration (in-cluster or a
kubeconfig), one connection pool with TLS and a bearer token, JSON requests and watches.

Why not the official `kubernetes` client: importing it costs the plugin process about
47 MiB of RSS (a thousand generated model modules and pydantic), and the plugin uses
none of that: it reads and writes plain JSON. Only kubeconfig credentials we do not
implement (exec, auth-provider, username/password) load the official client, and then
only its configuration loader (`driver.kubeapi.fallback`).
"""

from driver.kubeapi.access import ClusterAccess
from driver.kubeapi.client import RestClient, Watch
from driver.kubeapi.config import ClusterConfigError, in_cluster_access, kubeconfig_access
from driver.kubeapi.errors import ApiStatusError, status_parts, status_text

__all__ = [
    "ApiStatusError",
    "ClusterAccess",
    "ClusterConfigError",
    "RestClient",
    "Watch",
    "in_cluster_access",
    "kubeconfig_access",
    "status_parts",
    "status_text",
]
