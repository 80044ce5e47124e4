"""psutil as a second opinion on the host's interfaces.

Used only when the backend reads the real `/sys` (never for a fake tree, whose facts
psutil cannot know): where sysfs leaves an interface's MAC, MTU or speed unknown, psutil
asks the kernel another way (ioctls) and sometimes gets an answer.
"""

from __future__ import annotations

import logging

import psutil

from simdra._driver.kinds.sysfs.nics import NicFacts, NicFallback

log = logging.getLogger(__name__)


def psutil_fallback() -> NicFallback:
    """A lookup by interface name over one psutil read of all interfaces."""
    try:
        stats = psutil.net_if_stats()
        addresses = psutil.net_if_addrs()
    except OSError as err:
        log.debug("psutil cannot list interfaces; no fallback for sysfs gaps: %s", err)
        return lambda _name: None

    def lookup(name: str) -> NicFacts | None:
        stat = stats.get(name)
        if stat is None:
            return None
        mac = next((a.address for a in addresses.get(name, ()) if a.family == psutil.AF_LINK),
                   None)
        return NicFacts(
            interface=name,
            virtual=False,  # not used: fill_unknown only takes MAC, MTU and speed
            mac=mac or None,
            mtu=stat.mtu or None,
            speed_mbps=stat.speed if stat.speed > 0 else None,  # psutil: 0 = unknown
        )

    return lookup
