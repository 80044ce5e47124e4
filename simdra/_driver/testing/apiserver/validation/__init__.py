"""The stand-in's own rule book: the semantic rules of ResourceSlices, ResourceClaims,
ResourceClaimTemplates and DeviceClasses, written from what a real kube-apiserver (1.37)
accepts and rejects.

These are deliberately not the driver's client-side validators (`simdra._driver.core.validation`),
and an import-linter contract keeps it so: a server that shares its rule book with the
client cannot catch the client's mistakes. Field paths and error types follow the API
server's `field.Error`s; the corpus in `tests/testing/apiserver_corpus.py` pins them
against answers recorded from a real server.

Modules: `field` (the error vocabulary), `sizes` (the table of size limits and how lists
and maps are walked under them), `formats` (name formats), `slices`, `devices`,
`request_policy`, `amounts` and `nodes` (ResourceSlices), `claims` (claim and template
specs), `classes` (DeviceClass spec), `selectors` (CEL selector expressions), `celtypes`
(a static type check of CEL), `decode` (quantities a real server fails to decode: 400,
not 422).
"""

from simdra._driver.testing.apiserver.validation.claims import claim_spec_errors
from simdra._driver.testing.apiserver.validation.classes import class_spec_errors
from simdra._driver.testing.apiserver.validation.decode import check_decodable
from simdra._driver.testing.apiserver.validation.formats import object_name as object_name_errors
from simdra._driver.testing.apiserver.validation.slices import slice_errors

__all__ = [
    "check_decodable",
    "claim_spec_errors",
    "class_spec_errors",
    "object_name_errors",
    "slice_errors",
]
