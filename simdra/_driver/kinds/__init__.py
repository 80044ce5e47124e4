"""simdra's own device kinds (GPU, NIC, FPGA, CPU), built like any driver author's: on the
public API (`simdra`) alone, which an import contract checks. The plugin imports them by
name when it starts (`simdra._driver.devices.kind_registry.BUILTIN_KINDS`)."""
