"""Device metadata files on disk: written before the CDI spec that mounts them is put in
place, restored with it, removed after it (`simdra._driver.claims.device_metadata` says what
they hold and where).

A file is rewritten only when its content changed, and then with the next generation,
so a container reading it twice can tell an update from a re-read. Files are written
atomically (a reader never sees half a file) but their directories are not fsynced: a
file lost in a crash is written again from the record before the spec is restored.

The files live in the store's own directory (`<data dir>/dra-device-metadata`, the root
given here, never one a record names), and nothing here follows a link: each level is a
real directory or refused, a tree is removed entry by entry without entering a link
(`simdra._driver.core.nofollow.remove_tree`), and only names the plugin writes (claim UIDs) are
listed or removed.
"""

from __future__ import annotations

import os
from pathlib import Path

from simdra._driver.atomicfile import safe_child, write_atomic
from simdra._driver.claims.device_metadata import (
    RequestMetadata,
    encode_stream,
    host_dir,
    host_path,
    stream_generation,
    without_generation,
)
from simdra._driver.claims.plan import PreparedClaim
from simdra._driver.core.nofollow import open_directory, read_regular, real_directory, remove_tree
from simdra._driver.core.validation.names import uuid_errors

METADATA_FILE_MODE = 0o644  # containers of any user read it, through a read-only mount
METADATA_DIR_MODE = 0o755
# A stream is a few KiB; more than this was not written by the plugin.
MAX_METADATA_BYTES = 4 << 20


def write_metadata(claim: PreparedClaim, driver_name: str, root: str | Path) -> None:
    """Write every request's metadata file of `claim` that is missing or differs, under
    `root` (the store's own directory, whatever the claim's record says); OSError (one
    line) when a level of the tree is a symlink or not a directory."""
    for request in claim.metadata(driver_name):
        directory = host_dir(str(root), claim.claim.uid, request.request)
        for level in (Path(root), Path(directory).parent, Path(directory)):
            real_directory(level, METADATA_DIR_MODE)
        path = Path(host_path(str(root), claim.claim.uid, request.request, driver_name,
                              dir_mount=claim.metadata_dir_mount))
        _write_request(path, claim, request)


def remove_metadata(root: str | Path, claim_uid: str) -> list[str]:
    """Remove the claim's metadata directory, never through a link; the symlinks found
    and unlinked there (empty: none). Nothing to do when `root` does not exist;
    NotADirectoryError when it is a link."""
    safe_child(root, claim_uid)  # a checked name
    try:
        return remove_tree(root, claim_uid)
    except FileNotFoundError:
        return []


def metadata_claims(root: str | Path) -> list[str]:
    """The claim UIDs with an entry under `root`, links included (they are removed, never
    followed); other names are not the plugin's and are left alone. Empty when `root`
    does not exist; NotADirectoryError (one line) when it is a symlink or a file."""
    try:
        fd = open_directory(root)
    except FileNotFoundError:
        return []
    try:
        names = os.listdir(fd)
    finally:
        os.close(fd)
    return sorted(name for name in names if not uuid_errors(name, "uid"))


def _write_request(path: Path, claim: PreparedClaim, request: RequestMetadata) -> None:
    ref = claim.claim
    identity = (ref.namespace, ref.name, ref.uid)
    try:
        old: bytes | None = read_regular(path, MAX_METADATA_BYTES)
    except OSError:
        old = None  # a link or no file: replaced by the rename, never followed
    generation = 1
    if old is not None:
        current = stream_generation(old)
        wanted = encode_stream(identity, claim.pod_claim_name, request, current or 1)
        if current and without_generation(old) == without_generation(wanted):
            return  # says what it should: a rewrite would bump the generation for nothing
        generation = current + 1
    data = encode_stream(identity, claim.pod_claim_name, request, generation)
    write_atomic(path, data, METADATA_FILE_MODE, sync_dir=False)
