"""The stand-in's own semantic rules for ResourceClaims, ResourceClaimTemplates and
DeviceClasses, written from what a real kube-apiserver (1.36) accepts and rejects.

These are deliberately not the driver's client-side validators (`driver.core.validation`):
a server that shares its rule book with the client cannot catch the client's mistakes.
Field paths and reasons follow the API server's `field.Error`s; the corpus in
`tests/testing/apiserver_corpus.py` pins them against answers recorded from a real server.

Modules: `claims` (claim and template specs), `classes` (DeviceClass spec), `selectors`
(CEL selector expressions), `celtypes` (a static type check of CEL), `formats` (name
formats), `decode` (quantities a real server fails to decode: 400, not 422).
"""

from driver.testing.apiserver.validation.claims import claim_spec_errors
from driver.testing.apiserver.validation.classes import class_spec_errors
from driver.testing.apiserver.validation.decode import check_decodable

__all__ = ["check_decodable", "claim_spec_errors", "class_spec_errors"]
