"""The device lane's vocabulary: the device model, what a device kind declares and the
kinds registered with a plugin, backends (fake profiles, inventory files), sysfs helpers."""
