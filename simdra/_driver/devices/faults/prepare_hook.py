"""The prepare hook: how the plugin obeys fail-prepare and slow-prepare faults."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from simdra._driver.devices.faults.control import FaultFile
from simdra._driver.devices.faults.errors import FaultError, FaultLockTimeout, InjectedFault

log = logging.getLogger(__name__)


class PrepareFaults:
    """Called by the preparer before it prepares each device; obeys prepare faults.

    `before_device` takes one slow prepare (sleeps) and one failing prepare (raises
    InjectedFault) of the device, where pending. Counts are taken under the fault lock
    and written back before sleeping, so a concurrent `simdra fault` is never lost.
    `close()` cuts short sleeps in progress (plugin shutdown).
    """

    def __init__(self, fault_file: FaultFile,
                 sleep: Callable[[float], object] | None = None) -> None:
        """sleep: how to wait out a slow prepare (default: a wait that `close()` ends)."""
        self._file = fault_file
        self._closed = threading.Event()
        self._sleep = sleep or self._closed.wait

    def before_device(self, pool: str, device: str) -> None:
        """Apply the device's pending prepare faults; InjectedFault when it must fail."""
        if not self._file.current().has_prepare_faults(pool, device):
            return
        try:
            effect = self._file.update(lambda s: s.consume_prepare(pool, device))
        except (FaultError, FaultLockTimeout, OSError) as err:
            log.error("prepare of %s/%s: fault injection skipped: %s", pool, device, err)
            return
        if effect.slow_seconds:
            log.info("prepare of %s/%s: injected delay of %gs", pool, device,
                     effect.slow_seconds)
            self._sleep(effect.slow_seconds)
        if effect.fail_message is not None:
            raise InjectedFault(
                f"device {pool}/{device}: {effect.fail_message} (injected by simdra fault; "
                f"{effect.fails_left} more failing prepares pending)")

    def close(self) -> None:
        """End sleeps in progress and skip future ones."""
        self._closed.set()
