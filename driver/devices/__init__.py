"""Device model, quantities and device backends (fake profiles, inventory files, sysfs)."""
