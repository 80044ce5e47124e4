"""Helpers for reading a Linux sysfs tree, public as `simdra.sysfs`: tolerant file
readers, stable device names, attribute values, PCI functions and device selectors.
The backends that use them (GPUs and NICs, FPGAs) are kinds of `simdra._driver.kinds`."""
