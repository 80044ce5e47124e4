"""The kubelet-facing gRPC layer: registration, DRAPlugin v1/v1beta1, device health.

Entry point: `simdra._driver.kubelet.endpoints.start_kubelet_plugin`. Socket names live in
`simdra._driver.kubelet.sockets`; generated protobuf code in `simdra._driver.kubelet.gen`.
"""
