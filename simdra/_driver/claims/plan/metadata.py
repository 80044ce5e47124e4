"""Device metadata (KEP-5304) as the Go helper writes it (pure): per prepared claim and
request, a JSON stream describing the request's devices, bind-mounted read-only into the
container through the claim's CDI spec.

What a container sees is upstream's consumer API
(k8s.io/dynamic-resource-allocation/api/metadata, v0.37):

    /var/run/kubernetes.io/dra-device-attributes/
        resourceclaims/<claim>/<request>/<driver>-metadata.json
        resourceclaimtemplates/<pod claim>/<request>/<driver>-metadata.json

(the second for a claim made from a template: `<pod claim>` is the pod's
`spec.resourceClaims[].name`, from the claim's `resource.kubernetes.io/pod-claim-name`
annotation). The file is the same DeviceMetadata once per API version, newest first
(`metadata.resource.k8s.io` v1beta1, then v1alpha1 for v0.36 readers); upstream's
`devicemetadata.DecodeMetadataFromStream` takes the first it knows. Its
`metadata.generation` starts at 1 and grows with every rewrite.

On the host the files live under `<data dir>/dra-device-metadata/<claim UID>/<request>/`
(the helper keys them by namespace and name; the UID keeps a re-created claim of the same
name apart from the one still being unprepared, and every part is a checked name).

The spec mounts the request's directory, not the file (the Go helper, v0.37, mounts the
file): a rewrite renames a new file into place, and a bind-mounted file would leave a
running container on the old inode, where a mounted directory shows the new one. So the
host file has the container's name, `<driver>-metadata.json`, and the container's path
is unchanged. Claims prepared before (records without `"mount": "directory"`) keep their
file mount and the host file `metadata.json` until unprepared.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from simdra._driver.atomicfile import check_safe_name

CONTAINER_DIR = PurePosixPath("/var/run/kubernetes.io/dra-device-attributes")
CLAIMS_DIR = "resourceclaims"
TEMPLATES_DIR = "resourceclaimtemplates"
FILE_SUFFIX = "-metadata.json"
HOST_SUBDIR = "dra-device-metadata"
HOST_FILE = "metadata.json"  # a file-mount claim's (prepared before directory mounts)
GROUP = "metadata.resource.k8s.io"
VERSIONS = ("v1beta1", "v1alpha1")  # newest first, as the helper writes them
POD_CLAIM_ANNOTATION = "resource.kubernetes.io/pod-claim-name"


@dataclass(frozen=True)
class MetadataDevice:
    """One allocated device as the metadata lists it."""

    driver: str
    pool: str
    name: str
    attributes: dict[str, Any]


@dataclass(frozen=True)
class RequestMetadata:
    """The metadata file of one request of a claim: where it is and what it says."""

    request: str  # the base request name: the path part
    request_ref: str  # as allocated (`req` or `req/sub`): what the file names
    devices: tuple[MetadataDevice, ...]


def base_request(request_ref: str) -> str:
    """`req/sub` -> `req` (the path and the CDI device use the base name)."""
    return request_ref.split("/", 1)[0]


def container_dir(claim_name: str, pod_claim_name: str | None, request: str) -> str:
    """The request's directory in the container (upstream's layout); ValueError when a
    part is not one safe path component (the names are checked before)."""
    parent, name = (TEMPLATES_DIR, pod_claim_name) if pod_claim_name else (CLAIMS_DIR, claim_name)
    return str(CONTAINER_DIR.joinpath(parent, *(check_safe_name(p) for p in (name, request))))


def file_name(driver: str) -> str:
    """The file's name in the container, and on the host for directory mounts."""
    return check_safe_name(f"{driver}{FILE_SUFFIX}")


def container_path(driver: str, claim_name: str, pod_claim_name: str | None,
                   request: str) -> str:
    """Where the container finds the file of `request` (upstream's layout)."""
    return f"{container_dir(claim_name, pod_claim_name, request)}/{file_name(driver)}"


def host_dir(root: str, claim_uid: str, request: str) -> str:
    """The request's directory on the host (`root`: the data dir's HOST_SUBDIR); the
    parts are a checked UID and a checked request name."""
    return str(PurePosixPath(root).joinpath(check_safe_name(claim_uid), check_safe_name(request)))


