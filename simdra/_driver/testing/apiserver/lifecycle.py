"""What the API server does to an object's metadata and body on create, update and delete.

Pure functions over plain JSON: the handlers read the current object, call these to build
the next one, validate it, then commit it to the store.
"""

from __future__ import annotations

import random
import uuid
from datetime import UTC, datetime
from typing import Any

from simdra._driver.testing.apiserver.errors import STALE, APIError, bad_request, conflict, internal
from simdra._driver.testing.apiserver.resources import ResourceType
from simdra._driver.testing.apiserver.schema import schema_errors
from simdra._driver.testing.apiserver.validation import (
    claim_spec_errors,
    class_spec_errors,
    object_name_errors,
    slice_errors,
)
from simdra._driver.testing.apiserver.validation.field import FieldError, invalid

JSON = dict[str, Any]

# The API server's alphabet for generateName suffixes (no vowels, no look-alikes).
_SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
# Metadata the server owns: a client's values are ignored on create.
_SYSTEM_FIELDS = (
    "uid",
    "resourceVersion",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "generation",
    "selfLink",
)


def now() -> str:
    """The current time as the API server writes it (RFC 3339, seconds, UTC)."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def generate_name(prefix: str) -> str:
    """`prefix` plus the random 5-character suffix the API server appends."""
    return prefix + "".join(random.choices(_SUFFIX_ALPHABET, k=5))


def normalize(resource: ResourceType, body: Any, namespace: str | None) -> JSON:
    """Check kind/apiVersion/namespace of a request body and fill what the URL implies."""
    if not isinstance(body, dict):
        raise bad_request(
            f"the body of the request must be a JSON object, not {type(body).__name__}"
        )
    kind, api_version = body.get("kind"), body.get("apiVersion")
    if kind not in (None, "", resource.kind) or api_version not in (None, "", resource.api_version):
        raise bad_request(
            f"the API version in the data ({api_version}) and kind ({kind}) do "
            f"not match the expected {resource.api_version} {resource.kind}"
        )
    meta = body.get("metadata")
    if meta is not None and not isinstance(meta, dict):
        raise bad_request("metadata must be a JSON object")
    meta = dict(meta or {})
    if resource.namespaced:
        if meta.get("namespace") not in (None, "", namespace):
            raise bad_request(
                "the namespace of the provided object does not match the "
                "namespace sent on the request"
            )
        meta["namespace"] = namespace
    else:
        meta.pop("namespace", None)
    return {**body, "kind": resource.kind, "apiVersion": resource.api_version, "metadata": meta}


def prepare_create(resource: ResourceType, obj: JSON) -> JSON:
    """The object to store for a create: server-owned metadata set, status reset if due."""
    meta = obj["metadata"]
    if meta.get("resourceVersion"):
        # What the storage layer answers (as an internal error) in a real cluster.
        raise internal("resourceVersion should not be set on objects to be created")
    meta = {k: v for k, v in meta.items() if k not in _SYSTEM_FIELDS}
    if not meta.get("name") and meta.get("generateName"):
        meta["name"] = generate_name(meta["generateName"])
    meta.update(uid=str(uuid.uuid4()), creationTimestamp=now(), generation=1)
    created = {**obj, "metadata": meta}
    if resource.clears_status_on_create:
        created.pop("status", None)
    return created


def _content(obj: JSON) -> JSON:
    """The part of an object whose change bumps metadata.generation."""
    return {k: v for k, v in obj.items() if k not in ("metadata", "status", "kind", "apiVersion")}


def check_update_preconditions(resource: ResourceType, body: JSON, current: JSON) -> None:
    """409 when the body's resourceVersion or uid does not match the stored object."""
    meta, stored = body["metadata"], current["metadata"]
    name = stored["name"]
    if meta.get("uid") and meta["uid"] != stored["uid"]:
        raise conflict(
            resource.qualified,
            resource.group,
            resource.plural,
            name,
            f"Precondition failed: UID in precondition: {meta['uid']}, "
            f"UID in object meta: {stored['uid']}",
        )
    if meta.get("resourceVersion") and meta["resourceVersion"] != stored["resourceVersion"]:
        raise conflict(resource.qualified, resource.group, resource.plural, name, STALE)


def prepare_update(
    resource: ResourceType, body: JSON, current: JSON, subresource: str | None
) -> JSON:
    """The object to store for an update of the object (or of its status)."""
    stored_meta = current["metadata"]
    if subresource == "status":
        updated = {**current}
        managed = body["metadata"].get("managedFields")  # a server-side apply's
        if managed is not None:
            updated["metadata"] = {**stored_meta, "managedFields": managed}
        if "status" in body:
            updated["status"] = body["status"]
        else:
            updated.pop("status", None)
        return updated
    meta = {**body["metadata"]}
    for key in (
        "uid",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "generation",
        "resourceVersion",
        "name",
    ):
        if key in stored_meta:
            meta[key] = stored_meta[key]
        else:
            meta.pop(key, None)
    if resource.namespaced:
        meta["namespace"] = stored_meta.get("namespace")
    updated = {**body, "metadata": meta}
    if resource.has_status:
        if "status" in current:
            updated["status"] = current["status"]
        else:
            updated.pop("status", None)
    if _content(updated) != _content(current):
        meta["generation"] = int(stored_meta.get("generation", 1)) + 1
    return updated


