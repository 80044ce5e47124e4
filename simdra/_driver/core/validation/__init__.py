"""Semantic validation of resource.k8s.io/v1 ResourceSlices, as the API server does it.

The OpenAPI schema only checks shapes; the real API server adds the rules of
`pkg/apis/resource/validation` (api-facts 4.2-4.8): one-of node selection, name formats,
per-device and per-slice limits, counter sets, taints and consumable-capacity request
policies. These pure functions reproduce those rules so that the inventory loader and the
publisher can check devices locally before any write. The API stand-in does not use them:
it has its own rule book (`simdra._driver.testing.apiserver.validation`, kept apart by an
import-linter contract), and a differential test makes the two agree.

Field paths and messages follow the API server's `field.Error` style, e.g.
``spec.devices[3].capacity[bandwidth].requestPolicy.default: Invalid value: "3": ...``.
Inputs are plain JSON dicts that may be malformed; nothing here raises on bad input.

Modules, from the whole object down:
- `slice`: validate_slice, validate_slice_update, immutable fields, the spec;
- `device`: validate_device, one `spec.devices[]` entry;
- `attributes`, `capacity` (requestPolicy), `counters`, `taints`, `binding_conditions`,
  `node_selection`: the rules of each part;
- `names`: name formats; `limits`: size limits and the 64/128 device limit;
- `errors`: FieldError and its constructors; `inputs`: safe readers of malformed JSON.
"""

from simdra._driver.core.validation.capacity import request_policy_errors
from simdra._driver.core.validation.counters import validate_counter_set
from simdra._driver.core.validation.device import validate_device
from simdra._driver.core.validation.errors import (
    FieldError,
    duplicate,
    forbidden,
    invalid,
    not_supported,
    required,
    too_long,
    too_many,
)
from simdra._driver.core.validation.limits import (
    MAX_ATTRIBUTE_VALUE_LENGTH,
    MAX_ATTRIBUTE_VALUES,
    MAX_ATTRIBUTES_AND_CAPACITIES,
    MAX_BINDING_CONDITIONS,
    MAX_C_IDENTIFIER_LENGTH,
    MAX_CONSUMES_COUNTERS,
    MAX_COUNTER_SETS,
    MAX_COUNTERS_PER_SET,
    MAX_DEVICES_PER_SLICE,
    MAX_DEVICES_WITH_ADVANCED_FEATURES,
    MAX_DRIVER_NAME_LENGTH,
    MAX_POOL_NAME_LENGTH,
    MAX_TAINTS_PER_DEVICE,
    MAX_VALID_VALUES,
    device_limit,
    uses_advanced_features,
)
from simdra._driver.core.validation.names import (
    dns_label_errors,
    dns_subdomain_errors,
    driver_name_errors,
    label_name_errors,
    pool_name_errors,
    qualified_name_errors,
)
from simdra._driver.core.validation.node_selection import (
    NODE_SELECTOR_OPERATORS,
    node_selector_errors,
)
from simdra._driver.core.validation.slice import (
    immutable_field_errors,
    validate_slice,
    validate_slice_spec,
    validate_slice_update,
)
from simdra._driver.core.validation.taints import TAINT_EFFECTS

__all__ = [
    "MAX_ATTRIBUTES_AND_CAPACITIES",
    "MAX_ATTRIBUTE_VALUES",
    "MAX_ATTRIBUTE_VALUE_LENGTH",
    "MAX_BINDING_CONDITIONS",
    "MAX_CONSUMES_COUNTERS",
    "MAX_COUNTERS_PER_SET",
    "MAX_COUNTER_SETS",
    "MAX_C_IDENTIFIER_LENGTH",
    "MAX_DEVICES_PER_SLICE",
    "MAX_DEVICES_WITH_ADVANCED_FEATURES",
    "MAX_DRIVER_NAME_LENGTH",
    "MAX_POOL_NAME_LENGTH",
    "MAX_TAINTS_PER_DEVICE",
    "MAX_VALID_VALUES",
    "NODE_SELECTOR_OPERATORS",
    "TAINT_EFFECTS",
    "FieldError",
    "device_limit",
    "dns_label_errors",
    "dns_subdomain_errors",
    "driver_name_errors",
    "duplicate",
    "forbidden",
    "immutable_field_errors",
    "invalid",
    "label_name_errors",
    "node_selector_errors",
    "not_supported",
    "pool_name_errors",
    "qualified_name_errors",
    "request_policy_errors",
    "required",
    "too_long",
    "too_many",
    "uses_advanced_features",
    "validate_counter_set",
    "validate_device",
    "validate_slice",
    "validate_slice_spec",
    "validate_slice_update",
]
