"""Where the plugin's two unix sockets live and what they are called.

Pure functions: no file system access. The names follow the Go helper
(k8s.io/dynamic-resource-allocation/kubeletplugin) so that an operator coming from a Go
driver finds the sockets where they expect them:

- DRA service socket: `<data dir>/dra.sock`; with rolling updates `dra-<pod UID>.sock`,
  or `dra-<hash of the pod UID>` (no suffix, as helper v0.38) where that path is too long.
- Registration socket: `<registry dir>/<driver>-reg.sock`; with rolling updates the first
  of three names, from most to least readable, whose full path fits the AF_UNIX limit.

"Fits" is the helper v0.38 rule: shorter than 108 bytes, leaving room for the NUL (v0.37
allowed 108 for registration; `max_path_bytes=UNIX_PATH_MAX` still gives its choice).
"""

from __future__ import annotations

import base64
import hashlib
import posixpath
import re

KUBELET_PLUGINS_DIR = "/var/lib/kubelet/plugins"
KUBELET_REGISTRY_DIR = "/var/lib/kubelet/plugins_registry"

# sizeof(sockaddr_un.sun_path) on Linux; the Go helper's limit for the full socket path.
UNIX_PATH_MAX = 108
# gRPC's C core needs room for the terminating NUL, so it cannot bind a 108-byte path.
GRPC_UNIX_PATH_MAX = UNIX_PATH_MAX - 1


def clean_join(directory: str, name: str) -> str:
    """Join and normalise like Go's path.Join, so byte counts match the Go helper's."""
    joined = posixpath.normpath(posixpath.join(directory, name))
    # POSIX normpath keeps a leading "//"; Go's Clean does not.
    if joined.startswith("//"):
        joined = "/" + joined.lstrip("/")
    return joined


def path_bytes(path: str) -> int:
    """Length of a socket path as the kernel counts it (UTF-8 bytes, no terminator)."""
    return len(path.encode())


def plugin_data_dir(driver_name: str, plugins_dir: str = KUBELET_PLUGINS_DIR) -> str:
    """Default per-driver data directory that holds the DRA socket."""
    return clean_join(plugins_dir, driver_name)


def dra_socket_path(
    data_dir: str, pod_uid: str = "", max_path_bytes: int = GRPC_UNIX_PATH_MAX
) -> str:
    """Path of the DRA service socket; the pod UID makes it unique per instance.

    A pod UID whose name does not fit is hashed, and the suffix dropped so that even the
    longest driver name fits under the default plugins directory (helper v0.38
    `rollingUpdatePluginSocketFile`)."""
    if not pod_uid:
        return clean_join(data_dir, "dra.sock")
    path = clean_join(data_dir, f"dra-{pod_uid}.sock")
    if path_bytes(path) <= max_path_bytes:
        return path
    return clean_join(data_dir, "dra-" + _b64url_sha256(pod_uid, 8))


def _b64url_sha256(data: str, nbytes: int) -> str:
    """Unpadded URL-safe base64 of the first nbytes of SHA-256(data)."""
    digest = hashlib.sha256(data.encode()).digest()[:nbytes]
    return base64.urlsafe_b64encode(digest).decode().rstrip("=")


def rolling_update_registration_names(driver_name: str, pod_uid: str) -> list[str]:
    """The candidate registration socket names for one instance, most readable first."""
    return [
        f"{driver_name}-{pod_uid}-reg.sock",
        f"{driver_name}-{_b64url_sha256(pod_uid, 8)}-reg.sock",
        f"dra-{_b64url_sha256(driver_name + chr(0) + pod_uid, 16)}-reg.sock",
    ]


def registration_socket_name(
    registry_dir: str,
    driver_name: str,
    pod_uid: str = "",
    max_path_bytes: int = GRPC_UNIX_PATH_MAX,
) -> str:
    """File name of the registration socket inside registry_dir.

    Without a pod UID: `<driver>-reg.sock`. With one (rolling update), the first
    candidate of `rolling_update_registration_names` whose full path is at most
    max_path_bytes long; if none fits, the shortest one (binding it will then fail with a
    clear error). The default limit is what gRPC can bind (107); pass UNIX_PATH_MAX (108)
    to get exactly the Go helper's choice, which may be a 108-byte path.
    """
    if not pod_uid:
        return f"{driver_name}-reg.sock"
    candidates = rolling_update_registration_names(driver_name, pod_uid)
    for name in candidates:
        if path_bytes(clean_join(registry_dir, name)) <= max_path_bytes:
            return name
    return candidates[-1]


def registration_socket_path(
    registry_dir: str,
    driver_name: str,
    pod_uid: str = "",
    max_path_bytes: int = GRPC_UNIX_PATH_MAX,
) -> str:
    """Full path of the registration socket (see `registration_socket_name`)."""
    name = registration_socket_name(registry_dir, driver_name, pod_uid, max_path_bytes)
    return clean_join(registry_dir, name)


# What a pod UID looks like in the names above (the DaemonSet passes metadata.uid).
_POD_UID = r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
_B64URL_8_BYTES = r"[A-Za-z0-9_-]{11}"  # unpadded base64url of 8 bytes


def is_instance_dra_socket(name: str) -> bool:
    """True for the name of a DRA socket any instance of a driver uses in its data dir
    (`dra.sock`, `dra-<pod UID>.sock`, `dra-<hash of the pod UID>`)."""
    pattern = rf"dra(-{_POD_UID})?\.sock|dra-{_B64URL_8_BYTES}"
    return re.fullmatch(pattern, name) is not None


def is_instance_registration_socket(driver_name: str, name: str) -> bool:
    """True for a registration socket name that says it is `driver_name`'s: without a pod
    UID, with one, or with its hash (the first two of
    `rolling_update_registration_names`). The third, `dra-<hash>-reg.sock`, hashes the
    driver name too, so nothing tells whose it is: never matched."""
    driver = re.escape(driver_name)
    pattern = rf"{driver}(-{_POD_UID}|-{_B64URL_8_BYTES})?-reg\.sock"
    return re.fullmatch(pattern, name) is not None