def host_path(root: str, claim_uid: str, request: str, driver: str, *, dir_mount: bool) -> str:
    """Where the plugin writes the file of `request`: named as in the container when
    the spec mounts the directory, HOST_FILE for a claim that mounts the file."""
    name = file_name(driver) if dir_mount else HOST_FILE
    return f"{host_dir(root, claim_uid, request)}/{name}"


def cdi_device_name(claim_uid: str, request: str) -> str:
    """The CDI device that mounts the file: `_` never occurs in a unit's device name."""
    return f"{claim_uid}_metadata_{request}"


def mount_edits(host: str, container: str) -> dict[str, Any]:
    """CDI container edits bind-mounting `host` read-only at `container`."""
    return {"mounts": [{"hostPath": host, "containerPath": container,
                        "options": ["ro", "bind"]}]}


def metadata_mounts(
    requests: Iterable[RequestMetadata], root: str | None, driver: str, claim_name: str,
    pod_claim_name: str | None, claim_uid: str, *, dir_mount: bool = True,
) -> dict[str, tuple[str, dict[str, Any]]]:
    """Base request -> (CDI device name, edits) of the device that mounts its directory
    (`dir_mount=False`: its file, as claims prepared before did), one per request as the
    Go helper adds them; empty when the feature is off (no `root`)."""
    if root is None:
        return {}
    if dir_mount:
        where = [(r.request, host_dir(root, claim_uid, r.request),
                  container_dir(claim_name, pod_claim_name, r.request)) for r in requests]
    else:
        where = [(r.request, host_path(root, claim_uid, r.request, driver, dir_mount=False),
                  container_path(driver, claim_name, pod_claim_name, r.request))
                 for r in requests]
    return {request: (cdi_device_name(claim_uid, request), mount_edits(host, container))
            for request, host, container in where}


def encode_stream(claim: tuple[str, str, str], pod_claim_name: str | None,
                  metadata: RequestMetadata, generation: int) -> bytes:
    """The file's bytes: the DeviceMetadata once per version in VERSIONS, one JSON object
    per line. `claim` is (namespace, name, uid)."""
    namespace, name, uid = claim
    body: dict[str, Any] = {
        "kind": "DeviceMetadata",
        "metadata": {"name": name, "namespace": namespace, "uid": uid,
                     "generation": generation},
    }
    if pod_claim_name:
        body["podClaimName"] = pod_claim_name
    body["requests"] = [{"name": metadata.request_ref,
                         "devices": [_device_json(d) for d in metadata.devices]}]
    lines = (json.dumps({"apiVersion": f"{GROUP}/{version}", **body}, sort_keys=True)
             for version in VERSIONS)
    return "".join(f"{line}\n" for line in lines).encode()


def stream_generation(data: bytes) -> int:
    """The generation of the first object of a stream this plugin wrote; 0 when it
    cannot be read (then the rewrite starts again at 1)."""
    try:
        first = json.loads(data.decode().split("\n", 1)[0])
        generation = first["metadata"]["generation"]
    except (ValueError, KeyError, TypeError, IndexError):
        return 0
    return generation if isinstance(generation, int) and generation > 0 else 0


def without_generation(data: bytes) -> bytes:
    """The stream with every generation set to 0: equal for equal content."""
    objects = []
    for line in data.decode(errors="replace").splitlines():
        try:
            value = json.loads(line)
            value["metadata"]["generation"] = 0
        except (ValueError, KeyError, TypeError):
            return data
        objects.append(json.dumps(value, sort_keys=True))
    return "\n".join(objects).encode()


def group_by_request(units: Iterable[tuple[str, str, str, dict[str, Any]]],
                     driver: str) -> tuple[RequestMetadata, ...]:
    """One RequestMetadata per base request, from (request ref, pool, device,
    attributes) of the claim's units, in the order the requests first appear."""
    refs: dict[str, str] = {}
    devices: dict[str, list[MetadataDevice]] = {}
    for request_ref, pool, device, attributes in units:
        request = base_request(request_ref)
        refs.setdefault(request, request_ref)
        devices.setdefault(request, []).append(MetadataDevice(driver, pool, device, attributes))
    return tuple(RequestMetadata(r, refs[r], tuple(devices[r])) for r in refs)


def _device_json(device: MetadataDevice) -> dict[str, Any]:
    entry: dict[str, Any] = {"driver": device.driver, "pool": device.pool, "name": device.name}
    if device.attributes:
        entry["attributes"] = device.attributes
    return entry
