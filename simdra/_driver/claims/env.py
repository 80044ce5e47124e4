"""The env vars a prepared device puts into a container (pure naming rules).

Scheme
------
Every CDI device this driver writes (one per prepared unit: a whole device, or one share
of a multi-allocatable device) sets only variables of the form::

    SIMDRA_DEVICE_<ID>_<KEY>=<value>

`<ID>` is 8 upper-case hex digits of the sha256 of the CDI device name. The CDI name
starts with the claim UID and ends with the shareID, so the ID differs between claims,
between devices, and between two shares of one device in one claim. That matters
because a container that references several claims or requests gets the env of all
their CDI devices, and the runtime keeps only one value per name: a fixed name such as
`SIMDRA_NIC_BANDWIDTH` (or an index counted within one claim) would let one device
silently overwrite another. The ID has no `_`, so a name splits unambiguously:
`SIMDRA_DEVICE_` + 8 hex + `_` + KEY.

A workload finds its devices by listing the variables that end in `_NAME`
(`env | grep '^SIMDRA_DEVICE_.*_NAME='`) and reads the rest with the same prefix. There
is deliberately no list variable: one CDI device cannot append to another's value, and a
per-claim list would also name devices of requests the container did not ask for.

Keys (present when they apply):

=============================  ===========================================================
NAME, POOL, TYPE               device name, pool, `type` attribute (gpu, nic, device)
<attribute keys>               the attributes the registered kinds name in
                               `env_attributes`, e.g. UUID (`uuid`), PARTITION_PROFILE
                               (`profile`), INTERFACE_NAME (`interfaceName`)
CDI_DEVICE                     the fully qualified CDI device id
CLAIM, CLAIM_UID, REQUEST      `ns/name`, claim UID, request(s) as allocated (`req/sub`)
SHARE_ID                       shareID of a share of a multi-allocatable device
CAPACITY_<CAP>                 what the unit holds as a quantity (`8Gi`, `1500M`): the
                               consumedCapacity of a share, the full capacity of an
                               exclusive device; absent with admin access
CAPACITY_<CAP>_VALUE           the same as an integer, rounded up (bytes for memory)
ADMIN_ACCESS=true              admin access (monitoring; reserves nothing)
PARTITION=true                 a partition of a physical device
<config keys>                  what the handler of the device's opaque config kind adds
                               (its kind's `config_handlers`), e.g.
                               GPU_SHARING_STRATEGY=TimeSlicing, NIC_MTU=9000
=============================  ===========================================================
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

from simdra._driver.claims.cdi import env_entry, env_token

ENV_PREFIX = "SIMDRA_DEVICE_"
ID_LENGTH = 8


def unit_id(cdi_name: str) -> str:
    """The `<ID>` of a CDI device's variables."""
    return hashlib.sha256(cdi_name.encode()).hexdigest()[:ID_LENGTH].upper()


def unit_prefix(cdi_name: str) -> str:
    """`SIMDRA_DEVICE_<ID>_`: the start of every variable of a CDI device."""
    return f"{ENV_PREFIX}{unit_id(cdi_name)}_"


def capacity_key(capacity: str) -> str:
    """`CAPACITY_<CAP>` for a capacity name (`memory` -> `CAPACITY_MEMORY`)."""
    return f"CAPACITY_{env_token(capacity)}"


def render_env(cdi_name: str, values: Iterable[tuple[str, str]]) -> tuple[str, ...]:
    """`NAME=value` entries for (key, value) pairs; CdiError for an invalid name."""
    prefix = unit_prefix(cdi_name)
    return tuple(env_entry(prefix + key, value) for key, value in values)
