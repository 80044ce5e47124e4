"""Example device backends for driver authors to copy; each is one file, loaded with
`simdra run --device-backend driver.devices.examples.<module>:<Class>`."""
