"""The kubelet-facing gRPC layer: registration, DRAPlugin v1/v1beta1, device health.

Entry point: `driver.kubelet.endpoints.start_kubelet_plugin`. Socket names live in
`driver.kubelet.sockets`; generated protobuf code in `driver.kubelet.gen`.
"""
