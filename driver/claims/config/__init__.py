"""Opaque device configuration of this driver (`simdra.dra.example.com/v1alpha1`).

DeviceClasses and claims carry driver parameters as opaque JSON (api-facts 5.1, 5.2). This
package turns them into typed settings and their effect on a prepared device:

* `types`: the kinds (`GpuConfig`, `NicConfig`) and their fields;
* `decode`: strict JSON -> types (apiVersion/kind required and known, unknown fields
  rejected, wrong JSON types rejected), every problem with its field path;
* `validate`: value rules (ranges, enums, combinations), also with field paths;
* `apply`: which entries configure which device (class entries first, claim entries
  win; `requests` filters; kind vs device type), the merged result, the checks that need
  the device (limits no larger than what the share holds) and the CDI env it yields.

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
