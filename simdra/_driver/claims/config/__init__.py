"""Opaque device configuration: applying the config kinds the registered device kinds
declare (e.g. simdra's `simdra.dra.example.com/v1alpha1` GpuConfig and NicConfig).

DeviceClasses and claims carry driver parameters as opaque JSON (api-facts 5.1, 5.2). This
package turns them into typed settings and their effect on a prepared device; what one
config kind provides (`ConfigHandler`: decode, value rules, device rules, env) and the
strict `FieldReader` are in `simdra._driver.devices.config_handler`, the built-in handlers in
`simdra._driver.kinds`:

* `decode`: strict JSON -> a kind's config (apiVersion/kind required and known, unknown
  fields rejected, wrong JSON types rejected), every problem with its field path;
* `apply`: which entries configure which device (class entries first, claim entries
  win; `requests` filters; kind vs device type), the merged result and the checks that
  need the device.

Example (a claim's `spec.devices.config[]` entry)::

    opaque:
      driver: gpu.simdra.example.com
      parameters:
        apiVersion: simdra.dra.example.com/v1alpha1
        kind: GpuConfig
        sharing:
          strategy: MPS                 # or TimeSlicing
          mpsConfig:
            defaultActiveThreadPercentage: 50
            defaultPinnedMemoryLimit: 4Gi
"""
