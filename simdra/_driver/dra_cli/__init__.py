"""`kubectl dra`: a kubectl plugin (the `kubectl-dra` console script) that shows what
DRA drivers publish and what is allocated, for any driver, on Kubernetes 1.34 and later
(resource.k8s.io/v1), read with the plugin's own API client (`simdra._driver.kube`).

Module map: `main` (the command line), `connect` (the client, the kubeconfig, every
failure as one line), `gather` (one paged LIST per resource kind into a `Snapshot`),
`inventory` (the snapshot indexed: devices, holders, counters, health), `view` (device
rows, pure), `top` (totals per group, pure), `commands` (`devices` and `top`), `why`
and `why_cmd` (why a claim is not allocated, on the test harness's allocator),
`classes` (DeviceClass CEL selectors, on the harness's evaluator), `selectors` (one
selector evaluation for all the devices alike to it: what `why` and `--class` cost at
1,000 nodes), `render` (tables, JSON, YAML).

`devices` and `top` import nothing of the harness (a layer contract says so); `why`,
`--class` and `top --by class` load its allocator and CEL evaluator alone (the harness
package imports nothing itself: about 0.07 s of CPU and 9 MiB, `python -X importtime`),
and need simdra[demo] installed (cel-python).
"""