def unchanged(new: JSON, current: JSON) -> bool:
    """True when an update would store exactly what is there (no new resourceVersion)."""
    return new == current


def check_delete_preconditions(resource: ResourceType, options: JSON, current: JSON) -> None:
    """409 when DeleteOptions.preconditions name another uid or resourceVersion."""
    pre = options.get("preconditions") or {}
    stored = current["metadata"]
    name = stored["name"]
    if pre.get("uid") and pre["uid"] != stored.get("uid"):
        raise conflict(
            resource.qualified,
            resource.group,
            resource.plural,
            name,
            f"Precondition failed: UID in precondition: {pre['uid']}, "
            f"UID in object meta: {stored.get('uid')}",
        )
    if pre.get("resourceVersion") and pre["resourceVersion"] != stored.get("resourceVersion"):
        raise conflict(
            resource.qualified,
            resource.group,
            resource.plural,
            name,
            f"Precondition failed: ResourceVersion in precondition: "
            f"{pre['resourceVersion']}, ResourceVersion in object meta: "
            f"{stored.get('resourceVersion')}",
        )


def mark_deleting(current: JSON) -> JSON:
    """The object with deletionTimestamp set: finalizers keep it until they are removed."""
    meta = {**current["metadata"], "deletionTimestamp": now(), "deletionGracePeriodSeconds": 0}
    return {**current, "metadata": meta}


def finalized(obj: JSON) -> bool:
    """True when an object marked for deletion has no finalizers left: it goes away now."""
    meta = obj["metadata"]
    return bool(meta.get("deletionTimestamp")) and not meta.get("finalizers")


def validation_errors(
    resource: ResourceType, obj: JSON, current: JSON | None, version: str
) -> list[FieldError]:
    """Everything the API server would reject about `obj` (schema, then semantics)."""
    errors = schema_errors(obj, version)
    if errors:
        return errors  # semantic rules assume the shapes are right
    if resource.plural == "resourceslices":
        return slice_errors(obj, current, version)
    errors += object_name_errors(obj["metadata"])
    if current is not None and resource.immutable_spec and obj.get("spec") != current.get("spec"):
        errors.append(invalid("spec", "<spec>", "field is immutable"))
    errors += _spec_errors(resource, obj, current, version)
    if resource.plural == "resourceclaims":
        errors += claim_status_errors(obj, current)
    return errors


def _spec_errors(
    resource: ResourceType, obj: JSON, current: JSON | None, version: str
) -> list[FieldError]:
    """The rules of a claim's, template's or class's spec (a claim's and a template's spec
    are immutable: on update only immutability is checked, as the server does)."""
    spec = obj.get("spec")
    if resource.plural == "deviceclasses":
        return class_spec_errors(spec, (current or {}).get("spec") if current else None)
    if current is not None:
        return []
    if resource.plural == "resourceclaims":
        return claim_spec_errors(spec, "spec", version)
    if resource.plural == "resourceclaimtemplates":
        return claim_spec_errors((spec or {}).get("spec"), "spec.spec", version)
    return []


def claim_status_errors(claim: JSON, current: JSON | None) -> list[FieldError]:
    """A set allocation cannot change, and status.devices may only name allocated devices."""
    status = claim.get("status") or {}
    allocation = status.get("allocation")
    errors = []
    before = ((current or {}).get("status") or {}).get("allocation")
    if before is not None and allocation is not None and allocation != before:
        errors.append(invalid("status.allocation", "<allocation>", "field is immutable"))
    results = ((allocation or {}).get("devices") or {}).get("results") or []
    allocated = {
        (r.get("driver"), r.get("pool"), r.get("device"), r.get("shareID")) for r in results
    }
    for i, entry in enumerate(status.get("devices") or []):
        key = (entry.get("driver"), entry.get("pool"), entry.get("device"), entry.get("shareID"))
        if key not in allocated:
            shown = "/".join(str(k) for k in key if k is not None)
            errors.append(
                invalid(f"status.devices[{i}]", shown, "must be an allocated device in the claim")
            )
    return errors


def name_mismatch(body_name: Any, url_name: str) -> APIError:
    """400 for a body whose metadata.name differs from the URL's name."""
    return bad_request(
        f"the name of the object ({body_name}) does not match the name on the URL ({url_name})"
    )
