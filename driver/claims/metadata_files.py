"""Device metadata files on disk: written before the CDI spec that mounts them is put in
place, restored with it, removed after it (`driver.claims.device_metadata` says what
they hold and where).

A file is rewritten only when its content changed, and then with the next generation,
so a container reading it twice can tell an update from a re-read. Files are written
atomically (a reader never sees half a file) but their directories are not fsynced: a
file lost in a crash is written again from the record before the spec is restored.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from driver.atomicfile import make_directory, safe_child, write_atomic
from driver.claims.device_metadata import (
    RequestMetadata,
    encode_stream,
    host_path,
    stream_generation,
    without_generation,
)
from driver.claims.plan import PreparedClaim

METADATA_FILE_MODE = 0o644  # containers of any user read it, through a read-only mount
METADATA_DIR_MODE = 0o755


def write_metadata(claim: PreparedClaim, driver_name: str) -> None:
    """Write every request's metadata file of `claim` that is missing or differs."""
    for request in claim.metadata(driver_name):
        assert claim.metadata_root is not None  # metadata() is empty without it
        path = Path(host_path(claim.metadata_root, claim.claim.uid, request.request))
        _write_request(path, claim, request)


def remove_metadata(root: str | Path, claim_uid: str) -> bool:
    """Remove the claim's metadata directory; whether there was one."""
    directory = safe_child(root, claim_uid)
    if not directory.exists():
        return False
    shutil.rmtree(directory)
    return True


def metadata_claims(root: str | Path) -> list[str]:
    """The claim UIDs that have a metadata directory under `root`."""
    base = Path(root)
    return sorted(p.name for p in base.iterdir() if p.is_dir()) if base.is_dir() else []


def _write_request(path: Path, claim: PreparedClaim, request: RequestMetadata) -> None:
    ref = claim.claim
    identity = (ref.namespace, ref.name, ref.uid)
    try:
        old: bytes | None = path.read_bytes()
    except FileNotFoundError:
        old = None
    generation = 1
    if old is not None:
        current = stream_generation(old)
        wanted = encode_stream(identity, claim.pod_claim_name, request, current or 1)
        if current and without_generation(old) == without_generation(wanted):
            return  # says what it should: a rewrite would bump the generation for nothing
        generation = current + 1
    make_directory(path.parent, METADATA_DIR_MODE)
    data = encode_stream(identity, claim.pod_claim_name, request, generation)
    write_atomic(path, data, METADATA_FILE_MODE, sync_dir=False)
